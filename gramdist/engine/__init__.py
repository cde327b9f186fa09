"""The engine: fit once, embed in parallel, compute Gram tiles into Zarr on Dask.

``store`` owns the on-disk layout, ``tasks`` the functions that run on workers, ``cluster``
how a Dask client is obtained, and ``runner`` the orchestration (``run_job``). Kernels are
opaque here: the engine only calls the :class:`~gramdist.kernels.base.GraphKernel` contract.
"""
