"""Import a module on first use: ``zarr = deferred_import("zarr")`` costs nothing until ``zarr.x``.

For heavy dependencies of code paths a run may not take: a Gram computed in this process
never opens a Zarr store nor starts Dask, and a cold ``python -c`` that fits a small Gram
should not pay their imports (0.2-0.4 s each here). The import goes through Python's own
machinery at the first attribute, so it is safe beside :func:`prefetch` importing the same
module in another thread (the per-module import lock makes the second thread wait).

:func:`defer_numpy_extras` is the one other case: modules a third party imports by name, which
must be registered in ``sys.modules`` before it does (``importlib.util.LazyLoader``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType


def _lazy_loader_module(name: str) -> ModuleType:
    """``name`` registered in ``sys.modules`` as a module object executed on its first attribute
    access (``LazyLoader``: no lock in Python 3.11, so only for modules that one thread imports)."""
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


class DeferredModule(ModuleType):
    """A module imported at its first attribute access, through ``importlib.import_module``.

    Unlike :func:`_lazy_loader_module` it puts nothing in ``sys.modules`` before the import, so Python's
    own per-module import lock orders threads: a thread that touches it while another thread
    imports the module (:func:`prefetch`) waits for that import to finish. (Python 3.11's
    ``LazyLoader`` has no lock: a second thread could read a half-executed module.)
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__deferred = None

    def __getattr__(self, attr: str) -> object:
        module = self.__deferred
        if module is None:
            module = self.__deferred = importlib.import_module(self.__name__)
        return getattr(module, attr)


def deferred_import(name: str) -> ModuleType:
    """``name`` if imported already, else a :class:`DeferredModule` of it (checked to exist)."""
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        return module
    if importlib.util.find_spec(name) is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return DeferredModule(name)


def prefetch(name: str) -> None:
    """Import ``name`` in a background thread: a command that will need a heavy module later
    (Zarr: 0.1 s here) imports it while its main thread reads the dataset in NumPy, which
    releases the GIL for most of it. Import errors are left for the main thread's own import."""
    if name in sys.modules:
        return

    def load() -> None:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the main thread's import reports it
            pass

    threading.Thread(target=load, name=f"gramdist-prefetch-{name}", daemon=True).start()


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
            setattr(numpy, name.rpartition(".")[2], _lazy_loader_module(name))
