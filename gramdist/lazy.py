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
