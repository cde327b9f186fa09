"""Import a module on first use: ``zarr = lazy_import("zarr")`` costs nothing until ``zarr.x``.

For heavy dependencies of code paths a run may not take: a Gram computed in this process
never opens a Zarr store nor starts Dask, and a cold ``python -c`` that fits a small Gram
should not pay their imports (0.2-0.4 s each here). Uses the standard library's
``importlib.util.LazyLoader``; a module already imported is returned as it is.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """``name`` as a module object that is executed on its first attribute access."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


#: NumPy submodules that SciPy's array-API layer imports (it clones NumPy's namespace with
#: ``from numpy import *``, whose ``__all__`` names them) and that no gramdist command uses:
#: 45 ms of every command's start here (SciPy 1.17, NumPy 2.4)
NUMPY_EXTRAS = ("numpy.f2py", "numpy.testing")


def defer_numpy_extras() -> None:
    """Make :data:`NUMPY_EXTRAS` lazy modules (executed at their first attribute access), before
    SciPy is imported; a no-op where they are imported already. Called by the command line
    only: a library should not change how its host process imports NumPy."""
    import numpy

    for name in NUMPY_EXTRAS:
        if name not in sys.modules:
            # set on the package too: NumPy's own __getattr__ would import it for real
            setattr(numpy, name.rpartition(".")[2], lazy_import(name))
