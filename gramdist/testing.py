"""Helpers for testing kernels against the contract without a cluster.

:func:`gram_by_tiles` assembles a Gram from ``pairwise`` calls on ``tile``-sized chunks the way
the engine does (upper triangle, mirrored), so a kernel's tests can check tile-size
invariance and compare against brute-force references without starting Dask;
:func:`random_labelled_graphs` and :func:`adjacency_lists` are the small random sets and the
neighbour lists the brute-force references of several kernels' tests walk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gramdist.arrayops import normalize_block
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, KernelState


def gram_by_tiles(
    kernel: GraphKernel,
    state: KernelState,
    graphs: GraphBatch,
    tile: int,
    normalize: bool = False,
) -> np.ndarray:
    """(N, N) Gram computed tile by tile like the engine: chunks of ``tile`` graphs."""
    chunks = graphs.chunks(tile)
    embs = [kernel.embed(c, state) for c in chunks]
    diag = np.concatenate([kernel.self_similarity(e, state) for e in embs])
    n = len(graphs)
    k = np.zeros((n, n))
    for i, ei in enumerate(embs):
        for j in range(i, len(embs)):
            block = kernel.pairwise(ei, embs[j], state)
            r, c = slice(i * tile, i * tile + len(ei)), slice(j * tile, j * tile + len(embs[j]))
            if normalize:
                block = normalize_block(block, diag[r], diag[c])
            if i == j:  # symmetrise after normalising, as the engine does: exactly symmetric
                block = np.triu(block) + np.triu(block, 1).T
            k[r, c] = block
            k[c, r] = block.T
    return k


def min_eigenvalue_ratio(k: np.ndarray) -> float:
    """Smallest eigenvalue of a symmetric matrix divided by its trace (PSD check)."""
    w = np.linalg.eigvalsh((k + k.T) / 2)
    return float(w[0] / max(np.trace(k), 1e-300))


def random_labelled_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 3) -> GraphBatch:
    """``n`` random graphs of 1..``max_nodes`` nodes with labels in 0..``n_labels``-1 and up to
    2k − 1 random edges on k nodes (self-loops, repeated edges and isolated nodes included):
    the same draws for the same seed."""
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


def adjacency_lists(graph: Any) -> list[list[int]]:
    """Neighbour lists of one graph (a ``GraphBatch`` item): each edge listed from both ends, a
    self-loop once, repeated edges repeated — the multiset a brute-force WL-style update reads."""
    adj: list[list[int]] = [[] for _ in range(graph.n_nodes)]
    for u, v in graph.edges.tolist():
        adj[u].append(v)
        if u != v:
            adj[v].append(u)
    return adj


class LocalS3:
    """An S3-compatible server on 127.0.0.1 for tests and benchmarks: moto's standalone server
    (``pip install 'moto[server]'``, what zarr-python's and s3fs's own suites use), started in
    a process of its own on a free port; use as a context manager.

    :attr:`env` holds what a client needs (``AWS_ENDPOINT_URL``, dummy credentials, a region):
    set it in ``os.environ`` (and a cluster's workers' environment) to reach the server.
    :meth:`requests` counts the requests it served so far (from its access log). The server's
    log goes to ``log``, or to a temporary file removed on exit (kept when the server did not
    start: the error names it).
    """

    def __init__(self, bucket: str = "gramdist", log: str | None = None, endpoint: str | None = None) -> None:
        self.bucket, self.log_path, self.given = bucket, log, endpoint
        self.port = 0
        self._proc: Any = None
        self._log: Any = None
        self._own_log = False  # a temporary log made here: removed on a normal exit

    @property
    def endpoint(self) -> str:
        """The server's address (``endpoint`` when one already running was given)."""
        return self.given or f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def __enter__(self) -> LocalS3:
        import os
        import socket
        import subprocess
        import sys
        import tempfile
        import time
        import urllib.error
        import urllib.request

        if self.given is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            if self.log_path is None:
                fd, self.log_path = tempfile.mkstemp(prefix="gramdist-s3-", suffix=".log")
                os.close(fd)
                self._own_log = True
            self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in __exit__
            self._proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                          stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **self.env})
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                if (self._proc is not None and self._proc.poll() is not None) or time.time() > deadline:
                    self._own_log = False  # kept for the message below
                    self.__exit__()
                    raise RuntimeError(f"the local S3 server did not start (moto[server] installed?); see {self.log_path}") from None
                time.sleep(0.2)
        try:
            req = urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT")
            try:
                urllib.request.urlopen(req, timeout=10).close()
            except urllib.error.HTTPError as exc:
                if exc.code != 409:  # 409: the bucket exists already (a server given to us)
                    raise
        except BaseException:
            self.__exit__()
            raise
        return self

    def requests(self) -> int:
        if self.log_path is None:
            return 0  # a server started elsewhere: its log is not ours to read
        with open(self.log_path, "rb") as f:
            return sum(1 for line in f if b'HTTP/1.1"' in line)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - it must go
                self._proc.kill()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_log and self.log_path is not None:
            Path(self.log_path).unlink(missing_ok=True)
            self.log_path = None
