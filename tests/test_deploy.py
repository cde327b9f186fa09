"""Deployment: the files in deploy/ are parsed, checked, and their commands run for real.

Docker, Helm and SLURM do not run here, so each deployment file is (1) parsed and checked for
the structure its tool expects, and (2) the commands it would run are started as processes
on 127.0.0.1: the compose services' `dask scheduler` / `dask worker` commands, the worker
command the Helm values render to, the operator resource's worker command, and the SLURM
batch jobs dask-jobqueue submits (through a stand-in `sbatch` that runs the job script). A
real `gramdist run` then computes a job on that cluster, and the Gram is checked bitwise
against an in-process reference. TLS: a scheduler and workers with certificates the test
generates; a TLS client runs a job, a plain-TCP client and a client with a foreign
certificate are refused.

``DaskProcesses`` and the helpers here are reused by ``tests/test_faults.py``.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.store import open_gram

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent
DASK = str(BIN / "dask")
GRAMDIST = [sys.executable, "-m", "gramdist.cli"]


# ----------------------------------------------------------------------------- helpers
def run_cli(*args: str, timeout: float = 300, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run([*GRAMDIST, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd or ROOT)


def one_error_line(r: subprocess.CompletedProcess, worker_logs: bool = False) -> str:
    """The single ``gramdist: error:`` line of a failed run (asserting exit 2, no traceback).

    ``worker_logs``: tolerate the log records of embedded Dask workers about a failed task
    (they quote the task's traceback); gramdist itself must still print one error line last.
    """
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback (most recent call last)" not in r.stderr, r.stderr[-3000:]
    if not worker_logs:
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("gramdist: error:")]
    assert len(errors) == 1 and errors[0] == lines[-1], r.stderr[-3000:]
    return errors[0]


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def synthetic_job(path: Path, *, n_graphs: int = 120, tile: int = 16, h: int = 2, seed: int = 5,
                  normalize: bool = True, extra: str = "") -> Path:
    """Write a WL job on synthetic graphs (no dataset files needed)."""
    path.write_text(
        f"dataset: {{synthetic: {{n_graphs: {n_graphs}, n_nodes: [8, 16], avg_degree: 2.5, "
        f"n_labels: 5, attr_dim: 0, seed: {seed}}}}}\n"
        f"kernel: {{name: wl, h: {h}}}\n"
        f"gram: {{tile_size: {tile}, normalize: {str(normalize).lower()}}}\n" + extra
    )
    return path


def reference_gram(job_path: Path) -> np.ndarray:
    """The job's Gram computed in-process, tile by tile, the way the engine does."""
    from gramdist.datasets import load_dataset
    from gramdist.jobs import load_job
    from gramdist.kernels import make_kernel
    from gramdist.testing import gram_by_tiles

    job = load_job(job_path)
    spec = dict(job.kernel)
    kernel = make_kernel(spec.pop("name"), **spec)
    graphs = load_dataset(job.dataset)
    state = kernel.fit(graphs, job.fit.seed)
    return gram_by_tiles(kernel, state, graphs, job.gram.tile_size, job.gram.normalize)


def chunks_written(store: Path) -> int:
    """Gram chunk files on disk (each finished off-diagonal tile writes two)."""
    base = store / "gram" / "c"
    if not base.is_dir():
        return 0
    n = 0
    for row in os.scandir(base):
        if row.is_dir():
            # not the temporary files of a write under way (Zarr's *.partial, write_atomic's .name.*)
            n += sum(1 for f in os.scandir(row.path) if not f.name.endswith(".partial") and not f.name.startswith("."))
    return n


class DaskProcesses:
    """A real Dask cluster of processes on 127.0.0.1: `dask scheduler` and `dask worker`s.

    Each process runs in its own session (so a kill reaches the nanny and its worker), logs to
    ``<tmp>/logs``, and everything is killed on :meth:`close`.
    """

    def __init__(self, tmp: Path, env: dict[str, str] | None = None, security: Any = None) -> None:
        self.tmp = Path(tmp)
        self.logs = self.tmp / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "10", **(env or {})}
        self.security = security
        self.procs: dict[str, subprocess.Popen] = {}
        self.address: str | None = None

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**self.env, **(env or {})}, cwd=self.tmp)
        log.close()
        self.procs[name] = proc
        return proc

    def start_scheduler(self, cmd: list[str] | None = None, env: dict[str, str] | None = None) -> str:
        """Start the scheduler (``cmd`` without a port gets a free one); return its address."""
        info = self.tmp / "scheduler.json"
        info.unlink(missing_ok=True)
        cmd = list(cmd or [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0"])
        cmd += ["--scheduler-file", str(info)]
        proc = self._spawn("scheduler", cmd, env)
        deadline = time.time() + 60
        while not info.exists() or not info.read_text().strip():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"scheduler did not start: {self.log('scheduler')}")
            time.sleep(0.1)
        time.sleep(0.1)  # the file is written in one go, but be safe
        self.address = json.loads(info.read_text())["address"]
        return self.address

    def start_worker(self, name: str, cmd: list[str] | None = None, env: dict[str, str] | None = None,
                     extra: list[str] | tuple = ()) -> subprocess.Popen:
        cmd = list(cmd or [DASK, "worker", self.address, "--nthreads", "1", "--nworkers", "1",
                           "--memory-limit", "1GiB", "--no-dashboard"])
        cmd += ["--name", name, *extra]
        return self._spawn(name, cmd, env)

    def log(self, name: str) -> str:
        p = self.logs / f"{name}.log"
        return p.read_text(errors="replace")[-3000:] if p.exists() else ""

    def client(self):
        from distributed import Client

        return Client(self.address, security=self.security, timeout="30s")

    def start(self, *names: str) -> dict[str, int]:
        """Start the scheduler and the named workers; return worker name -> pid once all joined."""
        self.start_scheduler()
        for name in names:
            self.start_worker(name)
        self.wait_for_workers(len(names))
        return self.worker_pids()

    def wait_for_workers(self, n: int, timeout: float = 90) -> None:
        with self.client() as c:
            try:
                c.wait_for_workers(n, timeout=timeout)
            except Exception as exc:
                logs = "\n".join(f"--- {k}\n{self.log(k)}" for k in self.procs)
                raise RuntimeError(f"{n} workers did not join: {exc}\n{logs}") from None

    def worker_pids(self) -> dict[str, int]:
        """Worker name -> pid of the worker process (the child of its nanny)."""
        with self.client() as c:
            pids = c.run(os.getpid)
            names = {addr: w["name"] for addr, w in c.scheduler_info(n_workers=-1)["workers"].items()}
        return {str(names[a]): pid for a, pid in pids.items()}

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker's whole session (nanny and worker): it does not come back."""
        _killpg(self.procs[name], signal.SIGKILL)

    def close(self) -> None:
        for proc in self.procs.values():
            _killpg(proc, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _killpg(proc, signal.SIGKILL)
                proc.wait(timeout=10)


def _killpg(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture
def dask_processes(tmp_path):
    procs = DaskProcesses(tmp_path / "cluster")
    try:
        yield procs
    finally:
        procs.close()


# ----------------------------------------------------------------------------- compose
def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Docker Compose variable interpolation: ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
    ``${VAR-default}``, ``${VAR:?error}``, ``${VAR?error}`` and ``$$``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("plain")
        op, arg = m.group("op"), m.group("arg")
        val = env.get(name)
        if op in (":-", "-"):
            return val if (val if op == ":-" else val is not None) else arg
        if op in (":?", "?"):
            if (not val) if op == ":?" else val is None:
                raise ValueError(f"compose: {name}: {arg}")
            return val
        if val is None:
            raise ValueError(f"compose: {name} is not set")
        return val

    pattern = r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?)(?P<arg>[^}]*))?\}|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)"
    return re.sub(pattern, sub, value)


class Overridden(list):
    """A sequence tagged ``!override`` in a compose file: it replaces, never extends, the base's."""


class ComposeLoader(yaml.SafeLoader):
    """YAML as Docker Compose reads it: ``<<`` merges (safe_load's) and the ``!override`` tag."""


ComposeLoader.add_constructor("!override", lambda loader, node: Overridden(loader.construct_sequence(node, deep=True)))


def _port_key(port: str) -> tuple[str, str]:
    """(host IP, published port) of a compose port string: its identity when files merge."""
    parts = port.split("/")[0].split(":")
    return (parts[0] if len(parts) == 3 else "", parts[-2] if len(parts) >= 2 else parts[-1])


def merge_compose(base: Any, over: Any, key: str = "") -> Any:
    """Docker Compose's merge of a later file into an earlier one (docs: compose-file/merge):
    mappings merge; ``command``/``entrypoint``/``healthcheck.test`` are replaced; ``ports``
    merge by host IP and port, ``volumes`` by target; other sequences are appended to;
    ``!override`` replaces."""
    if isinstance(over, Overridden):
        return list(over)
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge_compose(base[k], v, k) if k in base else (list(v) if isinstance(v, Overridden) else v)
        return out
    if isinstance(base, list) and isinstance(over, list):
        if key in ("command", "entrypoint", "test"):
            return list(over)
        if key in ("ports", "volumes"):
            ident = (lambda v: _port_key(v)) if key == "ports" else (lambda v: v["target"] if isinstance(v, dict) else v.split(":")[1])
            seen = {ident(v): v for v in base}
            seen.update({ident(v): v for v in over})
            return list(seen.values())
        return base + over
    return over


def load_compose(env: dict[str, str], *files: str) -> dict:
    """The compose files merged in order (default: the base file alone), then interpolated."""
    merged: Any = None
    for name in files or ("docker-compose.yml",):
        raw = yaml.load((DEPLOY / name).read_text(), Loader=ComposeLoader)  # resolves the << merges
        merged = raw if merged is None else merge_compose(merged, raw)
    return interpolate(merged, env)


def test_compose_requires_the_shared_folder():
    with pytest.raises(ValueError, match="GRAMDIST_SHARED"):
        load_compose({})


def test_compose_file_structure(tmp_path):
    shared = str(tmp_path / "shared")
    c = load_compose({"GRAMDIST_SHARED": shared})
    services = c["services"]
    assert set(services) == {"scheduler", "worker"}
    sched, worker = services["scheduler"], services["worker"]
    # 2026.x command names, exec form
    assert sched["command"][:2] == ["dask", "scheduler"]
    assert worker["command"][:2] == ["dask", "worker"]
    assert "tcp://scheduler:8786" in worker["command"]
    assert sched["command"][sched["command"].index("--port") + 1] == "8786"
    assert sched["command"][sched["command"].index("--dashboard-address") + 1] == ":8787"
    # safe by default: without TLS, the scheduler (which runs any code a client sends) and the
    # dashboard are published on this host's loopback interface only
    assert sorted(sched["ports"]) == ["127.0.0.1:8786:8786", "127.0.0.1:8787:8787"]
    # the same bind mount, at the same path as on the host, in the scheduler and the workers
    for svc in (sched, worker):
        (vol,) = svc["volumes"]
        assert vol == {"type": "bind", "source": shared, "target": shared}
        assert svc["image"] == "gramdist:latest"
        assert svc["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile", "args": {"PYTHON_VERSION": "3.11"}}
        assert svc["environment"]["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] == "10"
        assert svc["environment"]["GRAMDIST_DATA"] == f"{shared}/datasets"  # read by submitted jobs
        assert re.fullmatch(r"\d+:\d+", svc["user"])
    assert (DEPLOY / worker["build"]["context"] / worker["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    assert worker["depends_on"] == {"scheduler": {"condition": "service_healthy"}}
    assert isinstance(worker["deploy"]["replicas"], int) and worker["deploy"]["replicas"] >= 1
    # the healthcheck probes the dashboard server the command starts
    assert "8787/health" in " ".join(sched["healthcheck"]["test"])
    # every flag is one the installed dask CLI accepts
    assert_flags_known(sched["command"][2:], "scheduler")
    assert_flags_known(worker["command"][2:], "worker")


def cli_options(kind: str) -> set[str]:
    if kind == "scheduler":
        from distributed.cli.dask_scheduler import main
    else:
        from distributed.cli.dask_worker import main
    return {opt for p in main.params for opt in (*p.opts, *p.secondary_opts)}


def assert_flags_known(args: list[str], kind: str) -> None:
    known = cli_options(kind)
    for a in args:
        if a.startswith("--"):
            assert a.split("=")[0] in known, f"dask {kind}: unknown option {a}"


def test_compose_topology_runs_a_submitted_job_bitwise(tmp_path):
    """The compose services' own commands, as processes on 127.0.0.1; from the 'host', `gramdist
    submit` as the compose file shows it (the orchestration runs in a worker), then `status`."""
    shared = tmp_path / "shared"
    shared.mkdir()
    c = load_compose({"GRAMDIST_SHARED": str(shared)})
    sched, worker = c["services"]["scheduler"], c["services"]["worker"]
    env = {k: str(v) for k, v in sched["environment"].items()}
    cluster = DaskProcesses(tmp_path / "cluster", env=env)
    try:
        cmd = [DASK, *sched["command"][1:]]
        cmd[cmd.index("--port") + 1] = "0"
        cmd[cmd.index("--dashboard-address") + 1] = ":0"
        addr = cluster.start_scheduler([*cmd, "--host", "127.0.0.1"])  # in a container: all interfaces
        n = worker["deploy"]["replicas"]
        for i in range(n):
            wcmd = [DASK, *worker["command"][1:]]
            wcmd[wcmd.index("tcp://scheduler:8786")] = addr
            wcmd[wcmd.index("--local-directory") + 1] = str(tmp_path / "dask-worker")
            cluster.start_worker(f"worker-{i}", wcmd)
        cluster.wait_for_workers(n)
        job = synthetic_job(tmp_path / "job.yaml")
        out = shared / "syn.zarr"
        r = run_cli("submit", str(job), "--scheduler", addr.replace("127.0.0.1", "localhost"),
                    "--out", str(out), "--json")
        assert r.returncode == 0, r.stderr + cluster.log("worker-0")
        assert "warning" not in r.stderr  # localhost: no plain-TCP warning
        assert last_json(r.stdout)["store"] == str(out)
        w = run_cli("status", str(out), "--watch", "--interval", "0.3")
        assert w.returncode == 0 and "complete" in w.stdout, w.stdout + w.stderr[-2000:]
        assert np.array_equal(open_gram(out)[0], reference_gram(job))
    finally:
        cluster.close()


S3_ENV = {"MINIO_ROOT_USER": "gramdist", "MINIO_ROOT_PASSWORD": "not-a-real-password"}


def test_compose_s3_file_structure():
    """The object-store variant: MinIO, a one-shot bucket maker, the same Dask commands as the
    shared-folder file, no shared folder, every port on loopback, credentials from the
    environment only; the TLS file applies to it unchanged."""
    with pytest.raises(ValueError, match="MINIO_ROOT_USER"):
        load_compose({}, "docker-compose.s3.yml")
    c = load_compose(S3_ENV, "docker-compose.s3.yml")
    base = load_compose({"GRAMDIST_SHARED": "/x"})
    services = c["services"]
    assert set(services) == {"minio", "bucket", "scheduler", "worker"}
    for name in ("scheduler", "worker"):
        svc = services[name]
        assert svc["command"] == base["services"][name]["command"]
        assert "volumes" not in svc and "user" not in svc  # nothing shared but the bucket
        env = svc["environment"]
        assert env["AWS_ENDPOINT_URL"] == "http://minio:9000" and env["GRAMDIST_DATA"] == "s3://gramdist/datasets"
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (S3_ENV["MINIO_ROOT_USER"], S3_ENV["MINIO_ROOT_PASSWORD"])
    assert services["worker"]["depends_on"]["bucket"] == {"condition": "service_completed_successfully"}
    for svc in services.values():
        for port in svc.get("ports", []):
            assert port.startswith("127.0.0.1:"), port
    assert "mb --ignore-existing local/gramdist" in services["bucket"]["entrypoint"][-1]
    tls = load_compose(S3_ENV | {"GRAMDIST_CERTS": "/c"}, "docker-compose.s3.yml", "docker-compose.tls.yml")
    assert "8786:8786" in tls["services"]["scheduler"]["ports"] and "--tls-cert" in tls["services"]["worker"]["command"]
    assert tls["services"]["minio"]["ports"] == services["minio"]["ports"]


def test_compose_s3_topology_runs_a_submitted_job_bitwise(tmp_path):
    """The S3 compose services' own commands and environment, as processes on 127.0.0.1, a local
    S3 server standing in for MinIO: `gramdist submit --out s3://…` from the 'host', then
    `status`; the Gram is the in-process reference's, bit for bit."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("moto")
    from gramdist.testing import LocalS3

    c = load_compose(S3_ENV, "docker-compose.s3.yml")
    sched, worker = c["services"]["scheduler"], c["services"]["worker"]
    with LocalS3(bucket="gramdist") as s3:
        env = {k: str(v) for k, v in sched["environment"].items()} | {"AWS_ENDPOINT_URL": s3.endpoint}
        host_env = {**os.environ, **s3.env, "AWS_ACCESS_KEY_ID": S3_ENV["MINIO_ROOT_USER"],
                    "AWS_SECRET_ACCESS_KEY": S3_ENV["MINIO_ROOT_PASSWORD"]}
        cluster = DaskProcesses(tmp_path / "cluster", env=env)
        try:
            cmd = [DASK, *sched["command"][1:]]
            cmd[cmd.index("--port") + 1] = "0"
            cmd[cmd.index("--dashboard-address") + 1] = ":0"
            addr = cluster.start_scheduler([*cmd, "--host", "127.0.0.1"])
            for i in range(worker["deploy"]["replicas"]):
                wcmd = [DASK, *worker["command"][1:]]
                wcmd[wcmd.index("tcp://scheduler:8786")] = addr
                wcmd[wcmd.index("--local-directory") + 1] = str(tmp_path / f"dask-worker-{i}")
                cluster.start_worker(f"worker-{i}", wcmd)
            cluster.wait_for_workers(worker["deploy"]["replicas"])
            job = synthetic_job(tmp_path / "job.yaml")
            out = "s3://gramdist/stores/syn.zarr"
            r = run_cli("submit", str(job), "--scheduler", addr, "--out", out, "--json", env=host_env)
            assert r.returncode == 0, r.stderr + cluster.log("worker-0")
            w = run_cli("status", out, "--watch", "--interval", "0.3", env=host_env)
            assert w.returncode == 0 and "complete" in w.stdout, w.stdout + w.stderr[-2000:]
            k = subprocess.run([sys.executable, "-c", "import sys, numpy as np; from gramdist import open_gram; "
                                f"np.save(sys.stdout.buffer, open_gram({out!r})[0])"], capture_output=True,
                               env=host_env, check=True).stdout
            assert np.array_equal(np.load(io.BytesIO(k)), reference_gram(job))
        finally:
            cluster.close()


def test_dockerfile_builds_gramdist_image():
    """Parse the Dockerfile: base, what is copied (it exists), what is installed and run."""
    # Docker drops comment lines (also inside continuations), then joins continued lines.
    text = "\n".join(ln for ln in (DEPLOY / "Dockerfile").read_text().splitlines()
                     if not ln.lstrip().startswith("#"))
    logical = re.sub(r"\\\n", " ", text)
    instr = [ln.strip() for ln in logical.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    ops = [ln.split(None, 1) for ln in instr]
    kinds = [k.upper() for k, _ in ops]
    assert kinds[0] == "ARG" and kinds[1] == "FROM" and "python:${PYTHON_VERSION}" in ops[1][1]
    for k, rest in ops:
        if k.upper() == "COPY":
            *srcs, _dst = rest.split()
            for s in srcs:
                assert (ROOT / s).exists(), f"COPY {s}: not in the repository"
    run = " ".join(rest for k, rest in ops if k.upper() == "RUN")
    assert 'pip install ".[dashboard,tls,s3]"' in run  # gramdist, bokeh for :8787, cryptography for certs, s3fs
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^dashboard = ", pyproject, re.M) and re.search(r"^tls = .*cryptography", pyproject, re.M)
    assert "exec dask scheduler" in run and "exec dask worker" in run  # shims for old charts
    assert "EXPOSE 8786 8787" in instr
    assert json.loads(next(rest for k, rest in ops if k.upper() == "CMD")) == ["dask", "scheduler"]
    assert any(k.upper() == "USER" and rest.strip() == "gramdist" for k, rest in ops)
    ignore = [ln.strip() for ln in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    assert ignore[0] == "**" and "!gramdist/**" in ignore  # context: only what the image needs


# ----------------------------------------------------------------------------- Helm
# Keys of the official chart (dask/helm-chart, dask/values.yaml and the keys its templates
# read, e.g. scheduler.env and worker.threads_per_worker); below the listed depth the values
# are Kubernetes objects passed through verbatim.
HELM_KEYS = {
    "scheduler": {"name", "enabled", "image", "replicas", "serviceType", "loadBalancerIP", "servicePort",
                  "serviceAnnotations", "extraArgs", "resources", "tolerations", "affinity", "nodeSelector",
                  "securityContext", "serviceAccountName", "metrics", "livenessProbe", "readinessProbe", "env"},
    "scheduler.image": {"repository", "tag", "pullPolicy", "pullSecrets"},
    "webUI": {"name", "servicePort", "ingress"},
    "worker": {"name", "image", "replicas", "strategy", "custom_scheduler_url", "default_resources", "env",
               "extraArgs", "resources", "mounts", "annotations", "tolerations", "affinity", "nodeSelector",
               "securityContext", "serviceAccountName", "port", "portDashboard", "threads_per_worker",
               "metrics", "livenessProbe", "readinessProbe"},
    "worker.image": {"repository", "tag", "pullPolicy", "dask_worker", "pullSecrets"},
    "worker.mounts": {"volumes", "volumeMounts"},
    "additional_worker_groups": None,
    "jupyter": {"name", "enabled", "rbac", "image", "serviceType", "servicePort", "password", "passwordHint",
                "env", "command", "args", "extraConfig", "resources", "mounts", "tolerations", "affinity",
                "nodeSelector", "securityContext", "serviceAccountName", "ingress", "livenessProbe",
                "readinessProbe"},
}


def helm_values() -> dict:
    return yaml.safe_load((DEPLOY / "kubernetes" / "helm-values.yaml").read_text())


def render_helm_worker_args(values: dict, scheduler: str) -> list[str]:
    """The worker container's args as the chart's worker template builds them."""
    w = values["worker"]
    cmd = w["image"]["dask_worker"]
    args = list(cmd) if isinstance(cmd, list) else [cmd]
    args.append(w.get("custom_scheduler_url") or scheduler)
    limits = (w.get("resources") or {}).get("limits")
    if limits:
        args += ["--nthreads", str(w.get("threads_per_worker") or limits.get("cpu")),
                 "--memory-limit", str(limits["memory"])]
    args += ["--no-dashboard", "--dashboard-address", str(w.get("portDashboard", 8790))]
    return args + list(w.get("extraArgs") or [])


def assert_chart_keys(values: dict) -> None:
    """Every key of ``values`` is one the dask chart reads."""

    def check(node: dict, path: str) -> None:
        allowed = HELM_KEYS.get(path)
        assert path in HELM_KEYS, f"{path}: not a section of the dask chart"
        for key, val in node.items():
            if allowed is not None:
                assert key in allowed, f"{path}.{key}: the dask chart has no such value"
            if isinstance(val, dict) and f"{path}.{key}" in HELM_KEYS:
                check(val, f"{path}.{key}")

    for top, node in values.items():
        check(node, top)


def merge_helm(base: Any, over: Any) -> Any:
    """Helm's merge of a later values file: mappings merge, everything else (lists too) is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merge_helm(base[k], v) if k in base else v for k, v in over.items()}}
    return over


def test_helm_values_match_the_official_chart():
    v = helm_values()
    assert_chart_keys(v)
    s, w = v["scheduler"], v["worker"]
    assert (s["image"]["repository"], s["image"]["tag"]) == (w["image"]["repository"], w["image"]["tag"])
    assert w["image"]["dask_worker"] == ["dask", "worker"]  # 2026.x command
    assert s["servicePort"] == 8786 and isinstance(w["replicas"], int) and w["replicas"] >= 1
    assert w["resources"]["limits"]["memory"] == w["resources"]["requests"]["memory"]
    # the shared volume: every mount names a volume; the claim is the one shared-pvc.yaml makes
    vols = {vol["name"]: vol for vol in w["mounts"]["volumes"]}
    for m in w["mounts"]["volumeMounts"]:
        assert m["name"] in vols and m["mountPath"].startswith("/")
    pvc = yaml.safe_load((DEPLOY / "kubernetes" / "shared-pvc.yaml").read_text())
    assert pvc["kind"] == "PersistentVolumeClaim" and "ReadWriteMany" in pvc["spec"]["accessModes"]
    assert {vol["persistentVolumeClaim"]["claimName"] for vol in vols.values()} == {pvc["metadata"]["name"]}
    assert v["jupyter"]["enabled"] is False
    assert_flags_known(render_helm_worker_args(v, "x")[2:], "worker")
    assert_flags_known(s["extraArgs"], "scheduler")


def test_k8s_client_job_matches_helm_values():
    """The Job running `gramdist run` mounts the same claim at the same path as the workers."""
    v = helm_values()
    job = yaml.safe_load((DEPLOY / "kubernetes" / "gramdist-run-job.yaml").read_text())
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    wmount = v["worker"]["mounts"]["volumeMounts"][0]
    wvol = {vol["name"]: vol for vol in v["worker"]["mounts"]["volumes"]}[wmount["name"]]
    cvol = {vol["name"]: vol for vol in pod["volumes"]}
    (cmount,) = container["volumeMounts"]
    assert cmount["mountPath"] == wmount["mountPath"]
    assert cvol[cmount["name"]]["persistentVolumeClaim"] == wvol["persistentVolumeClaim"]
    assert container["image"] == f"{v['worker']['image']['repository']}:{v['worker']['image']['tag']}"
    cmd = container["command"]
    assert cmd[:2] == ["gramdist", "run"]
    from gramdist.cli import _parser

    args = _parser().parse_args(cmd[1:])  # a valid gramdist command line
    # release `gramdist` of chart `dask`: the scheduler service is gramdist-dask-scheduler
    assert args.scheduler == f"tcp://gramdist-dask-scheduler:{v['scheduler']['servicePort']}"
    assert args.out.startswith(wmount["mountPath"] + "/") and args.job.startswith(wmount["mountPath"] + "/")
    assert pod["securityContext"]["runAsUser"] == v["worker"]["securityContext"]["runAsUser"]


def helm_tls_values() -> tuple[dict, dict]:
    over = yaml.safe_load((DEPLOY / "kubernetes" / "helm-values-tls.yaml").read_text())
    return over, merge_helm(helm_values(), over)


def secret_env(env: list[dict], certs: Path) -> dict[str, str]:
    """A container's environment as Kubernetes gives it, with secretKeyRefs read from ``certs``
    (the folder `kubectl create secret generic gramdist-tls --from-file=...` was made from)."""
    out = {}
    for e in env:
        if "value" in e:
            out[e["name"]] = str(e["value"])
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            assert ref["name"] == "gramdist-tls"
            out[e["name"]] = (certs / ref["key"]).read_text()
    return out


def test_helm_tls_values_structure():
    """The TLS values file is one more `-f`: chart keys only; the scheduler speaks TLS, the
    workers reach it over tls://, every certificate comes from the secret gramdist-tls (never
    ca.key), and the env lists (which Helm replaces, not merges) keep the base entries."""
    over, v = helm_tls_values()
    assert_chart_keys(over)
    assert_chart_keys(v)
    assert v["scheduler"]["extraArgs"] == ["--protocol", "tls"]
    assert_flags_known(v["scheduler"]["extraArgs"], "scheduler")
    assert v["worker"]["custom_scheduler_url"] == f"tls://gramdist-dask-scheduler:{v['scheduler']['servicePort']}"
    args = render_helm_worker_args(v, "unused")
    assert args[2] == "tls://gramdist-dask-scheduler:8786"
    assert_flags_known(args[3:], "worker")
    base = helm_values()
    for role in ("scheduler", "worker"):
        names = {e["name"] for e in v[role]["env"]}
        assert {e["name"] for e in base[role]["env"]} <= names
        keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in v[role]["env"] if "valueFrom" in e}
        assert keys == {"ca.pem", f"{role}.pem", f"{role}.key"}
        assert "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION" in names
    assert v["worker"]["mounts"] == base["worker"]["mounts"]


def test_helm_tls_commands_start_real_processes(tmp_path):
    """The scheduler and worker the TLS values render, with the certificates in their environment
    as the secret gives them (PEM text, not files): they connect over TLS; a client with
    --tls-dir is served, and so is one configured like the submit Job (certificates in Dask's
    environment variables); a client without a certificate is refused."""
    certs = gramdist_certs(tmp_path / "certs")
    _, v = helm_tls_values()
    cluster = DaskProcesses(tmp_path / "cluster")
    try:
        sched_env = secret_env(v["scheduler"]["env"], certs)
        addr = cluster.start_scheduler([DASK, "scheduler", "--host", "127.0.0.1", "--port=0", "--dashboard-address=:0",
                                        *v["scheduler"]["extraArgs"]], env=sched_env)
        assert addr.startswith("tls://")
        args = render_helm_worker_args(v, "unused")
        args = [DASK, *args[1:]]
        args[args.index(v["worker"]["custom_scheduler_url"])] = addr
        args[args.index("--dashboard-address") + 1] = ":0"
        args[args.index("--local-directory") + 1] = str(tmp_path / "w")
        cluster.start_worker("helm-tls", args, env=secret_env(v["worker"]["env"], certs))
        r = run_cli("status", "--scheduler", addr, "--tls-dir", str(certs))
        deadline = time.time() + 60
        while "no gramdist jobs" not in r.stdout and time.time() < deadline:
            time.sleep(1)
            r = run_cli("status", "--scheduler", addr, "--tls-dir", str(certs))
        assert r.returncode == 0 and "no gramdist jobs" in r.stdout, r.stderr[-2000:] + cluster.log("helm-tls")
        job = yaml.safe_load((DEPLOY / "kubernetes" / "gramdist-submit-job.yaml").read_text())
        (container,) = job["spec"]["template"]["spec"]["containers"]
        env = {**os.environ, **secret_env([e for e in container["env"] if "TLS" in e["name"]], certs)}
        r = run_cli("status", "--scheduler", addr, env=env)
        assert r.returncode == 0 and "no gramdist jobs" in r.stdout, r.stderr[-2000:]
        assert all(a.startswith("tls://") for a in workers_seen_with_env(addr, env))
        refusal_without_certificate(addr, certs / "ca.pem")
    finally:
        cluster.close()


def workers_seen_with_env(address: str, env: dict[str, str]) -> list[str]:
    """The worker addresses a `distributed.Client` configured only by ``env`` sees."""
    code = (f"import json, distributed; c = distributed.Client({address!r}, timeout='30s'); "
            "c.wait_for_workers(1, timeout=60); print(json.dumps(sorted(c.scheduler_info()['workers']))); c.close()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_k8s_submit_job_matches_helm_values():
    """The Job running `gramdist submit` mounts the workers' claim at their path, reaches the
    chart's TLS scheduler service, and requires the client certificate from the TLS secret (no
    silent fallback to plain TCP)."""
    v = helm_values()
    _, tls = helm_tls_values()
    job = yaml.safe_load((DEPLOY / "kubernetes" / "gramdist-submit-job.yaml").read_text())
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    from gramdist.cli import _parser

    cmd = container["command"]
    assert cmd[:2] == ["gramdist", "submit"]
    args = _parser().parse_args(cmd[1:])
    wmount = v["worker"]["mounts"]["volumeMounts"][0]
    (cmount,) = container["volumeMounts"]
    assert cmount["mountPath"] == wmount["mountPath"] and args.out.startswith(wmount["mountPath"] + "/")
    assert {vol["name"]: vol for vol in pod["volumes"]}[cmount["name"]]["persistentVolumeClaim"]["claimName"] == "gramdist-shared"
    env = {e["name"]: e for e in container["env"]}
    assert env["DASK_SCHEDULER_ADDRESS"]["value"] == f"tls://gramdist-dask-scheduler:{v['scheduler']['servicePort']}"
    assert tls["worker"]["custom_scheduler_url"] == env["DASK_SCHEDULER_ADDRESS"]["value"]
    refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e]
    assert {r["key"] for r in refs} == {"ca.pem", "client.pem", "client.key"}
    assert all(r["name"] == "gramdist-tls" and r["optional"] is False for r in refs)
    assert pod["securityContext"]["runAsUser"] == v["worker"]["securityContext"]["runAsUser"]


def load_kubecluster_module():
    spec = importlib.util.spec_from_file_location("gramdist_kubecluster", DEPLOY / "kubernetes" / "kubecluster.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kubecluster_resource_structure():
    mod = load_kubecluster_module()
    spec = mod.cluster_spec(name="g", n_workers=3)
    assert spec["apiVersion"] == "kubernetes.dask.org/v1" and spec["kind"] == "DaskCluster"
    w, s = spec["spec"]["worker"], spec["spec"]["scheduler"]
    assert w["replicas"] == 3
    (wc,) = w["spec"]["containers"]
    (sc,) = s["spec"]["containers"]
    assert wc["args"][:2] == ["dask", "worker"] and sc["args"][:2] == ["dask", "scheduler"]
    assert_flags_known(wc["args"][2:], "worker")
    assert_flags_known(sc["args"][2:], "scheduler")
    vols = {vol["name"]: vol for vol in w["spec"]["volumes"]}
    assert {m["name"] for m in wc["volumeMounts"]} <= set(vols)
    assert wc["volumeMounts"][0]["mountPath"] == mod.SHARED_PATH
    assert vols["gramdist-shared"]["persistentVolumeClaim"]["claimName"] == mod.SHARED_CLAIM
    ports = {p["name"]: p for p in s["service"]["ports"]}
    assert ports["tcp-comm"]["port"] == 8786 and ports["http-dashboard"]["port"] == 8787
    assert s["service"]["selector"]["dask.org/cluster-name"] == "g"
    yaml.safe_dump(spec)  # plain data, serialisable as a manifest


def test_helm_and_operator_commands_start_real_processes(dask_processes, tmp_path):
    """Start the scheduler with the chart's args, then one worker with the args the Helm values
    render to and one with the operator resource's args (address from $DASK_SCHEDULER_ADDRESS)."""
    v = helm_values()
    port_args = ["--port=0", "--dashboard-address=:0", *v["scheduler"]["extraArgs"]]
    addr = dask_processes.start_scheduler([DASK, "scheduler", "--host", "127.0.0.1", *port_args])
    args = render_helm_worker_args(v, addr)
    assert args[:2] == ["dask", "worker"]
    args = [DASK, *args[1:]]
    args[args.index("--dashboard-address") + 1] = ":0"
    args[args.index("--local-directory") + 1] = str(tmp_path / "w-helm")
    dask_processes.start_worker("helm", args)
    op = load_kubecluster_module().cluster_spec()["spec"]["worker"]["spec"]["containers"][0]["args"]
    op = [DASK, *op[1:]]
    op[op.index("$(DASK_WORKER_NAME)")] = "operator"
    op[op.index("--dashboard-address") + 1] = ":0"
    op[op.index("--local-directory") + 1] = str(tmp_path / "w-op")
    op[op.index("--dashboard")] = "--no-dashboard"  # bokeh is optional here
    dask_processes._spawn("operator", op, env={"DASK_SCHEDULER_ADDRESS": addr})
    dask_processes.wait_for_workers(2)
    with dask_processes.client() as c:
        workers = c.scheduler_info(n_workers=-1)["workers"].values()
        assert sorted(str(w["name"]) for w in workers) == ["helm", "operator"]
        assert {w["nthreads"] for w in workers} == {1}
        limits = {str(w["name"]): w["memory_limit"] for w in workers}
        assert limits["helm"] == 3 * 2**30  # 3Gi from resources.limits.memory


# ----------------------------------------------------------------------------- SLURM / PBS
def jobqueue_kwargs(path: Path) -> tuple[str, int, dict]:
    from gramdist.jobs import load_job

    job = load_job(path)
    spec = dict(job.cluster.jobqueue)
    return spec.pop("kind"), spec.pop("jobs"), spec


@pytest.mark.parametrize("name, kind, cls, directives", [
    ("slurm-nci1-wl.yaml", "slurm", "SLURMCluster", ["#SBATCH -A my-project", "#SBATCH -p normal",
                                                     "#SBATCH --cpus-per-task=16", "#SBATCH --exclusive",
                                                     "#SBATCH -t 02:00:00"]),
    ("pbs-nci1-wl.yaml", "pbs", "PBSCluster", ["#PBS -A my-project", "#PBS -q workq",
                                               "#PBS -l select=1:ncpus=16:mem=64GB", "#PBS -l walltime=02:00:00"]),
])
def test_hpc_job_files_render_batch_scripts(name, kind, cls, directives):
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    k, jobs, kwargs = jobqueue_kwargs(DEPLOY / "hpc" / name)
    assert k == kind and jobs >= 1
    cluster = getattr(dask_jobqueue, cls)(**kwargs, scheduler_options={"host": "127.0.0.1"})
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    for d in directives:
        assert d in script, f"{d!r} missing from\n{script}"
    assert "module load python/3.11" in script
    # 16 single-threaded worker processes per job
    assert re.search(r"--nworkers 16\b", script) and re.search(r"--nthreads 1\b", script)


FAKE_SBATCH = """#!/bin/sh
# Stand-in for SLURM's sbatch: run the job script in the background in its own session.
dir="{dir}"
cp "$1" "$dir/job-$$.sh"
setsid sh "$dir/job-$$.sh" > "$dir/job-$$.log" 2>&1 < /dev/null &
echo $! >> "$dir/pids"
echo "Submitted batch job $!"
"""
FAKE_SCANCEL = """#!/bin/sh
for id in "$@"; do kill -TERM -- "-$id" 2>/dev/null; kill -TERM "$id" 2>/dev/null; done
exit 0
"""


def test_slurm_job_starts_its_own_workers(tmp_path):
    """`gramdist run` with the SLURM example's cluster section submits batch jobs (to a
    stand-in sbatch that runs them locally), whose workers compute the job."""
    pytest.importorskip("dask_jobqueue")
    bin_dir = tmp_path / "bin"
    jobs_dir = tmp_path / "slurm"
    bin_dir.mkdir()
    jobs_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH.format(dir=jobs_dir)), ("scancel", FAKE_SCANCEL),
                       ("squeue", "#!/bin/sh\nexit 0\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    example = yaml.safe_load((DEPLOY / "hpc" / "slurm-nci1-wl.yaml").read_text())
    jq = example["cluster"]["jobqueue"]
    assert jq["kind"] == "slurm"
    # The example's cluster section, sized for this machine; no `module` command here.
    jq.update(jobs=2, cores=1, processes=1, memory="1GB", local_directory=str(tmp_path / "local"),
              log_directory=str(tmp_path / "logs"), job_script_prologue=[],
              scheduler_options={"host": "127.0.0.1"}, python=sys.executable)
    job_path = synthetic_job(tmp_path / "job.yaml", extra=yaml.safe_dump({"cluster": example["cluster"]}))
    out = tmp_path / "slurm.zarr"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    try:
        r = run_cli("run", str(job_path), "--out", str(out), "--quiet", "--json", env=env, timeout=240)
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in jobs_dir.glob("*.log"))
        assert r.returncode == 0, r.stderr[-3000:] + logs
        assert last_json(r.stdout)["complete"]
        scripts = sorted(jobs_dir.glob("job-*.sh"))
        assert len(scripts) == 2  # jobs: 2 -> two batch jobs
        text = scripts[0].read_text()
        assert "#SBATCH -A my-project" in text and "distributed.cli.dask_worker" in text
        assert np.array_equal(open_gram(out)[0], reference_gram(job_path))
    finally:
        pids = (jobs_dir / "pids").read_text().split() if (jobs_dir / "pids").exists() else []
        for pid in pids:
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


FAKE_SRUN = """#!/bin/sh
# Stand-in for srun inside an allocation: start the command once per task, here, and wait.
while [ "${1#--}" != "$1" ]; do shift; done
i=0
while [ $i -lt "${SLURM_NTASKS:-1}" ]; do "$@" & i=$((i+1)); done
wait
"""
FAKE_PBSDSH = """#!/bin/sh
# Stand-in for pbsdsh -u: run the command on the one 'node' there is, here.
[ "$1" = "-u" ] && shift
[ "$1" = "--" ] && shift
exec "$@"
"""


def script_commands(path: Path) -> list[list[str]]:
    """The `dask scheduler` / `dask worker` command lines of a batch script (continuations
    joined, shell variables left as words)."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    cmds = []
    for line in text.splitlines():
        for start in ("dask scheduler", "dask worker"):
            if start in line and not line.lstrip().startswith("#"):
                frag = line[line.index(start):].replace("&", " ").rstrip()
                if frag.count('"') % 2:  # the end of a `bash -c "..."` string
                    frag = frag.removesuffix('"')
                words = shlex.split(frag)
                cmds.append(words)
    return cmds


@pytest.mark.parametrize("name, directive", [("dask-cluster.slurm", "#SBATCH"), ("dask-cluster.pbs", "#PBS")])
def test_hpc_cluster_scripts_structure(name, directive):
    """The lasting-cluster batch scripts: valid bash, their scheduler speaks TLS and writes a
    scheduler file the workers (and `gramdist submit --scheduler-file`) read; known flags only."""
    path = DEPLOY / "hpc" / name
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    text = path.read_text()
    assert text.startswith("#!/bin/bash") and f"{directive} " in text
    (sched,) = [c for c in script_commands(path) if c[:2] == ["dask", "scheduler"]]
    (worker,) = [c for c in script_commands(path) if c[:2] == ["dask", "worker"]]
    assert sched[sched.index("--protocol") + 1] == "tls"
    for cmd, role in ((sched, "scheduler"), (worker, "worker")):
        assert_flags_known(cmd[2:], role)
        assert "--scheduler-file" in cmd and "--tls-ca-file" in cmd and f"{role}.key" in cmd[cmd.index("--tls-key") + 1]
    assert sched[sched.index("--dashboard-address") + 1].startswith("127.0.0.1:")
    assert "gramdist certs" in text


def _cluster_script_env(tmp_path: Path, fake: str, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / fake).write_text(body)
    (bin_dir / fake).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
            "GRAMDIST_VENV": sys.prefix, "GRAMDIST_CERTS": str(tmp_path / "certs"),
            "GRAMDIST_CLUSTER_DIR": str(tmp_path / "state"), "GRAMDIST_SCHEDULER_HOST": "127.0.0.1",
            "GRAMDIST_WORKER_MEMORY": "1GiB", "TMPDIR": str(tmp_path)}


def stop_session(proc: subprocess.Popen) -> None:
    """SIGTERM a process's whole session (SIGKILL if it lingers), and reap it."""
    _killpg(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        _killpg(proc, signal.SIGKILL)
        proc.wait(timeout=10)


def _start_cluster_script(script: str, env: dict[str, str], scheduler_file: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
        proc = subprocess.Popen(["bash", str(DEPLOY / "hpc" / script)], stdout=f, stderr=subprocess.STDOUT,
                                env=env, cwd=log.parent, start_new_session=True)
    deadline = time.time() + 120
    while not (scheduler_file.exists() and scheduler_file.read_text().strip()):
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"{script}: no scheduler file: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc


def test_slurm_cluster_script_runs_submitted_jobs_over_tls(tmp_path):
    """dask-cluster.slurm run as SLURM would (srun a stand-in that starts 2 tasks here): it makes
    the certificates with `gramdist certs`, starts a TLS scheduler on 127.0.0.1 and 2 workers; a
    job submitted with --scheduler-file and --tls-dir completes bitwise after its submitter has
    exited; `status --scheduler-file` lists it; a client without a certificate is refused."""
    pytest.importorskip("cryptography")
    env = _cluster_script_env(tmp_path, "srun", FAKE_SRUN) | {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2"}
    sched_file = tmp_path / "state" / "dask-scheduler-4242.json"
    proc = _start_cluster_script("dask-cluster.slurm", env, sched_file, tmp_path / "slurm.log")
    try:
        certs = tmp_path / "certs"
        assert {p.name for p in certs.iterdir()} >= {"ca.pem", "client.pem", "client.key", "worker.key"}
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        job = synthetic_job(tmp_path / "job.yaml", n_graphs=60)
        out = tmp_path / "shared" / "slurm.zarr"
        r = run_cli("submit", str(job), "--scheduler-file", str(sched_file), "--tls-dir", str(certs),
                    "--out", str(out), "--json", "--wait", "60")
        assert r.returncode == 0, r.stderr[-3000:] + (tmp_path / "slurm.log").read_text(errors="replace")[-3000:]
        w = run_cli("status", str(out), "--watch", "--interval", "0.3")
        assert w.returncode == 0 and "complete" in w.stdout, w.stdout + w.stderr[-2000:]
        assert np.array_equal(open_gram(out)[0], reference_gram(job))
        listed = run_cli("status", "--scheduler-file", str(sched_file), "--tls-dir", str(certs), "--json")
        assert [json.loads(ln)["state"] for ln in listed.stdout.splitlines()] == ["complete"], listed.stderr
        refusal_without_certificate(address, certs / "ca.pem")
    finally:
        stop_session(proc)


def test_pbs_cluster_script_starts_a_tls_cluster(tmp_path):
    """dask-cluster.pbs with a stand-in pbsdsh (one node, here): its workers join its TLS
    scheduler, reached through the scheduler file with a client certificate."""
    pytest.importorskip("cryptography")
    from distributed import Client
    from distributed.security import Security

    env = _cluster_script_env(tmp_path, "pbsdsh", FAKE_PBSDSH) | {"PBS_JOBID": "77.server",
                                                                  "GRAMDIST_WORKERS_PER_NODE": "2"}
    sched_file = tmp_path / "state" / "dask-scheduler-77.server.json"
    proc = _start_cluster_script("dask-cluster.pbs", env, sched_file, tmp_path / "pbs.log")
    try:
        certs = tmp_path / "certs"
        security = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "client.pem"),
                            tls_client_key=str(certs / "client.key"), require_encryption=True)
        with Client(scheduler_file=str(sched_file), security=security, timeout="30s") as c:
            c.wait_for_workers(2, timeout=90)
            assert all(a.startswith("tls://127.0.0.1:") for a in c.scheduler_info(n_workers=-1)["workers"])
    finally:
        stop_session(proc)


def test_tile_window_grows_when_workers_join_late(tmp_path, monkeypatch):
    """HPC workers arrive while the job runs (batch jobs leave the queue one by one): the
    window of tiles in flight, sized from the workers present at the start, widens."""
    import threading

    from distributed import Client, LocalCluster

    from gramdist.engine import runner
    from gramdist.jobs import load_job

    job = synthetic_job(tmp_path / "job.yaml", n_graphs=240, tile=10)
    out = tmp_path / "late.zarr"
    lines: list[str] = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        result: dict = {}
        th = threading.Thread(target=lambda: result.setdefault("r", runner.run_job(load_job(job, ["gram.checkpoint_seconds=0.05"]), out=str(out), placement=Placement(client=client), context=RunContext(log=lines.append))))
        th.start()
        deadline = time.time() + 60
        while chunks_written(out) < 5 and time.time() < deadline and th.is_alive():
            time.sleep(0.01)
        cluster.scale(3)
        th.join(timeout=120)
    assert result["r"].complete
    assert any("1 workers (1 threads)" in ln for ln in lines), lines
    assert any(re.search(r"3 workers now; 6 tiles in flight", ln) for ln in lines), lines
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


# ----------------------------------------------------------------------------- TLS
def make_certificates(folder: Path) -> dict[str, Path]:
    """A CA and the scheduler/worker/client certificates it signs (`gramdist certs`), and an
    intruder whose certificate another CA signed."""
    from gramdist.engine.certs import write_certificates

    files = write_certificates(folder)
    other = write_certificates(folder / "other", clients=["intruder"])
    files["other-ca.pem"] = other["ca.pem"]
    files["intruder.pem"], files["intruder.key"] = other["intruder.pem"], other["intruder.key"]
    return files


def tls_flags(certs: dict[str, Path], who: str, ca: str = "ca") -> list[str]:
    return ["--tls-ca-file", str(certs[f"{ca}.pem"]), "--tls-cert", str(certs[f"{who}.pem"]),
            "--tls-key", str(certs[f"{who}.key"])]


def test_tls_job_runs_and_other_clients_are_refused(tmp_path):
    pytest.importorskip("cryptography")
    from distributed.security import Security

    certs = make_certificates(tmp_path / "certs")
    security = Security(tls_ca_file=str(certs["ca.pem"]), tls_client_cert=str(certs["client.pem"]),
                        tls_client_key=str(certs["client.key"]), require_encryption=True)
    cluster = DaskProcesses(tmp_path / "cluster", security=security)
    try:
        addr = cluster.start_scheduler([DASK, "scheduler", "--protocol", "tls", "--host", "127.0.0.1",
                                        "--port", "0", "--dashboard-address", ":0",
                                        *tls_flags(certs, "scheduler")])
        assert addr.startswith("tls://")
        for i in range(2):
            cluster.start_worker(f"w{i}", [DASK, "worker", addr, "--nthreads", "1", "--memory-limit", "1GiB",
                                           "--no-dashboard", *tls_flags(certs, "worker")])
        cluster.wait_for_workers(2)
        job = synthetic_job(tmp_path / "job.yaml", n_graphs=60)
        out = tmp_path / "tls.zarr"
        r = run_cli("run", str(job), "--scheduler", addr, "--out", str(out), "--quiet", "--json",
                    *tls_flags(certs, "client"))
        assert r.returncode == 0, r.stderr[-3000:]
        assert last_json(r.stdout)["complete"]
        assert np.array_equal(open_gram(out)[0], reference_gram(job))
        with cluster.client() as c:
            assert all(a.startswith("tls://") for a in c.scheduler_info(n_workers=-1)["workers"])

        plain = addr.replace("tls://", "tcp://")
        t0 = time.perf_counter()
        line = one_error_line(run_cli("run", str(job), "--scheduler", plain, "--out", str(tmp_path / "p.zarr")))
        assert "cannot connect to the Dask scheduler" in line and plain in line
        assert time.perf_counter() - t0 < 30
        line = one_error_line(run_cli("run", str(job), "--scheduler", addr, "--out", str(tmp_path / "i.zarr"),
                                      *tls_flags(certs, "intruder", ca="other-ca")))
        assert "cannot connect to the Dask scheduler" in line
        line = one_error_line(run_cli("run", str(job), "--scheduler", addr, "--out", str(tmp_path / "n.zarr")))
        assert "needs --tls-ca-file" in line
        line = one_error_line(run_cli("run", str(job), "--scheduler", plain, "--out", str(tmp_path / "m.zarr"),
                                      *tls_flags(certs, "client")))
        assert "use tls://" in line
        # the store is created only once the cluster is reached: a refused run leaves nothing
        for n in "pinm":
            assert not (tmp_path / f"{n}.zarr").exists()
    finally:
        cluster.close()


def refusal_without_certificate(address: str, ca: Path) -> str:
    """Connect to a TLS scheduler as a client that trusts its CA but has no certificate of its
    own; return the error the server's refusal raises (an alert, "certificate required", or the
    connection closed, depending on timing); fail if the server answers."""
    import socket
    import ssl

    host, port = address.split("://", 1)[1].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=15) as raw:
        try:
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"\0" * 8)
                data = tls.recv(1)  # TLS 1.3: the server's refusal arrives with the first read
        except (ssl.SSLError, ConnectionError) as exc:
            return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"a client without a certificate was let in (read {data!r})")


def gramdist_certs(folder: Path) -> Path:
    """Certificates made the way the docs say: `gramdist certs FOLDER`."""
    pytest.importorskip("cryptography")
    r = run_cli("certs", str(folder))
    assert r.returncode == 0, r.stderr
    return folder


def test_compose_tls_variant_structure(tmp_path):
    """`-f docker-compose.tls.yml` turns TLS on: the scheduler is published on every interface
    (the dashboard stays on loopback), scheduler and workers start with their own certificate
    and key, mounted read-only from $GRAMDIST_CERTS (never ca.key), and talk over tls://."""
    shared, certs = str(tmp_path / "shared"), str(tmp_path / "certs")
    with pytest.raises(ValueError, match="GRAMDIST_CERTS"):
        load_compose({"GRAMDIST_SHARED": shared}, "docker-compose.yml", "docker-compose.tls.yml")
    c = load_compose({"GRAMDIST_SHARED": shared, "GRAMDIST_CERTS": certs}, "docker-compose.yml", "docker-compose.tls.yml")
    sched, worker = c["services"]["scheduler"], c["services"]["worker"]
    assert sched["ports"] == ["8786:8786", "127.0.0.1:8787:8787"]
    scmd, wcmd = sched["command"], worker["command"]
    assert scmd[:2] == ["dask", "scheduler"] and scmd[scmd.index("--protocol") + 1] == "tls"
    assert "tls://scheduler:8786" in wcmd and not any(a.startswith("tcp://") for a in wcmd)
    for svc, cmd, role in ((sched, scmd, "scheduler"), (worker, wcmd, "worker")):
        mounts = {v["target"]: v for v in svc["volumes"]}
        assert mounts[shared]["source"] == shared  # the base file's shared folder is kept
        wanted = {"--tls-ca-file": "ca.pem", "--tls-cert": f"{role}.pem", "--tls-key": f"{role}.key"}
        for flag, name in wanted.items():
            target = cmd[cmd.index(flag) + 1]
            assert mounts[target] == {"type": "bind", "source": f"{certs}/{name}", "target": target, "read_only": True}
        assert not any(v["source"].endswith("ca.key") for v in svc["volumes"])
        assert_flags_known(cmd[2:], role)
    assert sched["healthcheck"] == load_compose({"GRAMDIST_SHARED": shared})["services"]["scheduler"]["healthcheck"]


def test_compose_tls_commands_run_a_submitted_job_and_refuse_clients_without_certificates(tmp_path):
    """The TLS variant's own commands with certificates from `gramdist certs`, on 127.0.0.1: a
    job submitted over TLS (`--tls-dir`) completes bitwise; a client without a certificate is
    refused by the scheduler, and gramdist itself says TLS needs one; plain TCP is refused."""
    certs = gramdist_certs(tmp_path / "certs")
    shared = tmp_path / "shared"
    shared.mkdir()
    c = load_compose({"GRAMDIST_SHARED": str(shared), "GRAMDIST_CERTS": str(certs)},
                     "docker-compose.yml", "docker-compose.tls.yml")
    sched, worker = c["services"]["scheduler"], c["services"]["worker"]

    def local(cmd: list[str]) -> list[str]:  # container paths -> the files on this host
        return [DASK, *[str(certs / Path(a).name) if a.startswith("/tls/") else a for a in cmd[1:]]]

    cluster = DaskProcesses(tmp_path / "cluster", env={k: str(v) for k, v in sched["environment"].items()})
    try:
        cmd = local(sched["command"])
        cmd[cmd.index("--port") + 1] = "0"
        cmd[cmd.index("--dashboard-address") + 1] = ":0"
        addr = cluster.start_scheduler([*cmd, "--host", "127.0.0.1"])
        assert addr.startswith("tls://127.0.0.1:")
        wcmd = local(worker["command"])
        wcmd[wcmd.index("tls://scheduler:8786")] = addr
        wcmd[wcmd.index("--local-directory") + 1] = str(tmp_path / "dask-worker")
        cluster.start_worker("worker-0", wcmd)
        from distributed.security import Security

        cluster.security = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "client.pem"),
                                    tls_client_key=str(certs / "client.key"), require_encryption=True)
        cluster.wait_for_workers(1)

        job = synthetic_job(tmp_path / "job.yaml", n_graphs=60)
        out = shared / "tls.zarr"
        r = run_cli("submit", str(job), "--scheduler", addr, "--tls-dir", str(certs), "--out", str(out), "--json")
        assert r.returncode == 0, r.stderr[-3000:] + cluster.log("worker-0")
        w = run_cli("status", str(out), "--watch", "--interval", "0.3")
        assert w.returncode == 0 and "complete" in w.stdout, w.stdout + w.stderr[-2000:]
        assert np.array_equal(open_gram(out)[0], reference_gram(job))
        listed = run_cli("status", "--scheduler", addr, "--tls-dir", str(certs))
        assert listed.returncode == 0 and last_json(r.stdout)["job_id"] in listed.stdout, listed.stderr

        refusal_without_certificate(addr, certs / "ca.pem")
        line = one_error_line(run_cli("status", "--scheduler", addr, "--tls-ca-file", str(certs / "ca.pem")))
        assert "Dask's TLS is mutual" in line, line
        plain = one_error_line(run_cli("submit", str(job), "--scheduler", addr.replace("tls://", "tcp://"),
                                       "--out", str(shared / "plain.zarr")))
        assert "cannot connect to the Dask scheduler" in plain
        assert not (shared / "plain.zarr").exists()
    finally:
        cluster.close()


def test_tls_flags_reach_the_job(tmp_path):
    """--tls-* override cluster.security of the job; a missing file is a one-line error."""
    job = synthetic_job(tmp_path / "job.yaml", n_graphs=10)
    r = run_cli("run", str(job), "--scheduler", "tls://127.0.0.1:1", "--tls-ca-file", str(tmp_path / "nope.pem"),
                "--tls-cert", str(job), "--tls-key", str(job))
    assert "cluster.security.tls_ca_file: file not found" in one_error_line(r)


def test_deploy_readme_commands_are_valid():
    """The commands the deploy README tells a user to type parse with the installed CLIs."""
    text = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S)
    cmds = [ln.strip() for b in blocks for ln in re.sub(r"\\\n", " ", b).splitlines()
            if ln.strip() and not ln.strip().startswith("#")]
    from gramdist.cli import _parser

    seen = set()
    for cmd in cmds:
        words = shlex.split(cmd.replace("$", "X"))
        if words[0] == "gramdist":
            _parser().parse_args(words[1:])
            seen.add(words[1])
        if words[:2] in (["dask", "scheduler"], ["dask", "worker"]):
            assert_flags_known(words[2:], words[1])
            seen.add(words[1])
        assert words[0] not in ("dask-scheduler", "dask-worker"), cmd
    assert {"run", "submit", "status", "cancel", "certs", "info", "scheduler", "worker"} <= seen


def test_helm_s3_values_and_submit_job_need_no_shared_volume():
    """helm-values-s3.yaml: chart keys only, no volume, credentials from the secret the S3
    submit Job reads too; the Job's command parses, writes to a bucket, reads its job file from
    its ConfigMap, and reaches the TLS scheduler as the shared-folder Job does."""
    over = yaml.safe_load((DEPLOY / "kubernetes" / "helm-values-s3.yaml").read_text())
    assert_chart_keys(over)
    merged = merge_helm(helm_tls_values()[1], over)
    w = merged["worker"]
    assert w["mounts"] == {"volumes": [], "volumeMounts": []}
    wenv = {e["name"]: e for e in w["env"]}
    assert wenv["GRAMDIST_DATA"]["value"].startswith("s3://")
    assert {wenv[k]["valueFrom"]["secretKeyRef"]["name"] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")} == {"gramdist-s3"}
    assert "custom_scheduler_url" not in over["worker"]  # the TLS file's scheduler stays
    config, job = yaml.safe_load_all((DEPLOY / "kubernetes" / "gramdist-submit-job-s3.yaml").read_text())
    assert config["kind"] == "ConfigMap" and job["kind"] == "Job"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    from gramdist.cli import _parser
    from gramdist.jobs import validate_job

    args = _parser().parse_args(container["command"][1:])
    assert args.out.startswith("s3://")
    (mount,) = container["volumeMounts"]
    assert args.job.startswith(mount["mountPath"] + "/")
    (vol,) = pod["volumes"]
    assert vol["configMap"]["name"] == config["metadata"]["name"]
    name = args.job[len(mount["mountPath"]) + 1:]
    validate_job(yaml.safe_load(config["data"][name]))
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"] == wenv["AWS_ACCESS_KEY_ID"]["valueFrom"]
    shared = yaml.safe_load((DEPLOY / "kubernetes" / "gramdist-submit-job.yaml").read_text())
    shared_env = {e["name"]: e for e in shared["spec"]["template"]["spec"]["containers"][0]["env"]}
    for key in ("DASK_SCHEDULER_ADDRESS", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT", "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"):
        assert env[key] == shared_env[key]
