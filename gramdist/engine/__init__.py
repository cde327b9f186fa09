"""The engine: fit once, embed in parallel, compute Gram tiles into Zarr on Dask.

``store`` owns the on-disk layout, ``tasks`` the functions that run on workers, ``cluster``
how a Dask client is obtained, and ``runner`` the orchestration. Kernels are opaque here: the
engine only calls the :class:`~gramdist.kernels.base.GraphKernel` contract.
"""

from gramdist.engine.runner import RunResult, run_job

__all__ = ["RunResult", "run_job"]
