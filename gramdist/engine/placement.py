"""Where work runs: the one policy every entry point uses (CLI, Python API, append, evaluate).

A :class:`Placement` holds what the user said — a client or scheduler address, the job's
``cluster:`` section, ``in_process`` — and :meth:`Placement.executor` turns it, for a
computation of a given size, into an :class:`~gramdist.engine.executor.Executor`:

1. ``in_process=True``, or ``cluster.n_workers: 0``: this process.
2. a client given (a ``distributed.Client``, or an address: one client per address for the
   process): that cluster.
3. a scheduler named (``--scheduler``, ``cluster.scheduler``, ``$DASK_SCHEDULER_ADDRESS``) or
   ``cluster.jobqueue``: that cluster, connected for this computation.
4. the active ``distributed.Client`` of the process (``with Client(): ...``), if any.
5. ``in_process="auto"`` with no cluster size named (``cluster.n_workers``): this process (its
   tiles in a pool of :func:`in_process_threads` threads, every core by default) when
   the work is at most :data:`IN_PROCESS_MAX_ENTRIES` kernel values over at most
   :data:`IN_PROCESS_MAX_NODES` nodes — a LocalCluster would take longer to start than the
   work takes (measured here: NCI1's 4110 x 4110 WL Gram, h = 5, takes 0.7 s of CPU in process;
   starting a two-worker LocalCluster and importing the kernel code on it takes 2-4 s). The
   node bound sends large graphs, whose embeddings cost more than their Gram (D&D's 335,000
   nodes under shortest paths or GraphHopper), to every core. Nodes count as the kernel's
   ``node_weight`` each: a kernel whose work holds the GIL for milliseconds per node (the
   Lovász SDP per graph, a geometric random walk's linear system per pair, the matching
   kernel's set distances) weighs more, since
   the threads of this process cannot share such work and worker processes can (Lovász θ on
   800 NCI1 graphs: 29.5 s of embeddings here, 14.9 s on two workers, the same bits); a
   kernel whose embedding is one linear pass (WL, histograms, hashes) weighs less, so that
   D&D runs here where starting workers would cost more than all its work (WL on D&D: 1.8-2.0 s
   end to end here, 3.7-4.3 s on a two-worker LocalCluster).
   The ``gramdist`` executable may also have forked worker processes at its start
   (``forked``, :mod:`gramdist.engine.processes`) for kernels whose embeddings hold the GIL.
6. otherwise a LocalCluster sized by ``cluster:``: the one shared by every call of a Python
   process (``shared=True``: the Python front ends, started once and closed at exit), or one
   started for this computation (the CLI). Not from a script whose calling statement is
   outside ``if __name__ == "__main__":`` (:mod:`~gramdist.engine.main_guard`: each worker
   would run it again and fail to start): under ``"auto"`` the work then runs in this
   process, with a warning; a LocalCluster asked for otherwise is refused with a ``JobError``
   that says what to change.

Every entry point runs with ``"auto"`` unless the user says otherwise (``--workers N``,
``cluster.n_workers``, a scheduler, ``in_process=``).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from gramdist.engine.context import Log, silent
from gramdist.engine.executor import DaskExecutor, Executor, InlineExecutor
from gramdist.errors import JobError
from gramdist.jobs import ClusterSpec
from gramdist.machine import available_cpus

#: work (kernel values) that runs in this process when nothing names a cluster: 5000 x 5000
IN_PROCESS_MAX_ENTRIES = 5000 * 5000
#: ... over graphs of at most this many nodes in all (NCI1: 123,000; D&D: 335,000)
IN_PROCESS_MAX_NODES = 200_000
#: nodes (weighed as for the limit above) from which a run in process embeds in the command's
#: forked workers, where it has them (``Placement.forked``)
FORKED_MIN_NODES = 20_000


@dataclass(frozen=True)
class Placement:
    """What the user said about where to run; see the module docstring for the rules.

    ``client``: a ``distributed.Client`` or a scheduler address; ``scheduler``: an address
    that overrides ``cluster.scheduler``; ``cluster``: the job's ``cluster:`` section;
    ``in_process``: True, False or ``"auto"``; ``shared``: start (once) and reuse the Python
    process's LocalCluster rather than one per computation.
    """

    client: Any = None
    scheduler: str | None = None
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    in_process: bool | str = "auto"
    shared: bool = False
    #: a grid's settings (``engine.runner.run_settings``): returns the client of the cluster it
    #: connects at the first setting placed on one, and the same client for every later one
    connect_once: Any = None
    #: the executable's forked worker processes (``gramdist.engine.processes``): a run in this
    #: process embeds there where its kernel ``embeds_in_processes``
    forked: Any = None

    def __post_init__(self) -> None:
        if self.in_process not in (True, False, "auto"):
            raise JobError(f"in_process must be True, False or 'auto', got {self.in_process!r}")

    @property
    def address(self) -> str | None:
        """The scheduler a computation connects to, if one is named."""
        return self.scheduler or self.cluster.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")

    def names_a_cluster(self) -> bool:
        return bool(self.client is not None or self.address or self.cluster.jobqueue
                    or self.cluster.n_workers)

    def runs_here(self, n_entries: int, n_nodes: int = 0) -> bool:
        """Whether :meth:`executor` runs a computation of ``n_entries`` kernel values over graphs
        of ``n_nodes`` nodes in this process (it starts and connects to nothing)."""
        if self.in_process is True or (self.cluster.n_workers == 0 and not (self.client or self.address)):
            return True
        if self.names_a_cluster() or _active_client() is not None:
            return False
        if self.in_process != "auto":
            return False
        return (n_entries <= IN_PROCESS_MAX_ENTRIES and n_nodes <= IN_PROCESS_MAX_NODES) or _script_cannot_start_workers()

    @contextlib.contextmanager
    def executor(self, n_entries: int, log: Log = silent, n_nodes: int = 0) -> Iterator[Executor]:
        """The executor for ``n_entries`` kernel values over ``n_nodes`` nodes (closed afterwards
        if started here)."""
        from gramdist.engine import cluster

        if self.runs_here(n_entries, n_nodes):
            # below FORKED_MIN_NODES the embeddings take less than shipping them to the forked
            # workers and the workers' first imports (SVM-θ on MUTAG 0.81 -> 0.90 s with them)
            ex = InlineExecutor(in_process_threads(), workers=self.forked if n_nodes >= FORKED_MIN_NODES else None)
            try:
                yield ex
            finally:
                ex.close()
        elif self.client is not None:
            yield DaskExecutor(cluster.address_client(self.client) if isinstance(self.client, str) else self.client)
        elif self.address or self.cluster.jobqueue or not self.shared:
            if not (self.address or self.cluster.jobqueue) and (active := _active_client()) is not None:
                yield DaskExecutor(active)
                return
            if self.connect_once is not None:  # a grid's settings share one cluster
                yield DaskExecutor(self.connect_once())
                return
            with cluster.connect(self.cluster, self.scheduler) as client:
                yield DaskExecutor(client)
        else:
            yield DaskExecutor(_active_client() or cluster.shared_client(self.cluster))

    def with_workers(self, n_workers: int | None) -> Placement:
        """This placement with ``cluster.n_workers`` set (``--workers N``; 0: this process)."""
        if n_workers is None:
            return self
        return replace(self, cluster=self.cluster.replace(n_workers=n_workers))


def in_process_threads() -> int:
    """Threads of a computation in this process: ``$GRAMDIST_THREADS`` if set (1: every task at
    its submit, in the calling thread), else the cores this process may use."""
    value = os.environ.get("GRAMDIST_THREADS", "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise JobError(f"GRAMDIST_THREADS must be a whole number >= 1, got {value!r}")
        return int(value)
    return available_cpus()


def _script_cannot_start_workers() -> bool:
    """True, with a warning once per script, where a LocalCluster's workers would run the
    calling script again (:mod:`gramdist.engine.main_guard`): ``"auto"`` then runs here."""
    from gramdist.engine.main_guard import script_stacklevel, unguarded_hint, unguarded_script

    script = unguarded_script()
    if script is None:
        return False
    if script not in _WARNED:
        _WARNED.add(script)
        warnings.warn(f"gramdist runs this computation in this process, not on a LocalCluster: "
                      f"{unguarded_hint(script)} to use the workers", RuntimeWarning, stacklevel=script_stacklevel())
    return True


_WARNED: set[str] = set()


def _active_client() -> Any | None:
    from gramdist.engine.cluster import active_client

    return active_client()
