"""The kernel contract: ``fit -> state``, ``embed -> embeddings``, ``pairwise -> block``.

Every graph kernel of gramdist is one subclass of :class:`GraphKernel`. The engine drives
all of them the same way and never knows which one it runs:

1. ``state = kernel.fit(sample, seed)`` once, on a sample of the graphs. The state is a
   :class:`KernelState`: named NumPy arrays plus a JSON-serialisable dict. The engine stores it
   in the Zarr store (arrays under ``state/``, the dict as attributes), never as a pickle, and
   reloads it with :meth:`KernelState.from_store_parts` for later runs (resume, test graphs).
2. ``emb = kernel.embed(chunk, state)`` on each chunk of graphs, in parallel on the workers.
   ``emb`` has one row per graph of the chunk (``len(emb) == len(chunk)``) and supports
   ``emb[i:j]`` slicing. A graph's embedding must depend only on that graph and the state,
   never on which other graphs share its chunk.
3. ``block = kernel.pairwise(emb_a, emb_b, state)`` on each tile: a dense float64 array of
   shape ``(len(emb_a), len(emb_b))``. ``kernel.self_similarity(emb, state)`` gives the
   ``(len(emb),)`` diagonal K(g, g) used for cosine normalisation. For the Gram to be the same
   whatever the tile size, K(a, b) must be computed by the same arithmetic whichever other
   graphs are in the tile (beware BLAS calls whose rounding depends on matrix shapes).
4. Optional notes for the user: ``kernel.report(state)`` about the fitted state, and
   ``kernel.report_embeddings(counts)`` about the embedded graphs, where ``counts`` sums
   ``kernel.embedding_counts(emb)`` (small integer counters) over every chunk embedded in the
   run; the engine gathers these only for kernels that set ``has_embedding_counts = True``.
5. Optional explicit features: a kernel whose value is the dot product of explicit sparse
   feature vectors sets ``has_feature_vectors = True`` and implements
   ``kernel.feature_vectors(emb, state)``, returning a :class:`FeatureRows` (CSR-like rows,
   stable ``uint64`` feature ids) whose dot products are exactly what ``pairwise`` computes.
   The engine's feature stores (``gramdist features``) write those rows as they are; kernels
   without them get Nyström features, which need only ``pairwise``.

Kernels never import Dask: they are plain NumPy/SciPy code that the engine schedules.
Parameters are keyword arguments of ``__init__`` stored unchanged as attributes (the
scikit-learn convention), so :meth:`GraphKernel.get_params` can list them and a job file can
set them; :meth:`GraphKernel.validate` checks them and raises :class:`~gramdist.errors.JobError`.
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch

_ARRAY_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class FeatureRows(Protocol):
    """Explicit sparse feature vectors of a chunk of graphs, one row per graph.

    ``indptr`` (G+1,) int64: the features of graph g are ``keys[indptr[g]:indptr[g+1]]``;
    ``keys`` (nnz,) uint64: feature ids, stable across runs, processes and out-of-sample
    graphs (hashes), strictly increasing within a row; ``values`` (nnz,) float64.
    """

    indptr: np.ndarray
    keys: np.ndarray
    values: np.ndarray

    def __len__(self) -> int: ...


class Embedding(Protocol):
    """What the engine needs of an embedding: a length and slicing by graph."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice) -> Embedding: ...


#: ``node_weight`` of a kernel whose embedding is one linear pass over nodes and edges at about a
#: microsecond per node (WL relabelling, histograms, hashes): D&D's 335,000 nodes then weigh
#: 167,500, under ``in_process: auto``'s limit, and run in the command's own process. Measured
#: (2026-11-28, 2 cores, ``gramdist run`` of D&D end to end): WL 3.7-4.3 s on a two-worker
#: LocalCluster (1.0-1.4 s of it starting the cluster), 1.8-2.0 s in process (embed 0.2 s).
LINEAR_NODE_WEIGHT = 0.5
#: ``node_weight`` of a kernel whose embeddings run in the in-process pool of threads
#: (``embeds_in_threads``: LAPACK and NumPy over whole chunks) and cost more than a linear pass:
#: in process both cores are busy as on two workers, without starting a cluster or shipping
#: embeddings between processes. Measured (2026-11-28, ``benchmarks/bench_placement_dd.py
#: --rows pyramid_match dm sp graphlet lovasz_theta nspdk``, medians of two, D&D end to end):
#: pyramid match 16.5 s on two workers, 13.6 s in process; DM 9.3 s, 7.2 s (and less memory
#: for both); SVM-θ (its equal-size graphs stacked through LAPACK) 5.2-5.4 s either way, with
#: 18 % less CPU in process (2026-11-28, 6 alternated pairs). Kernels whose embeddings run one
#: chunk at a time in process lose there (shortest path 17.1 s against 20.7 s, graphlets 13.3
#: against 17.0 s, NSPDK 23.9 against 25.9 s) and keep a weight of 1.
POOLED_NODE_WEIGHT = 0.5


@dataclass
class KernelState:
    """Fitted state of a kernel: named arrays and JSON-serialisable attributes.

    ``arrays`` names must match ``[A-Za-z0-9_.-]+`` (they become Zarr array names);
    ``attrs`` must survive ``json.dumps`` (plain ints, floats, strings, lists, dicts).
    """

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.arrays:
            if not _ARRAY_NAME.match(name):
                raise ValueError(f"state array name {name!r} must match [A-Za-z0-9_.-]+")

    @classmethod
    def from_store_parts(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> KernelState:
        return cls(arrays=dict(arrays), attrs=dict(attrs))


class DerivedCache:
    """Base of an embedding dataclass whose ``_cache`` field holds arrays derived from its own
    (built once per process, on first use): it is pickled (to and from Dask workers) without
    the cache, which the receiving process rebuilds when it needs it."""

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_cache"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache = {}


class GraphKernel:
    """Base class of all graph kernels; see the module docstring for the contract.

    Subclasses set ``name`` (the job file's ``kernel.name``) and implement :meth:`fit`,
    :meth:`embed` and :meth:`pairwise`; :meth:`self_similarity` has a generic default
    that subclasses should override with something faster.
    """

    name: ClassVar[str] = ""
    #: whether :meth:`feature_vectors` gives explicit features whose dot product is the kernel
    has_feature_vectors: ClassVar[bool] = False
    #: whether the kernel uses node attributes / edge labels if the dataset has them
    uses_node_attributes: ClassVar[bool] = False
    #: whether a chunk's embedding may run in the in-process pool of threads (as tiles do): True
    #: where its work mostly releases the GIL (LAPACK per graph, NumPy sorts and ufuncs on large
    #: arrays); False where it is many small Python-level calls, which two threads run slower
    #: than one (NCI1: the adaptive matching kernel's embedding 44 s in one thread, 52 s in two)
    embeds_in_threads: ClassVar[bool] = False
    #: whether a chunk's embedding holds the GIL for most of its time even so (SciPy's SuperLU,
    #: many short NumPy calls per graph): the ``gramdist`` executable then forks worker
    #: processes at its start and a run in process embeds there (``gramdist.engine.processes``)
    embeds_in_processes: ClassVar[bool] = False
    #: whether :meth:`embed`, :meth:`self_similarity` and :meth:`embedding_counts` never read the
    #: fitted state (the embedding is a fixed function of each graph, as WL's hashed labels): the
    #: engine then embeds while the fit runs, with an empty state (tested per kernel: the same bits)
    embeds_without_state: ClassVar[bool] = False
    #: whether :meth:`embedding_counts` gives counters worth gathering over a run
    has_embedding_counts: ClassVar[bool] = False
    #: whether a store should keep this kernel's embeddings for appends (``gram.keep_embeddings``):
    #: False where embedding a chunk costs no more than reading it back (a count in one pass over
    #: the labels: a few milliseconds per thousand graphs, as long as opening the kept arrays)
    embedding_worth_keeping: ClassVar[bool] = True
    #: what one node of a graph weighs against ``in_process: auto``'s limit of nodes (see
    #: ``gramdist.engine.placement``): 1 where the work per node is microseconds, or runs in
    #: compiled code outside the GIL (a pool of threads shares it); more where embeddings or
    #: tiles hold the GIL for far longer (an SDP per graph, a linear system per pair), so that
    #: a batch worth more than a few seconds of such work gets worker processes, not one core
    node_weight: float = 1.0
    #: parameters added after stores were written with this kernel, each with the value that
    #: is the kernel from before it (its default): a store records one only when it differs
    #: (:meth:`recorded_params`), so a store written before it still resumes and appends
    later_params: ClassVar[dict[str, Any]] = {}
    #: the version of the kernel's definition as computed: bumped by any change that alters its
    #: values or its embeddings' bits (another solver, other hash keys), so that no store ever
    #: holds, resumes or grows with values of two versions (:meth:`definition_versions`)
    version: ClassVar[int] = 1

    def embeds_in_worker_process(self, graphs: GraphBatch) -> bool:
        """Whether the embedding of chunk ``graphs`` goes to the command's forked workers where
        it has them (``embeds_in_processes``); a kernel whose GIL-bound work depends on the
        graphs decides per chunk."""
        return self.embeds_in_processes

    def placement_nodes(self, n_nodes: int) -> int:
        """``n_nodes`` nodes as ``in_process: auto``'s node limit counts them: ``node_weight`` each."""
        return int(n_nodes * self.node_weight)

    # ------------------------------------------------------------ params
    @classmethod
    def param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self" and sig.parameters[p].kind is
                inspect.Parameter.KEYWORD_ONLY or (p != "self" and sig.parameters[p].kind is
                inspect.Parameter.POSITIONAL_OR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters as given to ``__init__`` (JSON-serialisable).

        A kernel is a scikit-learn-style nested estimator: ``clone`` rebuilds it from these,
        and ``GridSearchCV`` sets them as ``gram__kernel__h``. Kernels hold no estimators, so
        ``deep`` changes nothing.
        """
        return {p: getattr(self, p) for p in self.param_names()}

    def definition_versions(self) -> dict[str, int]:
        """``{name: version}`` of this kernel and of any kernel it computes with whose
        :attr:`version` is past 1. A store records it and refuses to be resumed, grown, searched
        or fitted from by code whose record differs; kernels still at version 1 are left out,
        so that stores written before versions were recorded still match."""
        return {self.name: int(self.version)} if self.version != 1 else {}

    def recorded_params(self) -> dict[str, Any]:
        """The parameters a store records: :meth:`get_params` less any of :attr:`later_params`
        at the value it was added with."""
        later = self.later_params
        return {k: v for k, v in self.get_params().items() if not (k in later and v == later[k])}

    def set_params(self, **params: Any) -> GraphKernel:
        """Set parameters by name (scikit-learn's ``set_params``); checked at the next ``validate``.

        Raises
        ------
        ValueError
            A name that is not a parameter of this kernel (what scikit-learn raises).
        """
        allowed = self.param_names()
        for key, value in params.items():
            if key not in allowed:
                raise ValueError(f"invalid parameter {key!r} for kernel {type(self).__name__}; "
                                 f"valid parameters: {', '.join(allowed)}")
            setattr(self, key, value)
        return self

    def validate(self) -> None:
        """Raise :class:`JobError` naming the first out-of-range parameter; default: no-op."""

    # ---------------------------------------------------------- contract
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        """Learn the shared state from a sample of graphs; ``seed`` drives every random step."""
        raise NotImplementedError

    def embed(self, graphs: GraphBatch, state: KernelState) -> Embedding:
        """Map each graph of ``graphs`` to its embedding (one row per graph)."""
        raise NotImplementedError

    def pairwise(self, a: Embedding, b: Embedding, state: KernelState) -> np.ndarray:
        """Dense ``(len(a), len(b))`` float64 block of kernel values K(a_i, b_j)."""
        raise NotImplementedError

    def self_similarity(self, a: Embedding, state: KernelState) -> np.ndarray:
        """``(len(a),)`` float64 K(a_i, a_i), computed by the same arithmetic as pairwise."""
        return np.array([self.pairwise(a[i : i + 1], a[i : i + 1], state)[0, 0] for i in range(len(a))],
                        dtype=np.float64)

    def feature_vectors(self, emb: Embedding, state: KernelState) -> FeatureRows:
        """Explicit feature vectors of embedded graphs, ``<phi(a), phi(b)> == pairwise(a, b)``.

        Only for kernels with ``has_feature_vectors``; the dot products of the rows must be
        the values ``pairwise`` returns, bit for bit, so that a feature store and a Gram store
        of the same job agree exactly.
        """
        raise NotImplementedError(f"{type(self).__name__} has no explicit feature vectors")

    # ------------------------------------------------------ optional notes
    def report(self, state: KernelState) -> list[str]:
        """Notes for the user about the fitted state (one line each); default none."""
        return []

    def embedding_counts(self, emb: Embedding) -> dict[str, int]:
        """Counters over one chunk's embeddings (e.g. graphs where a cap was hit); default none.

        Gathered by the engine only when the class sets ``has_embedding_counts = True``.
        """
        return {}

    def report_embeddings(self, counts: dict[str, int]) -> list[str]:
        """Notes for the user from the counters summed over every chunk embedded in a run."""
        return []

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def check_param(ok: bool, kernel: str, param: str, message: str) -> None:
    """Raise a :class:`JobError` ``kernel.<param>: <message>`` unless ``ok``."""
    if not ok:
        raise JobError(f"kernel {kernel}: parameter {param} {message}")


def is_int(value: object) -> bool:
    """An integer parameter: a Python or NumPy integer (a value picked from a NumPy grid), never a
    bool (YAML's ``true`` is not 1)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_int(value: object, kernel: str, param: str, lo: int, hi: int | None = None, *,
              optional: bool = False) -> None:
    """Raise a :class:`JobError` unless ``value`` is an integer (:func:`is_int`) in ``lo..hi``
    (no upper bound when ``hi`` is None); ``optional``: None passes too. One message for every
    kernel: ``must be [null or ]an integer in lo..hi`` (or ``>= lo``), ``got`` the value."""
    if optional and value is None:
        return
    span = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
    check_param(is_int(value) and lo <= value and (hi is None or value <= hi), kernel, param,
                f"must be {'null or ' if optional else ''}an integer {span}, got {value!r}")


def is_real(value: object) -> bool:
    """A real-number parameter: a Python or NumPy integer or float, never a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def is_finite_real(value: object) -> bool:
    """:func:`is_real` and finite (an integer too large for a float is not)."""
    if not is_real(value):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def check_real(value: object, kernel: str, param: str, lo: float | None = None, hi: float | None = None, *,
               lo_open: bool = False, hi_open: bool = False, optional: bool = False) -> None:
    """Raise a :class:`JobError` unless ``value`` is a finite real number (:func:`is_finite_real`)
    above ``lo`` and below ``hi`` (either None: no bound; ``lo_open``/``hi_open``: the bound itself
    excluded); ``optional``: None passes too. Infinity and NaN never pass, even unbounded. One
    message for every kernel: ``must be [null or ]a number in (lo, hi]`` when both bounds are
    set, ``a finite number > lo`` (or ``>=``, ``<``, ``<=``) when one is, ``got`` the value."""
    if optional and value is None:
        return
    ok = (is_finite_real(value)
          and (lo is None or (value > lo if lo_open else value >= lo))
          and (hi is None or (value < hi if hi_open else value <= hi)))
    if lo is not None and hi is not None:
        span = f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    elif lo is not None:
        span = f"a finite number {'>' if lo_open else '>='} {lo:g}"
    elif hi is not None:
        span = f"a finite number {'<' if hi_open else '<='} {hi:g}"
    else:
        span = "a finite number"
    check_param(ok, kernel, param, f"must be {'null or ' if optional else ''}{span}, got {value!r}")


def python_numbers(value: Any) -> Any:
    """``value`` with every NumPy scalar, inside lists, tuples and dicts too, replaced by the Python
    number it holds. Kernels are built from parameters passed through this, so one picked from a
    NumPy grid is recorded as plain JSON (job records, summaries) and computes as its Python twin
    (NumPy makes ``uint64_array >> np.int64(3)`` an error and ``int32_array * np.int64(3)``
    int64, where a Python 3 changes neither)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: python_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(python_numbers(v) for v in value)
    return value


#: where node attributes come from, for every kernel's refusal of graphs without them: a job
#: file and a Python caller give them in different places, so the hint names both
NODE_ATTRIBUTES_HINT = ("TU datasets carry them in <name>_node_attributes.txt, which a job's dataset.node_attributes "
                        "must not set to none; from Python, from_networkx(..., node_attr=...)")


def node_attributes(graphs: GraphBatch, kernel: str, need: str = "needs", fitted_dim: int | None = None,
                    instead: str = "") -> np.ndarray:
    """The graphs' (N, p) node attributes, or a :class:`JobError` ``kernel <kernel>: <need>
    numerical node attributes, but the graphs have none (<where they come from>)<instead>``;
    also when ``fitted_dim`` is given and p differs from it (graphs embedded with another
    kernel's state)."""
    x = graphs.node_attrs
    if x is None or x.shape[1] == 0:
        raise JobError(f"kernel {kernel}: {need} numerical node attributes, but the graphs have none "
                       f"({NODE_ATTRIBUTES_HINT}){instead}")
    if fitted_dim is not None and x.shape[1] != fitted_dim:
        raise JobError(f"kernel {kernel}: these graphs have {x.shape[1]} node attributes, "
                       f"the kernel was fitted with {fitted_dim}")
    return x


def as_jsonable(value: Any) -> Any:
    """Convert NumPy scalars/arrays inside ``value`` into plain Python for JSON."""
    if isinstance(value, dict):
        return {str(k): as_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
