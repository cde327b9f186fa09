"""Kernel registry: the job file's ``kernel.name`` -> the class implementing it.

Classes are imported lazily so that ``gramdist`` starts fast and a kernel's heavy imports
are paid only by jobs that use it.
"""

from __future__ import annotations

import importlib

from gramdist.errors import JobError
from gramdist.kernels.base import GraphKernel, KernelState

#: name -> "module:Class"; one line per kernel.
KERNELS: dict[str, str] = {
    "wl": "gramdist.kernels.wl:WLSubtreeKernel",
    "dm": "gramdist.kernels.dm:DescriptorMatchingKernel",
    "power": "gramdist.kernels.power:PowerKernel",
    "flg": "gramdist.kernels.mlg:FLGKernel",
    "mlg": "gramdist.kernels.mlg:MLGKernel",
    "matching": "gramdist.kernels.matching:AdaptiveMatchingKernel",
    "nspdk": "gramdist.kernels.nspdk:NSPDKKernel",
    "odd": "gramdist.kernels.odd:ODDSTKernel",
}


def kernel_class(name: str) -> type[GraphKernel]:
    """The class registered under ``name``; :class:`JobError` if there is none."""
    try:
        target = KERNELS[name]
    except KeyError:
        raise JobError(f"unknown kernel {name!r}; known kernels: {', '.join(sorted(KERNELS))}") from None
    module, cls = target.split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise JobError(f"kernel {name!r} is not available in this build: {exc}") from None


def make_kernel(name: str, **params: object) -> GraphKernel:
    """Instantiate kernel ``name`` with job parameters, rejecting unknown ones by name."""
    cls = kernel_class(name)
    allowed = cls.param_names()
    for key in params:
        if key not in allowed:
            raise JobError(f"kernel {name}: unknown parameter {key!r}; allowed: {', '.join(allowed)}")
    kernel = cls(**params)
    kernel.validate()
    return kernel


__all__ = ["KERNELS", "GraphKernel", "KernelState", "kernel_class", "make_kernel"]
