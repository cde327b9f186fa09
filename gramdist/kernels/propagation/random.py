"""Seeded random numbers as pure functions of (seed, stream, index).

The locality-sensitive hashes of the propagation kernels draw one projection coordinate per
label value (or attribute dimension) and iteration. Drawing them from a generator would make
a coordinate depend on which labels were met first; here each number is a function of
``(seed, stream, t, key)`` alone:

* :func:`uniform` — ``(mix(combine(seed, stream, t, key)) >> 11) · 2^-53`` in ``[0, 1)``:
  exact integer arithmetic, the same bits everywhere;
* :func:`normal` — Box–Muller on two such uniforms, evaluated with Python's ``math.log``,
  ``math.sqrt`` and ``math.cos`` (the C library's scalar functions), one value at a time.
  NumPy's vectorised ``log``/``cos`` are avoided on purpose: their SIMD code paths depend on
  the CPU and may differ in the last bit between workers. A kernel needs only
  (labels or dimensions) × iterations of them per chunk, so the scalar loop costs nothing;
* :func:`cauchy` — the ratio of two independent normals (as the paper's Algorithm and the
  authors' code draw it).
"""

from __future__ import annotations

import math

import numpy as np

from gramdist.kernels.hashing import as_u64, combine, mix

_SCALE = 2.0**-53


def uniform(seed: int, stream: int, t: int, keys: np.ndarray) -> np.ndarray:
    """(len(keys),) float64 uniforms in [0, 1), one per key."""
    h = mix(combine(np.uint64(seed & 0xFFFFFFFFFFFFFFFF), np.uint64(stream), np.uint64(t), as_u64(keys)))
    return (h >> np.uint64(11)).astype(np.float64) * _SCALE


def normal(seed: int, stream: int, t: int, keys: np.ndarray) -> np.ndarray:
    """(len(keys),) standard normal variates (Box–Muller, scalar ``math``), one per key."""
    keys = np.asarray(keys)
    u1 = uniform(seed, 2 * stream, t, keys)
    u2 = uniform(seed, 2 * stream + 1, t, keys)
    out = np.empty(len(keys))
    two_pi = 2.0 * math.pi
    for i, (a, b) in enumerate(zip(u1.tolist(), u2.tolist())):
        out[i] = math.sqrt(-2.0 * math.log(1.0 - a)) * math.cos(two_pi * b)
    return out


def cauchy_parts(seed: int, stream: int, t: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Numerator and denominator normals of :func:`cauchy` (for checks against other code)."""
    return normal(seed, 2 * stream, t, keys), normal(seed, 2 * stream + 1, t, keys)


def cauchy(seed: int, stream: int, t: int, keys: np.ndarray) -> np.ndarray:
    """(len(keys),) standard Cauchy variates: the ratio of two normals (a zero denominator,
    of probability ~2^-53, is replaced by 1)."""
    num, den = cauchy_parts(seed, stream, t, keys)
    return num / np.where(den == 0.0, 1.0, den)
