"""Graph kernels, one sub-package per paper, behind one contract and one registry.

* ``base.py`` — the contract every kernel implements (:class:`GraphKernel`: ``fit -> state``,
  ``embed -> embeddings``, ``pairwise -> block``) and :class:`KernelState`.
* ``hashing.py`` — stable 64-bit hashing shared by the families that name substructures.
* ``features/`` — WL subtree, NSPDK, ODD_ST (explicit sparse features; the stream paper).
* ``dm/`` — Descriptor Matching (Su et al. 2016).
* ``gaussian/`` — power kernel (Shrivastava & Li) and FLG/MLG (Kondor & Pan 2016).
* ``matching/`` — adaptive matching kernels (Woźnica, Kalousis & Hilario).
* ``wwl/`` — Wasserstein Weisfeiler–Lehman (Togninalli et al. 2019).
* ``pyramid/`` — pyramid match on spectral node embeddings (Nikolentzos et al. 2017).
* ``theta/`` — Lovász θ and SVM-θ kernels (Johansson et al. 2014).
* ``core/`` — the core framework around any registered kernel (Nikolentzos et al. 2018).

Kernels never import Dask. :data:`KERNELS` maps the job file's ``kernel.name`` to the class,
and each class is importable from here by its name (``from gramdist.kernels import
WLSubtreeKernel``), for use as ``GramTransformer(kernel=WLSubtreeKernel(h=3))``;
classes are imported lazily so that ``gramdist`` starts fast and a kernel's heavy imports are
paid only by jobs that use it. A new kernel is a module in its family's folder (or a new
folder for a new paper) plus one line here.
"""

from __future__ import annotations

import importlib

from gramdist.errors import JobError
from gramdist.kernels.base import GraphKernel, KernelState, python_numbers

#: classes of kept embeddings that moved since a store recorded them: old dotted name -> new one
#: (0.2.0 stores name ``SparseFeatures`` under ``kernels/features/``; it lives in ``kernels/sparse.py``)
MOVED_CLASSES: dict[str, str] = {
    "gramdist.kernels.features.sparse_features.SparseFeatures": "gramdist.kernels.sparse.SparseFeatures",
}

#: name -> "module:Class"; one line per kernel.
KERNELS: dict[str, str] = {
    "wl": "gramdist.kernels.features.wl:WLSubtreeKernel",
    "dm": "gramdist.kernels.dm.kernel:DescriptorMatchingKernel",
    "power": "gramdist.kernels.gaussian.power:PowerKernel",
    "flg": "gramdist.kernels.gaussian.mlg:FLGKernel",
    "mlg": "gramdist.kernels.gaussian.mlg:MLGKernel",
    "matching": "gramdist.kernels.matching.kernel:AdaptiveMatchingKernel",
    "nspdk": "gramdist.kernels.features.nspdk:NSPDKKernel",
    "odd": "gramdist.kernels.features.odd:ODDSTKernel",
    "wl_edge": "gramdist.kernels.wledge.kernel:WLEdgeKernel",
    "wloa": "gramdist.kernels.wloa.kernel:WLOAKernel",
    "vertex_histogram": "gramdist.kernels.histogram.kernel:VertexHistogramKernel",
    "edge_histogram": "gramdist.kernels.histogram.kernel:EdgeHistogramKernel",
    "nh": "gramdist.kernels.nhash.kernel:NeighborhoodHashKernel",
    "hadamard": "gramdist.kernels.hadamard.kernel:HadamardCodeKernel",
    "propagation": "gramdist.kernels.propagation.kernel:PropagationKernel",
    "propagation_attr": "gramdist.kernels.propagation.kernel:PropagationAttrKernel",
    "wwl": "gramdist.kernels.wwl.kernel:WWLKernel",
    "pyramid_match": "gramdist.kernels.pyramid.kernel:PyramidMatchKernel",
    "lovasz_theta": "gramdist.kernels.theta.kernel:LovaszThetaKernel",
    "svm_theta": "gramdist.kernels.theta.kernel:SvmThetaKernel",
    "core": "gramdist.kernels.core.kernel:CoreKernel",
    "sp": "gramdist.kernels.shortest_path.sp:ShortestPathKernel",
    "sp_attr": "gramdist.kernels.shortest_path.attributed:ShortestPathAttrKernel",
    "wlsp": "gramdist.kernels.shortest_path.wlsp:WLShortestPathKernel",
    "graphhopper": "gramdist.kernels.graphhopper.kernel:GraphHopperKernel",
    "hgk_wl": "gramdist.kernels.hashgraph.kernel:HashWLKernel",
    "hgk_sp": "gramdist.kernels.hashgraph.kernel:HashSPKernel",
    "graphlet": "gramdist.kernels.graphlets.kernel:GraphletKernel",
    "random_walk": "gramdist.kernels.randomwalk.kernel:RandomWalkKernel",
    "csm": "gramdist.kernels.csm.kernel:CSMKernel",
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
    """Instantiate kernel ``name`` with job parameters, rejecting unknown ones by name (NumPy
    numbers become Python ones: :func:`~gramdist.kernels.base.python_numbers`)."""
    cls = kernel_class(name)
    allowed = cls.param_names()
    for key in params:
        if key not in allowed:
            raise JobError(f"kernel {name}: unknown parameter {key!r}; allowed: {', '.join(allowed)}")
    kernel = cls(**python_numbers(params))
    kernel.validate()
    return kernel


#: class name -> kernel name, for ``from gramdist.kernels import WLSubtreeKernel`` (imported lazily)
_CLASS_NAMES = {target.split(":")[1]: name for name, target in KERNELS.items()}


def __getattr__(attr: str) -> type[GraphKernel]:
    if attr in _CLASS_NAMES:
        return kernel_class(_CLASS_NAMES[attr])
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_CLASS_NAMES])


__all__ = ["KERNELS", "GraphKernel", "KernelState", "kernel_class", "make_kernel", *_CLASS_NAMES]
