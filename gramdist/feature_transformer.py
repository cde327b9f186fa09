"""scikit-learn front end of feature stores: :class:`FeatureTransformer` (graphs in, feature rows out).

Where :class:`~gramdist.estimator.GramTransformer` returns K(X, train), this transformer
returns one row of features per graph, for a linear model (``LinearSVC``, ``SGDClassifier``)
whose cost grows linearly with the number of graphs. It drives the same steps as
``gramdist features`` (:mod:`gramdist.engine.featurize`): the fit
(:func:`~gramdist.engine.runner.fit_in_memory`), the Nyström basis
(:func:`~gramdist.engine.featurize.nystroem_basis`: landmarks, K(L, L), eigenpairs,
projection) and the rows chunk by chunk (:func:`~gramdist.engine.featurize.features_in_memory`)
in memory, or :func:`~gramdist.engine.featurize.run_feature_plan` into a feature store, so its
rows are the CLI's rows.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gramdist.arrayops import rows_to_csr, unique_sorted, unit_rows
from gramdist.engine.nystroem import DEFAULT_EIG_CUTOFF, LANDMARK_RULES, NystroemSpec
from gramdist.estimator import GraphTransformerBase, _positive_int
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel

__all__ = ["FeatureTransformer"]


class FeatureTransformer(GraphTransformerBase):
    """Graph kernel features as a scikit-learn transformer: graphs in, one feature row per graph out.

    Two kinds of features, as ``gramdist features``:

    * **explicit** (``nystroem=None``; kernels with explicit feature vectors: ``"wl"``,
      ``"nspdk"``, ``"odd"``): each graph's exact sparse feature vector, a
      ``scipy.sparse.csr_matrix`` whose columns are the feature ids (the kernel's stable
      hashes) seen in the training graphs at ``fit``, in increasing id order (``columns_``).
      Dot products of rows are the kernel: ``X_tr @ X_te.T`` is
      ``GramTransformer(same kernel).fit(train).transform(test).T``, bit for bit with
      ``normalize=False``. A feature a graph given to ``transform`` has but no training
      graph had is dropped: its column is zero in every training row, so it cannot change a
      dot product with a training row (hence nothing a linear model fitted on the training
      rows computes); only products between two transformed graphs miss it.
    * **Nyström** (``nystroem=m``; every kernel): ``Φ(x) = Λ^{-1/2} Uᵀ K(L, x)``, a dense row
      of k ≤ m floats, from m landmark graphs L drawn from the fit sample; ``Φ Φᵀ``
      approximates the (normalised) Gram. The landmarks, K(L, L)'s kept eigenpairs and the
      projection are fitted exactly as ``gramdist features --nystroem m`` fits them (the same
      functions), so a graph's row equals its row in a feature store of the same graphs,
      kernel, seed and settings bit for bit, not just to rounding: the same state and
      landmarks give the same K(L, L) and eigendecomposition (LAPACK on one thread, signs
      fixed), and a row depends only on its graph (``pairwise`` ignores the other graphs of a
      block, the projection is a product of one fixed shape on one BLAS thread), whatever
      the chunks, workers or order. See :mod:`gramdist.engine.featurize` for the landmark
      rules, the eigenvalue cutoff and normalisation before the projection.

    A separate class rather than ``GramTransformer(output="features")``: the output (rows of
    features, not K(X, train)), half the parameters (``nystroem``, ``landmarks``,
    ``eig_cutoff``, ``chunk_size`` instead of ``tile_size``), what is kept after ``fit`` (no
    training graphs: a feature row needs none) and the model downstream (a linear one, not
    ``SVC(kernel="precomputed")``) all differ, so a switch would make each parameter mean
    something only under some value of another.

    Parameters
    ----------
    kernel : str or GraphKernel, default "wl"
        A kernel name or instance, as for :class:`~gramdist.estimator.GramTransformer`.
    kernel_params : dict or None
        Parameters of a kernel given by name (``{"h": 3}``).
    nystroem : int or None, default None
        Number m of landmark graphs for Nyström features; None: the kernel's explicit
        features (an error for a kernel without them).
    landmarks : {"kmeans++", "uniform"}, default "kmeans++"
        How the landmarks are drawn from the fit sample (kernel k-means++ seeding, or uniform
        without replacement); Nyström only.
    eig_cutoff : float, default 1e-8
        Eigenpairs of K(L, L) with ``λ ≤ eig_cutoff · λ_max`` are dropped (in [0, 1);
        :data:`gramdist.engine.featurize.DEFAULT_EIG_CUTOFF`); Nyström only.
    normalize : bool, default False
        The cosine-normalised kernel K(a, b) / sqrt(K(a, a) K(b, b)). Explicit features:
        each row is divided by sqrt(K(x, x)) of the graph's full feature vector (unit rows;
        a transformed graph's row keeps that scale after its unseen features are dropped).
        ``X_tr @ X_te.T`` then equals the normalised Gram to rounding (1e-12), not bit for
        bit: the Gram divides each dot product once, the rows are divided before it.
        Nyström: K(L, L) and K(x, L) are normalised before the projection, as in a feature
        store.
    sample_size : int or None, default None
        Training graphs the kernel's state (and the landmarks) are fitted on (None: all).
    seed : int, default 0
        Drives every random step (the fit sample, the kernel's own randomness, the landmarks).
    chunk_size : int or None, default None
        Graphs per task (and per Zarr chunk with ``store``); None:
        :func:`gramdist.engine.featurize.default_chunk_size`. The rows do not depend on it.
    store : str, os.PathLike or None
        A feature store path: ``fit`` (and ``fit_transform``) write the training graphs'
        features there exactly as ``gramdist features`` does (state, Nyström basis, rows;
        resumable, checksummed, locked); ``transform`` maps graphs (any, the training ones
        included: same rows) with that store's state and basis into a sibling store ``<store stem>.transform-<first 12 hex of X's
        checksum>.zarr`` (``gramdist features --from``). The features returned are read
        back from the store (:func:`gramdist.open_features`). None: all in memory.
    overwrite : bool, default False
        Replace a store at ``store`` made by a different computation (else an error).
    client : distributed.Client, str or None
        Where to compute, as for :class:`~gramdist.estimator.GramTransformer`.
    in_process : "auto" or bool, default "auto"
        As for :class:`~gramdist.estimator.GramTransformer`; ``"auto"`` runs in this process
        when no client is given or active and the kernel evaluations fit
        :data:`gramdist.engine.cluster.IN_PROCESS_MAX_ENTRIES`: n graphs count as an n × n
        Gram for explicit features (up to 5000 graphs), as n · m kernel values for Nyström.
    node_label, node_attr, edge_label, edge_attr, input_options
        How graphs are read, as for :class:`~gramdist.estimator.GramTransformer`.
    verbose : bool, default False
        Progress bar and status lines on stderr.

    Attributes
    ----------
    kernel_ : GraphKernel
        The fitted kernel (a validated copy of ``kernel``).
    state_ : KernelState
        Its fitted shared state.
    columns_ : ndarray of shape (n_features,), uint64, or None
        Explicit features: the feature ids of the output's columns (those of the training
        graphs, increasing). None for Nyström features.
    nystroem_ : NystroemState or None
        Nyström features: the landmark graphs (``.landmarks``), their indices among the
        training graphs (``.landmark_indices``), K(L, L)'s eigenvalues and the
        ``(m, k)`` projection. None for explicit features.
    n_features_out_ : int
        Columns of the output: ``len(columns_)``, or the Nyström rank k.
    n_train_ : int
        Number of training graphs.
    label_codes_ : dict
        Integer codes of non-integer networkx labels seen at ``fit``.
    store_ : str or None
        The training feature store (with ``store``).
    notes_ : list of str
        The kernel's notes about the training graphs (e.g. cap hits).

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline                      # doctest: +SKIP
    >>> from sklearn.svm import LinearSVC
    >>> model = make_pipeline(gramdist.FeatureTransformer("wl", kernel_params={"h": 3}, normalize=True),
    ...                       LinearSVC(C=1.0)).fit(train_graphs, y_train)
    >>> phi = gramdist.FeatureTransformer("dm", nystroem=300).fit_transform(graphs)  # (n, k) ndarray
    """

    def __init__(self, kernel: str | GraphKernel = "wl", *, kernel_params: dict[str, Any] | None = None,
                 nystroem: int | None = None, landmarks: str = "kmeans++", eig_cutoff: float = DEFAULT_EIG_CUTOFF,
                 normalize: bool = False, sample_size: int | None = None, seed: int = 0,
                 chunk_size: int | None = None, store: str | os.PathLike | None = None, overwrite: bool = False,
                 client: Any = None, in_process: bool | str = "auto", node_label: str | None = "label",
                 node_attr: str | None = None, edge_label: str | None = None, edge_attr: str | None = None,
                 input_options: dict[str, Any] | None = None, verbose: bool = False) -> None:
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.nystroem = nystroem
        self.landmarks = landmarks
        self.eig_cutoff = eig_cutoff
        self.normalize = normalize
        self.sample_size = sample_size
        self.seed = seed
        self.chunk_size = chunk_size
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
    def fit(self, X: Any, y: Any = None) -> FeatureTransformer:
        """Fit the kernel's state (and, with ``nystroem``, the landmarks and projection) on ``X``.

        Explicit features also learn their columns: the feature ids of ``X``'s graphs.

        Parameters
        ----------
        X : graphs (see :class:`~gramdist.estimator.GramTransformer`), ``n_train`` of them.
        y : array-like of shape (n_train,), optional
            Class labels or targets (reach the kernel, and the store with ``store``).

        Returns
        -------
        self
        """
        self._fit(X, y, want_rows=False)
        return self

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit on ``X`` and return its features (computed once, not again by a transform).

        Returns
        -------
        features : csr_matrix of shape (n_train, n_features) (explicit) or ndarray of shape
            (n_train, k) (Nyström), float64. Equal, bit for bit, to ``fit(X).transform(X)``.
        """
        return self._fit(X, y, want_rows=True)

    def transform(self, X: Any) -> Any:
        """Features of the graphs ``X`` with the fitted state (and basis); no refit.

        Returns
        -------
        features : csr_matrix of shape (len(X), n_features) over ``columns_`` (explicit;
            features unseen at ``fit`` dropped) or ndarray of shape (len(X), k) (Nyström),
            float64.
        """
        check_is_fitted(self, "state_")
        batch = self._new_graphs(X)
        if self.store_ is not None:
            from gramdist.engine.featurize import feature_plan

            plan = feature_plan(self._gram_plan(batch), chunk_size=self.chunk_size, nystroem=self._nystroem_spec(),
                                from_store=self.store_)
            path = self._transform_store(batch)
            self._run_into_store(plan, path)
            return self._open(path)
        from gramdist.engine.featurize import feature_plan

        plan = feature_plan(self._gram_plan(batch), chunk_size=self.chunk_size, nystroem=self._nystroem_spec())
        return self._output(self._rows(plan, batch, self._work(len(batch))))

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output's columns: ``f<16 hex digits of the feature id>`` (explicit) or
        ``nystroem<i>`` (Nyström)."""
        check_is_fitted(self, "state_")
        if self.columns_ is not None:
            return np.asarray([f"f{int(c):016x}" for c in self.columns_], dtype=object)
        return np.asarray([f"nystroem{i}" for i in range(self.n_features_out_)], dtype=object)

    @property
    def n_features_out_(self) -> int:
        check_is_fitted(self, "state_")
        return len(self.columns_) if self.columns_ is not None else self.nystroem_.rank

    # ------------------------------------------------------------------ fitting
    def _fit(self, X: Any, y: Any, want_rows: bool) -> Any:
        from gramdist.engine.featurize import feature_plan, nystroem_basis
        from gramdist.engine.runner import fit_in_memory

        self._check_params()
        batch = self._read_training(X, y)
        spec = self._nystroem_spec()
        if spec is None and not self.kernel_.has_feature_vectors:
            raise ValueError(f"kernel {self.kernel_.name} has no explicit feature vectors: set nystroem=M for "
                             "Nyström features (M landmark graphs, e.g. 1000)")
        self.columns_ = self.nystroem_ = self.store_ = None
        plan = feature_plan(self._gram_plan(batch), chunk_size=self.chunk_size, nystroem=spec)
        if self.store is not None:
            return self._fit_store(plan)
        context = self._context()
        ex = self._executor(self._work(len(batch), fit=True), batch)
        self.state_ = fit_in_memory(ex, plan.gram, context=context)
        if spec is not None:
            state_f = ex.put(self.state_, key="state")
            self.nystroem_ = nystroem_basis(ex, plan, self.state_, state_f, context)
            if self.nystroem_.attrs["m"] < spec.m:
                self.notes_.append(f"Nyström: {spec.m} landmarks asked, {self.nystroem_.attrs['m']} used (the fit "
                                   "sample's size, or every other sample graph coincides with a landmark)")
            if not want_rows:
                return None
        parts = self._rows(plan, batch, self._work(len(batch)), notes=True)
        if spec is None:
            self.columns_ = unique_sorted(np.concatenate([np.asarray(p["keys"], dtype=np.uint64) for p in parts]))
        return self._output(parts) if want_rows else None

    def _fit_store(self, plan: Any) -> Any:
        from gramdist.engine.store import FeatureStore

        path = str(self.store)
        self.notes_ = self._run_into_store(plan, path)
        store = FeatureStore.open(path)
        self.state_ = store.read_state()
        if plan.nystroem is not None:
            self.nystroem_ = store.read_nystroem()
        else:
            self.columns_ = store.columns()
        self.store_ = path
        return self._open(path)

    # ------------------------------------------------------------------ rows in memory
    def _rows(self, plan: Any, batch: GraphBatch, work: int, notes: bool = False) -> list[dict[str, Any]]:
        """Each chunk's rows of ``batch`` (``notes``: the kernel's notes on the counters become
        ``notes_``)."""
        from collections import Counter

        from gramdist.engine.featurize import features_in_memory

        parts = features_in_memory(self._executor(work, batch), plan, batch, self.state_, self.nystroem_, self._context(),
                                   self.chunk_size)
        counts: Counter = Counter()
        for part in parts:
            counts.update(part["counts"])
        if notes and counts:
            for note in self.kernel_.report_embeddings(dict(counts)) or []:
                self.notes_.append(note)
                self._context().note(note)
        return parts

    def _output(self, parts: list[dict[str, Any]]) -> Any:
        """The chunks' rows as one matrix: Nyström rows stacked, or explicit rows as CSR over
        ``columns_`` (scaled to unit rows with ``normalize``, as :func:`gramdist.open_features` does)."""
        if self.nystroem_ is not None:
            return np.concatenate([p["features"] for p in parts])
        row_nnz = np.concatenate([np.diff(np.asarray(p["indptr"], dtype=np.int64)) for p in parts])
        indptr = np.zeros(len(row_nnz) + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=indptr[1:])
        keys = np.concatenate([np.asarray(p["keys"], dtype=np.uint64) for p in parts])
        values = np.concatenate([np.asarray(p["values"], dtype=np.float64) for p in parts])
        if self.normalize:
            values = unit_rows(indptr, values, np.concatenate([p["diag"] for p in parts]))
        return rows_to_csr(indptr, keys, values, self.columns_)

    # ------------------------------------------------------------------ stores
    def _run_into_store(self, plan: Any, path: str) -> list[str]:
        from gramdist.engine.featurize import run_feature_plan
        from gramdist.errors import StoreError

        result = run_feature_plan(plan, path, self._placement(), overwrite=bool(self.overwrite),
                                  context=self._context())
        if not result.complete:  # only an interruption leaves it so; say how to go on
            raise StoreError(f"{path}: incomplete; call again to resume")
        return result.notes

    def _open(self, path: str) -> Any:
        from gramdist.engine.store import open_features

        return open_features(path, normalize=bool(self.normalize), columns=self.columns_)[0]

    # ------------------------------------------------------------------ helpers
    def _check_params(self) -> None:
        if self.nystroem is not None and not _positive_int(self.nystroem):
            raise ValueError(f"nystroem must be a positive integer (landmark graphs) or None, got {self.nystroem!r}")
        if self.landmarks not in LANDMARK_RULES:
            raise ValueError(f"landmarks must be one of {', '.join(LANDMARK_RULES)}, got {self.landmarks!r}")
        if (isinstance(self.eig_cutoff, bool) or not isinstance(self.eig_cutoff, (int, float, np.floating))
                or not 0.0 <= self.eig_cutoff < 1.0):
            raise ValueError(f"eig_cutoff must be a number in [0, 1), got {self.eig_cutoff!r}")
        if self.chunk_size is not None and not _positive_int(self.chunk_size):
            raise ValueError(f"chunk_size must be a positive integer or None, got {self.chunk_size!r}")
        self._check_common_params()

    def _nystroem_spec(self) -> NystroemSpec | None:
        if self.nystroem is None:
            return None
        return NystroemSpec(int(self.nystroem), str(self.landmarks), float(self.eig_cutoff))

    def _gram_plan(self, batch: GraphBatch) -> Any:
        """The Gram plan a feature plan is made of: kernel, graphs, fit, normalisation. One tile
        (never computed: only the fit and the landmarks' Gram run, with their own plans)."""
        from gramdist.engine.plan import plan_gram
        from gramdist.jobs import FitSpec, GramSpec

        return plan_gram(self.kernel_, batch, gram=GramSpec(tile_size=max(1, len(batch)),
                                                            normalize=bool(self.normalize)),
                         fit=FitSpec(self.sample_size, int(self.seed)), specs=(self._spec(batch), None),
                         job=self._job())

    def _work(self, n: int, fit: bool = False) -> int:
        """Kernel evaluations of ``n`` graphs' features, in Gram entries (see ``in_process``)."""
        if self.nystroem is None:
            return n * n
        pool = n if self.sample_size is None else min(n, int(self.sample_size))
        return (n + (pool if fit else 0)) * int(self.nystroem)

    def _job_settings(self) -> dict[str, Any]:
        return {"gram": {"normalize": bool(self.normalize)},
                "features": {"nystroem": self.nystroem, "landmarks": self.landmarks,
                             "eig_cutoff": float(self.eig_cutoff), "chunk_size": self.chunk_size}}
