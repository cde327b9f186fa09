"""A warning, before minutes of cross-validation, for the Grams libsvm solves slowly.

``SVC(kernel="precomputed")`` on a raw (not cosine-normalised) Gram at a large C can take
minutes per fit: the dual's box grows with C while the kernel's scale sets how far the solver
moves per step. Measured on NCI1's WL-edge Gram (h = 1, one inner training part of 2,663
graphs, median K(g, g) = 498): 0.35 s at C = 10⁻³, 2.1 s at C = 1, 39 s at C = 10, 467 s at
C = 100; on ENZYMES's graphlet frequencies (median K(g, g) = 0.27) one outer fold of the power
protocol (C up to 10⁷) took 229 s. A protocol makes hundreds of such fits, so an evaluation
that looks hung is usually this. The warning says so and what converges faster; it changes
nothing of the evaluation.
"""

from __future__ import annotations

import numpy as np

from gramdist.engine.store import GramStore
from gramdist.evaluation.regression import is_continuous

#: C times the median K(g, g) past which libsvm was seen to slow down by orders of magnitude
SLOW_SCALE = 1e3
#: below this many graphs every fit is quick whatever its C
SLOW_MIN_GRAPHS = 500


def slow_fit_warning(stores: list[str], c_grid: tuple[float, ...] | list[float]) -> str | None:
    """One line naming the raw Gram store(s) whose largest C makes libsvm slow, or None.

    Parameters
    ----------
    stores : list of str
        Gram store paths (as :func:`~gramdist.evaluation.nested_cv.find_stores` gives them).
        Stores of a continuous target (a regression: kernel ridge by default, no libsvm) are
        skipped.
    c_grid : sequence of float
        The C values the evaluation will try.
    """
    c_max = max(c_grid)
    slow: list[tuple[float, str]] = []
    for path in stores:
        store = GramStore.open(path)
        if store.normalize or not store.diag_complete or is_continuous(store.labels()):
            continue
        diag = store.read_diag()[0]
        scale = float(np.median(diag)) if diag.size else 0.0
        if diag.size >= SLOW_MIN_GRAPHS and c_max * scale > SLOW_SCALE:
            slow.append((scale, path))
    if not slow:
        return None
    scale, path = max(slow)
    others = f" (and {len(slow) - 1} more)" if len(slow) > 1 else ""
    return (f"{path}{others} holds a raw Gram (median K(g, g) = {scale:.3g}) and C reaches {c_max:g}: libsvm "
            "can take minutes per fit there (NCI1 WL-edge: 467 s at C = 100); a cosine-normalised store "
            "(gram.normalize: true) or a smaller --c-max converges faster")
