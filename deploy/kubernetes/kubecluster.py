"""Run a gramdist job on a Dask cluster that the Dask Kubernetes operator starts for it.

Needs ``pip install dask-kubernetes`` and the operator installed in the Kubernetes cluster
(``helm install --repo https://helm.dask.org dask-kubernetes-operator ...``); run it from a pod
that mounts the shared volume at the same path as the workers (``/shared``)::

    python deploy/kubernetes/kubecluster.py /shared/jobs/nci1-wl.yaml /shared/stores/nci1-wl.zarr

The ``DaskCluster`` resource is written out here instead of taken from
``dask_kubernetes.operator.make_cluster_spec`` because (a) the workers need the shared volume,
which ``make_cluster_spec`` cannot add, and (b) ``make_cluster_spec`` still starts the
scheduler with ``dask-scheduler``, which distributed >= 2026.6 no longer ships; here both
commands are the 2026.x ``dask scheduler`` / ``dask worker``. ``tests/test_deploy.py`` checks
the resource's structure and starts its worker command against a real scheduler.
"""

from __future__ import annotations

import sys
from typing import Any

IMAGE = "ghcr.io/your-org/gramdist:0.1.0"
SHARED_CLAIM = "gramdist-shared"
SHARED_PATH = "/shared"


def cluster_spec(
    name: str = "gramdist",
    image: str = IMAGE,
    n_workers: int = 8,
    cpu: str = "1",
    memory: str = "3Gi",
    claim: str = SHARED_CLAIM,
    mount_path: str = SHARED_PATH,
) -> dict[str, Any]:
    """The ``kubernetes.dask.org/v1`` ``DaskCluster`` resource: scheduler, workers, volume."""
    resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
    env = [{"name": "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES", "value": "10"},
           {"name": "HOME", "value": "/tmp"}]
    volumes = [{"name": "gramdist-shared", "persistentVolumeClaim": {"claimName": claim}}]
    mounts = [{"name": "gramdist-shared", "mountPath": mount_path}]
    security = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    worker = {
        "name": "worker",
        "image": image,
        # the operator adds the scheduler address through DASK_SCHEDULER_ADDRESS
        "args": ["dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--nthreads", "1",
                 "--memory-limit", memory, "--local-directory", "/tmp/dask-worker",
                 "--dashboard", "--dashboard-address", "8788"],
        "env": env,
        "resources": resources,
        "volumeMounts": mounts,
        "ports": [{"name": "http-dashboard", "containerPort": 8788, "protocol": "TCP"}],
    }
    scheduler = {
        "name": "scheduler",
        "image": image,
        "args": ["dask", "scheduler", "--host", "0.0.0.0", "--port", "8786", "--dashboard-address", ":8787"],
        "env": env,
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
        "ports": [{"name": "tcp-comm", "containerPort": 8786, "protocol": "TCP"},
                  {"name": "http-dashboard", "containerPort": 8787, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"port": "http-dashboard", "path": "/health"},
                           "initialDelaySeconds": 0, "periodSeconds": 1, "timeoutSeconds": 300},
        "livenessProbe": {"httpGet": {"port": "http-dashboard", "path": "/health"},
                          "initialDelaySeconds": 15, "periodSeconds": 20},
    }
    return {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "metadata": {"name": name},
        "spec": {
            "worker": {
                "replicas": n_workers,
                "spec": {"containers": [worker], "volumes": volumes, "securityContext": security},
            },
            "scheduler": {
                "spec": {"containers": [scheduler], "securityContext": security},
                "service": {
                    "type": "ClusterIP",
                    "selector": {"dask.org/cluster-name": name, "dask.org/component": "scheduler"},
                    "ports": [
                        {"name": "tcp-comm", "protocol": "TCP", "port": 8786, "targetPort": "tcp-comm"},
                        {"name": "http-dashboard", "protocol": "TCP", "port": 8787, "targetPort": "http-dashboard"},
                    ],
                },
            },
        },
    }


def main(job_path: str, out: str) -> int:
    from dask_kubernetes.operator import KubeCluster
    from distributed import Client

    from gramdist.engine.runner import run_job
    from gramdist.jobs import load_job

    job = load_job(job_path)
    with KubeCluster(custom_cluster_spec=cluster_spec()) as cluster, Client(cluster) as client:
        client.wait_for_workers(1, timeout=600)
        result = run_job(job, out=out, client=client)
    return 0 if result.complete else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} JOB.yaml OUT.zarr")
    sys.exit(main(sys.argv[1], sys.argv[2]))
