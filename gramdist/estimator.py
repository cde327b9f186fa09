"""scikit-learn front end: :class:`GramTransformer` (graphs in, Gram out) and :func:`compute_gram`.

The transformer drives the engine's steps — :func:`~gramdist.engine.plan.plan_gram`, then
:func:`~gramdist.engine.runner.fit_in_memory` / :func:`~gramdist.engine.runner.compute_in_memory`
in memory, or :func:`~gramdist.engine.runner.run_plan` (what ``gramdist run`` calls) into a
Zarr store — so its Gram is the CLI's, bit for bit. Where it runs is chosen per call by the
engine's one placement policy (:class:`gramdist.engine.placement.Placement`): the ``client``
given, else the active ``distributed.Client``, else this process for Grams of at most
:data:`~gramdist.engine.placement.IN_PROCESS_MAX_ENTRIES` entries, else one LocalCluster shared
by every call of the Python process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, python_numbers

__all__ = ["GramTransformer", "compute_gram"]

#: in-process tiles: one tile per side up to this many graphs (fewer, larger products are
#: faster in one process: NCI1's WL Gram took 0.57 s of CPU as one tile, 0.74 s in 1028-graph
#: tiles, 1.37 s in 256-graph tiles); on a cluster or into a store, at most 1024 (parallelism,
#: chunk size)
_IN_PROCESS_TILE = 5000
_CLUSTER_TILE = 1024
#: ... but split into one part per thread of the in-process pool while parts keep this many
#: graphs, so that its threads share the embeddings and the tiles
_THREAD_TILE_MIN = 1024


class GraphTransformerBase(TransformerMixin, BaseEstimator):
    """What the graph transformers share (:class:`GramTransformer`, and
    :class:`gramdist.FeatureTransformer`): reading graphs, the kernel, where to run, cloning.

    Subclasses have the parameters ``kernel``, ``kernel_params``, ``sample_size``, ``seed``,
    ``client``, ``in_process``, ``node_label``, ``node_attr``, ``edge_label``, ``edge_attr``,
    ``input_options`` and ``verbose``, with the meanings :class:`GramTransformer` documents.
    """

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # graphs, not a numeric matrix
        tags.transformer_tags.preserves_dtype = []  # float64 out whatever comes in
        return tags

    def __sklearn_clone__(self) -> GraphTransformerBase:
        """An unfitted copy; a ``distributed.Client`` given as ``client`` is shared, not copied."""
        params = self.get_params(deep=False)
        params = {k: v if k == "client" else clone(v, safe=False) for k, v in params.items()}
        return type(self)(**params)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if not isinstance(state.get("client"), (str, type(None))):
            state["client"] = None  # a live client does not travel; the copy uses the active one
        return state

    def _read_training(self, X: Any, y: Any) -> GraphBatch:
        """Read ``X`` (learning label codes), attach ``y``, make the kernel: sets ``kernel_``,
        ``n_train_``, ``label_codes_`` and ``notes_``; returns the graphs."""
        codes: dict[str, dict] = {}
        batch = self._graphs(X, codes=codes)
        if y is not None:
            y = np.asarray(y)
            if y.ndim != 1 or len(y) != len(batch):
                raise ValueError(f"y has shape {y.shape}; expected ({len(batch)},), one value per graph")
            batch = _with_y(batch, y)
        self.kernel_ = self._make_kernel()
        self.n_train_ = len(batch)
        self.label_codes_ = codes
        self.notes_ = []
        return batch

    def _check_common_params(self) -> None:
        if self.sample_size is not None and not _positive_int(self.sample_size):
            raise ValueError(f"sample_size must be a positive integer or None, got {self.sample_size!r}")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if self.in_process not in (True, False, "auto"):
            raise ValueError(f"in_process must be True, False or 'auto', got {self.in_process!r}")
        if self.input_options is not None and not isinstance(self.input_options, Mapping):
            raise ValueError(f"input_options must be a dict or None, got {type(self.input_options).__name__}")

    def _make_kernel(self) -> GraphKernel:
        from gramdist.kernels import make_kernel

        if isinstance(self.kernel, GraphKernel):
            if self.kernel_params:
                raise ValueError("kernel_params apply to a kernel given by name; set the parameters "
                                 f"on the instance instead ({self.kernel!r})")
            kernel = type(self.kernel)(**python_numbers(self.kernel.get_params()))
            kernel.validate()
            return kernel
        if not isinstance(self.kernel, str):
            raise ValueError(f"kernel must be a kernel name or a GraphKernel, got {type(self.kernel).__name__}")
        return make_kernel(self.kernel, **(self.kernel_params or {}))

    def _graphs(self, X: Any, codes: dict[str, dict]) -> GraphBatch:
        from gramdist.datasets.inputs import as_graph_batch

        return as_graph_batch(X, node_label=self.node_label, node_attr=self.node_attr, edge_label=self.edge_label,
                              edge_attr=self.edge_attr, input_options=self.input_options, codes=codes)

    def _new_graphs(self, X: Any) -> GraphBatch:
        """Graphs given to ``transform``: read with the label codes learned at ``fit``."""
        return self._graphs(X, codes={k: dict(v) for k, v in self.label_codes_.items()})

    def _placement(self) -> Any:
        """Where this estimator's computations run (the engine's one policy)."""
        from gramdist.engine.placement import Placement

        return Placement(client=self.client, in_process=self.in_process, shared=True)

    def _executor(self, n_entries: int, *graphs: GraphBatch) -> Any:
        """An executor for ``n_entries`` kernel values over ``graphs``, the kernel's code imported
        on its workers (the placement's executors of a Python front end outlive the call:
        nothing to close)."""
        from gramdist.engine.runner import warm

        with self._placement().executor(n_entries, n_nodes=self._weighted_nodes(*graphs)) as ex:
            return warm(ex, type(self.kernel_).__module__)

    def _weighted_nodes(self, *graphs: GraphBatch) -> int:
        """The nodes of ``graphs`` as the placement counts them (the kernel's ``node_weight`` each)."""
        return self.kernel_.placement_nodes(sum(int(getattr(g, "n_nodes", 0)) for g in graphs))

    def _spec(self, batch: GraphBatch) -> dict[str, Any]:
        return {"python": batch.name or "graphs"}

    def _transform_store(self, rows: GraphBatch) -> str:
        """Where ``transform`` writes with ``store``: ``<store stem>.transform-<12 hex of rows' checksum>.zarr``."""
        from gramdist.engine.store import Location

        base = Location(self.store)
        stem = base.name[:-5] if base.name.endswith(".zarr") else base.name
        return str(base.sibling(f"{stem}.transform-{rows.checksum()[:12]}.zarr"))

    def _job(self) -> dict[str, Any]:
        """The estimator's settings, recorded in a store's ``job`` attribute (not its fingerprint)."""
        return {"estimator": type(self).__name__,
                "kernel": {"name": self.kernel_.name, **self.kernel_.get_params()},
                "fit": {"sample_size": self.sample_size, "seed": int(self.seed)},
                **self._job_settings(),
                "input": {"node_label": self.node_label, "node_attr": self.node_attr, "edge_label": self.edge_label,
                          "edge_attr": self.edge_attr, "input_options": dict(self.input_options or {})}}

    def _job_settings(self) -> dict[str, Any]:
        """The subclass's own sections of :meth:`_job`."""
        return {}

    def _context(self) -> Any:
        """Progress and status lines (``verbose``), as a run context."""
        from gramdist.engine.context import RunContext, silent, stderr_log

        return RunContext(progress=bool(self.verbose), log=stderr_log if self.verbose else silent)


class GramTransformer(GraphTransformerBase):
    """Graph kernel as a scikit-learn transformer: graphs in, Gram matrix out.

    ``fit(X)`` fits the kernel's shared state on a sample of the graphs ``X`` and embeds them as
    the reference ("train") graphs; ``transform(X2)`` returns K(X2, train) of shape
    ``(len(X2), n_train)``; ``fit_transform(X)`` returns the symmetric K(train, train),
    computing only the tiles on and above the diagonal. ``fit(A).transform(A)`` equals
    ``fit_transform(A)`` bit for bit. Feed the result to ``SVC(kernel="precomputed")``,
    e.g. in ``Pipeline([("gram", GramTransformer(...)), ("svc", SVC(kernel="precomputed"))])``.

    Parameters
    ----------
    kernel : str or GraphKernel, default "wl"
        A kernel name (``"wl"``, ``"dm"``, ``"power"``, ``"flg"``, ``"mlg"``, ``"matching"``,
        ``"nspdk"``, ``"odd"``) or a kernel instance such as
        ``gramdist.kernels.WLSubtreeKernel(h=3)``; an instance is a nested estimator, so a grid
        search can set ``gram__kernel__h``.
    kernel_params : dict or None
        Parameters of a kernel given by name (``{"h": 3}``); not allowed with an instance.
    normalize : bool, default False
        Cosine normalisation K(a, b) / sqrt(K(a, a) K(b, b)), each side with its own K(g, g).
    sample_size : int or None, default None
        Graphs of ``X`` the kernel's shared state is fitted on (None: all).
    seed : int, default 0
        Drives every random step (the sample, the kernel's own randomness): the same seed
        gives the same Gram bits wherever it runs.
    tile_size : int or None, default None
        Side of the Gram's tiles (Zarr chunks in a store). None: in process, one tile per side
        up to 5000 graphs, or one per thread of the process's pool while each keeps 1024 graphs;
        at most 1024 on a cluster or in a store. The values do not depend on it.
    store : str, os.PathLike or None
        A Zarr store path: ``fit_transform`` writes K(train, train) there exactly as
        ``gramdist run`` does (resumable, checksummed, locked) and returns a lazy
        ``dask.array`` over it; ``transform`` writes K(X, train) to a sibling store
        ``<store stem>.transform-<first 12 hex of X's checksum>.zarr`` and returns a dask array
        over that. None: NumPy arrays in memory.
    overwrite : bool, default False
        Replace a store at ``store`` made by a different computation (else an error).
    client : distributed.Client, str or None
        Where to compute: a client, or a scheduler address (``tcp://HOST:PORT``). None: the
        active client if there is one, else see ``in_process``.
    in_process : "auto" or bool, default "auto"
        True: always in this process; False: on ``client``, the active client, or the shared
        LocalCluster (started once per Python process); ``"auto"``: in this process when no
        client is given or active and the Gram has at most 25 million entries
        (:data:`gramdist.engine.cluster.IN_PROCESS_MAX_ENTRIES`), else on the shared cluster.
    node_label, node_attr, edge_label, edge_attr : str or None
        Keys of networkx node / edge data read as categorical labels and numerical attributes
        (``node_label="label"`` by default; None to use none). Non-integer labels get integer
        codes learned at ``fit`` and kept for ``transform``.
    input_options : dict or None
        Options of the molecule reader for RDKit molecules, SMILES, SDF and CSV inputs
        (e.g. ``{"smiles_column": "smiles", "hydrogens": "explicit"}``); see
        :func:`gramdist.datasets.molecules.molecules_to_batch`.
    verbose : bool, default False
        Progress bar and status lines on stderr.

    Attributes
    ----------
    kernel_ : GraphKernel
        The fitted kernel (a copy of ``kernel``, validated).
    state_ : KernelState
        Its fitted shared state.
    train_ : GraphBatch
        The reference graphs (``n_train_`` of them); the Gram's columns.
    n_train_ : int
    tile_size_ : int
        The tile side used.
    label_codes_ : dict
        Integer codes of non-integer networkx labels seen at ``fit``.
    notes_ : list of str
        The kernel's notes about the fit and the training Gram (e.g. cap hits); a verbose
        transformer also logs the notes of each ``transform``.

    Notes
    -----
    ``X`` may be a :class:`~gramdist.graphs.GraphBatch` (or the list of its graphs that
    scikit-learn's cross-validation makes of it), a list of networkx graphs, a TU folder, a
    dataset name, a job-style ``dataset:`` mapping, or molecules (with ``gramdist[chem]``);
    see :func:`gramdist.datasets.inputs.as_graph_batch`. ``y`` given to ``fit`` reaches the
    kernel (the matching kernel's NCA learns from it) and is written to the store.
    In process, the training graphs' embeddings are kept from ``fit`` and reused by every
    ``transform``; on a cluster they are recomputed per call.
    """

    def __init__(self, kernel: str | GraphKernel = "wl", *, kernel_params: dict[str, Any] | None = None,
                 normalize: bool = False, sample_size: int | None = None, seed: int = 0,
                 tile_size: int | None = None, store: str | os.PathLike | None = None, overwrite: bool = False,
                 client: Any = None, in_process: bool | str = "auto", node_label: str | None = "label",
                 node_attr: str | None = None, edge_label: str | None = None, edge_attr: str | None = None,
                 input_options: dict[str, Any] | None = None, verbose: bool = False) -> None:
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.normalize = normalize
        self.sample_size = sample_size
        self.seed = seed
        self.tile_size = tile_size
        self.store = store
        self.overwrite = overwrite
        self.client = client
        self.in_process = in_process
        self.node_label = node_label
        self.node_attr = node_attr
        self.edge_label = edge_label
        self.edge_attr = edge_attr
        self.input_options = input_options
        self.verbose = verbose

    # ------------------------------------------------------------------ scikit-learn API
    def fit(self, X: Any, y: Any = None) -> GramTransformer:
        """Fit the kernel's state on (a sample of) ``X`` and embed ``X`` as the training graphs.

        Parameters
        ----------
        X : graphs (see the class notes), ``n_train`` of them.
        y : array-like of shape (n_train,), optional
            Class labels or targets of the graphs.

        Returns
        -------
        self
        """
        from gramdist.engine import steps
        from gramdist.engine.executor import InlineExecutor
        from gramdist.engine.runner import fit_in_memory

        self._begin_fit(X, y)
        plan = self._plan(self.train_)
        ex = self._executor(self.n_train_ ** 2, self.train_)
        # the training graphs' embeddings are kept for transform where they are plain values:
        # in this process (a cluster's futures would not outlive its client) and not for a store
        keep = isinstance(ex, InlineExecutor) and self.store is None
        self._cache = steps.ColumnCache(self.tile_size_) if keep else None
        self.state_ = fit_in_memory(ex, plan, context=self._context(), cache=self._cache)
        return self

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit on ``X`` and return the symmetric K(X, X), computing only the upper tiles.

        Returns
        -------
        K : ndarray of shape (n_train, n_train), float64; a dask array over the store with
            ``store``.
        """
        if self.store is None:
            self.fit(X, y)
            gram, self.notes_ = self._gram_in_memory(self.train_, symmetric=True)
            return gram
        from gramdist.engine.store import read_state

        self._begin_fit(X, y)
        self._cache = None
        path = str(self.store)
        self.notes_ = self._run_into_store(self._plan(self.train_), path)
        self.state_ = read_state(path)
        return self._open(path)

    def transform(self, X: Any) -> Any:
        """K(X, train): each row one graph of ``X``, each column one training graph.

        Returns
        -------
        K : ndarray of shape (len(X), n_train), float64; a dask array over a store with
            ``store``. When ``X`` holds exactly the training graphs this is, bit for bit,
            what ``fit_transform`` returned.
        """
        check_is_fitted(self, "state_")
        batch = self._new_graphs(X)
        symmetric = _same_graphs(batch, self.train_)
        if self.store is None:
            return self._gram_in_memory(batch, symmetric)[0]
        if symmetric:
            path = str(self.store)
            self._run_into_store(self._plan(self.train_), path)
        else:
            path = self._transform_store(batch)
            self._run_into_store(self._plan(self.train_, batch), path)
        return self._open(path)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_cache", None)  # derived (the training embeddings); rebuilt by the next transform
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if "state_" in state and self.store is None:
            from gramdist.engine import steps

            self._cache = steps.ColumnCache(self.tile_size_)

    # ------------------------------------------------------------------ helpers
    def _begin_fit(self, X: Any, y: Any) -> None:
        """Check the parameters, read ``X`` (learning label codes), attach ``y``: the fitted
        attributes every path sets before computing."""
        self._check_params()
        batch = self._read_training(X, y)
        self.train_ = batch
        self.tile_size_ = self._tile(len(batch), self._weighted_nodes(batch))

    def _check_params(self) -> None:
        if self.tile_size is not None and not _positive_int(self.tile_size):
            raise ValueError(f"tile_size must be a positive integer or None, got {self.tile_size!r}")
        self._check_common_params()

    def _tile(self, n_train: int, n_nodes: int = 0) -> int:
        if self.tile_size is not None:
            return int(self.tile_size)
        # the tile follows the training graphs only, so every transform can reuse fit's chunks
        in_process = self.store is None and self._placement().runs_here(n_train ** 2, n_nodes)
        if not in_process:
            return -(-n_train // -(-n_train // _CLUSTER_TILE))  # ceil(n / ceil(n / cap)): equal tiles, none tiny
        from gramdist.engine.placement import in_process_threads

        parts = max(-(-n_train // _IN_PROCESS_TILE), min(in_process_threads(), -(-n_train // _THREAD_TILE_MIN)))
        return -(-n_train // max(parts, 1))

    def _plan(self, cols: GraphBatch, rows: GraphBatch | None = None) -> Any:
        from gramdist.engine.plan import plan_gram
        from gramdist.jobs import FitSpec, GramSpec

        return plan_gram(self.kernel_, cols, rows, gram=GramSpec(tile_size=self.tile_size_,
                                                                 normalize=bool(self.normalize)),
                         fit=FitSpec(self.sample_size, int(self.seed)),
                         specs=(self._spec(cols), None if rows is None else self._spec(rows)), job=self._job())

    def _gram_in_memory(self, rows: GraphBatch, symmetric: bool) -> tuple[np.ndarray, list[str]]:
        from gramdist.engine.executor import InlineExecutor
        from gramdist.engine.runner import compute_in_memory

        plan = self._plan(self.train_, None if symmetric else rows)
        ex = self._executor(plan.grid.n_rows * plan.grid.n_cols, self.train_, *(() if symmetric else (rows,)))
        inline = isinstance(ex, InlineExecutor)
        result = compute_in_memory(ex, plan, state=self.state_, context=self._context(),
                                   cache=getattr(self, "_cache", None) if inline else None)
        return result.gram, result.notes

    def _run_into_store(self, plan: Any, path: str) -> list[str]:
        from gramdist.engine.runner import run_plan

        result = run_plan(plan, path, self._placement(), overwrite=bool(self.overwrite), context=self._context())
        if not result.complete:  # only an interruption leaves it so; say how to go on
            from gramdist.errors import StoreError

            raise StoreError(f"{path}: incomplete; call again to resume")
        return result.notes

    @staticmethod
    def _open(path: str) -> Any:
        from gramdist.engine.store import open_gram

        return open_gram(path, as_dask=True)[0]

    def _job_settings(self) -> dict[str, Any]:
        return {"gram": {"tile_size": self.tile_size_, "normalize": bool(self.normalize)}}


def _positive_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _with_y(batch: GraphBatch, y: np.ndarray) -> GraphBatch:
    """``batch`` with class labels ``y``: a shallow copy, the caller's batch unchanged."""
    import copy

    out = copy.copy(batch)
    out.y = y
    return out


def _same_graphs(a: GraphBatch, b: GraphBatch) -> bool:
    """Whether two batches hold the same graphs in the same order (ids, names and y aside)."""
    if len(a) != len(b) or a.n_nodes != b.n_nodes or a.n_edges != b.n_edges:
        return False
    for attr in ("node_offsets", "edge_offsets", "edges", "node_labels", "node_attrs", "edge_labels", "edge_attrs"):
        x, z = getattr(a, attr), getattr(b, attr)
        if (x is None) != (z is None):
            return False
        if x is not None:
            if attr.endswith("offsets"):
                x, z = x - x[0], z - z[0]
            if not np.array_equal(x, z):
                return False
    return True


def compute_gram(X: Any, kernel: str | GraphKernel = "wl", *, out: str | os.PathLike | None = None,
                 **params: Any) -> Any:
    """The Gram K(X, X) in one call: ``GramTransformer(kernel, ...).fit_transform(X)``.

    Parameters
    ----------
    X : graphs (see :class:`GramTransformer`).
    kernel : str or GraphKernel, default "wl"
    out : path of a Zarr store to write (then a lazy dask array over it is returned), or None.
    **params : the kernel's parameters (``h=5``) and any :class:`GramTransformer` parameter
        (``normalize=True``, ``seed=1``, ``client=...``); a name that is both is refused.

    Returns
    -------
    K : ndarray of shape (len(X), len(X)), or a dask array over ``out``.

    Examples
    --------
    >>> K = gramdist.compute_gram("MUTAG", kernel="wl", h=3, normalize=True)   # doctest: +SKIP
    """
    own = set(GramTransformer().get_params(deep=False)) - {"kernel", "kernel_params", "store"}
    estimator_params = {k: v for k, v in params.items() if k in own}
    kernel_params = {k: v for k, v in params.items() if k not in own}
    if isinstance(kernel, str):
        from gramdist.kernels import kernel_class

        clash = own & set(kernel_class(kernel).param_names()) & set(params)
        if clash:
            raise ValueError(f"compute_gram: {', '.join(sorted(clash))} names both a kernel parameter and an "
                             "estimator parameter; use GramTransformer(kernel_params=...) instead")
    elif kernel_params:
        raise ValueError(f"compute_gram: unknown parameter(s) {', '.join(sorted(kernel_params))} "
                         "(set a kernel instance's parameters on the instance)")
    transformer = GramTransformer(kernel, kernel_params=kernel_params or None, store=out, **estimator_params)
    return transformer.fit_transform(X)
