"""Job files: loading, validation, ``--set`` overrides and grid expansion.

A job is a YAML mapping with these sections (all but ``dataset`` and ``kernel`` optional)::

    dataset:  {name: MUTAG}            # or {path: /data/MUTAG} or {synthetic: {...}};
                                       # optional node_attributes: all|none|[cols], limit: k
    kernel:   {name: wl, h: 5}         # every other key is a parameter of the kernel
    fit:      {sample_size: null, seed: 0, from_store: null}
    gram:     {tile_size: 256, normalize: false, dtype: float64}   # or float32: half the store
                                       # keep_embeddings: auto (default) keeps each chunk's embedding
                                       # when it is small beside the Gram; true: always; false: never
    test:     {dataset: {name: ...}}   # rectangular K(test, train); fit on `dataset`
    output:   mutag-wl.zarr            # default: <job file stem>.zarr in the working dir
    cluster:  {scheduler: null, n_workers: null, threads_per_worker: 1, memory_limit: auto,
               max_tiles_in_flight: null, security: {...}, jobqueue: {...}}
    grid:     {kernel.h: [1, 2, 3]}    # one store per combination
    stream / learner:                  # graph-stream jobs (``gramdist stream``)

Unknown keys are rejected with a :class:`~gramdist.errors.JobError` naming the key.
:func:`validate_job` returns a typed :class:`Job` (its sections :class:`FitSpec`,
:class:`GramSpec`, :class:`ClusterSpec`; the free-form ones as validated mappings), and
:meth:`Job.to_dict` gives back the mapping a store records.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gramdist.errors import JobError

_SECTIONS: dict[str, dict[str, tuple[type, ...]] | None] = {
    # None: free-form mapping validated elsewhere (dataset loader, kernel, stream module)
    "dataset": None,
    "kernel": None,
    "fit": {"sample_size": (int, type(None)), "seed": (int,), "from_store": (str, type(None))},
    "gram": {"tile_size": (int,), "normalize": (bool,), "compression_level": (int,),
             "checkpoint_seconds": (int, float), "dtype": (str,), "keep_embeddings": (bool, str)},
    "test": {"dataset": (dict, str)},
    "output": None,
    "cluster": {
        "scheduler": (str, type(None)),
        "n_workers": (int, type(None)),
        "threads_per_worker": (int,),
        "memory_limit": (str, int, type(None)),
        "max_tiles_in_flight": (int, type(None)),
        "security": (dict, type(None)),
        "jobqueue": (dict, type(None)),
        "dashboard_address": (str, type(None)),
    },
    "grid": None,
    "stream": None,
    "learner": None,
}

DEFAULTS: dict[str, Any] = {
    "fit": {"sample_size": None, "seed": 0, "from_store": None},
    "gram": {"tile_size": 256, "normalize": False, "compression_level": 1, "checkpoint_seconds": 2.0,
             "dtype": "float64", "keep_embeddings": "auto"},
    "cluster": {
        "scheduler": None,
        "n_workers": None,
        "threads_per_worker": 1,
        "memory_limit": "auto",
        "max_tiles_in_flight": None,
        "security": None,
        "jobqueue": None,
        "dashboard_address": "127.0.0.1:0",
    },
}


@dataclass(frozen=True)
class FitSpec:
    """``fit:``: the sample the kernel's state is fitted on (all graphs when ``sample_size``
    is None), the seed of every random step, or a store whose state to reuse."""

    sample_size: int | None = None
    seed: int = 0
    from_store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class GramSpec:
    """``gram:``: how the Gram is cut and stored."""

    tile_size: int = 256
    normalize: bool = False
    compression_level: int = 1
    checkpoint_seconds: float = 2.0
    dtype: str = "float64"
    keep_embeddings: bool | str = "auto"  # True, False or "auto" (see gramdist.engine.store.state)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ClusterSpec:
    """``cluster:``: where a job runs (see :mod:`gramdist.engine.placement`)."""

    scheduler: str | None = None
    n_workers: int | None = None
    threads_per_worker: int = 1
    memory_limit: str | int | None = "auto"
    max_tiles_in_flight: int | None = None
    security: dict[str, Any] | None = None
    jobqueue: dict[str, Any] | None = None
    dashboard_address: str | None = "127.0.0.1:0"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> ClusterSpec:
        return dataclasses.replace(self, **changes)


_OPTIONAL = ("test", "output", "grid", "stream", "learner")


@dataclass(frozen=True)
class Job:
    """A validated job: the typed sections, and the free-form ones as given.

    ``name`` is the job file's stem; ``test`` the ``test:`` section (``{dataset: ...}``) or
    None; ``grid`` dotted key -> values (None without a grid).
    """

    name: str | None
    dataset: Any = None
    kernel: dict[str, Any] | None = None
    fit: FitSpec = field(default_factory=FitSpec)
    gram: GramSpec = field(default_factory=GramSpec)
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    test: dict[str, Any] | None = None
    output: str | None = None
    grid: dict[str, list[Any]] | None = None
    stream: dict[str, Any] | None = None
    learner: dict[str, Any] | None = None

    @property
    def test_dataset(self) -> Any:
        return (self.test or {}).get("dataset")

    def to_dict(self) -> dict[str, Any]:
        """The job as a mapping (what a store records in its ``job`` attribute)."""
        out: dict[str, Any] = {}
        if self.dataset is not None:
            out["dataset"] = copy.deepcopy(self.dataset)
        if self.kernel is not None:
            out["kernel"] = dict(self.kernel)
        out |= {"fit": self.fit.to_dict(), "gram": self.gram.to_dict(), "cluster": self.cluster.to_dict()}
        for key in _OPTIONAL:
            value = getattr(self, key)
            if value is not None:
                out[key] = copy.deepcopy(value)
        return out

    def replace(self, **changes: Any) -> Job:
        return dataclasses.replace(self, **changes)

    def with_cluster(self, **changes: Any) -> Job:
        return self.replace(cluster=self.cluster.replace(**changes))


def yaml_problem(exc: Exception) -> str:
    """What PyYAML found wrong, on one line (its reader errors span two, with no ``problem``)."""
    if getattr(exc, "problem", None):
        return str(exc.problem)
    if getattr(exc, "character", None) is not None:  # yaml.reader.ReaderError: a character YAML forbids
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"character {code:#06x} at position {exc.position} is not allowed in YAML"
    return " ".join(str(exc).split())


def load_job(path: str | os.PathLike, overrides: list[str] | None = None) -> Job:
    """Read a job file, apply ``KEY=VALUE`` overrides, validate, and fill defaults.

    The job's ``name`` is the file stem; when the job (after overrides) holds a grid, ``grid``
    maps dotted keys to lists of values.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JobError(f"{p}: job file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JobError(f"{p}: cannot read job file: {exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise JobError(f"{p}{where}: invalid YAML: {yaml_problem(exc)}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise JobError(f"{p}: a job file must be a mapping of sections, got {type(raw).__name__}")
    job = apply_overrides(raw, overrides or [])
    return validate_job(job, source=str(p), name=p.stem)


def parse_override(item: str) -> tuple[str, Any, bool]:
    """``"kernel.h=1,2,3"`` -> ``("kernel.h", [1, 2, 3], True)``; the flag marks a grid.

    Values are parsed as YAML scalars; an unquoted, unbracketed comma-separated value is a
    grid over its parts. Quote the value (``--set 'x="a,b"'``) to keep a comma literally.
    """
    if "=" not in item:
        raise JobError(f"--set {item!r}: expected KEY=VALUE")
    key, value = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise JobError(f"--set {item!r}: invalid key {key!r}")
    text = value.strip()
    if "," in text and text[:1] not in "[{\"'":
        return key, [_yaml_scalar(v.strip(), item) for v in text.split(",")], True
    return key, _yaml_scalar(text, item), False


def _yaml_scalar(text: str, item: str) -> Any:
    try:
        return yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        raise JobError(f"--set {item!r}: cannot parse value {text!r}") from None


def apply_overrides(job: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Copy of ``job`` with dotted ``KEY=VALUE`` overrides applied (grids go to ``grid``).

    A single value for a key the job's ``grid`` varies pins that key: it leaves the grid
    (``--set kernel.h=3`` on a job with ``grid: {kernel.h: [1, 2, 3]}`` runs h = 3 only).
    """
    job = copy.deepcopy(job)
    for item in overrides:
        key, value, is_grid = parse_override(item)
        grid = job.get("grid") or {}
        if is_grid:
            grid[key] = value
            job["grid"] = grid
        else:
            set_dotted(job, key, value)
            if isinstance(grid, dict) and key in grid:
                del grid[key]
                job["grid"] = grid or None
    return job


def set_dotted(job: dict[str, Any], key: str, value: Any) -> None:
    """Set ``job["a"]["b"] = value`` for ``key == "a.b"``, creating mappings on the way."""
    parts = key.split(".")
    node = job
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise JobError(f"--set {key}: {part!r} is not a section")
        node = nxt
    node[parts[-1]] = value


def validate_job(job: dict[str, Any] | Job, source: str = "job", name: str | None = None) -> Job:
    """Check sections and key types, fill defaults; raise :class:`JobError` naming the key.

    ``name``: the job's name (default: a ``_job_name`` key of ``job``, else None).
    """
    if isinstance(job, Job):
        return job
    job = copy.deepcopy(job)
    name = name if name is not None else job.get("_job_name")
    for section in job:
        if not isinstance(section, str):
            raise JobError(f"{source}: section names are words, got {section!r}")
        if section.startswith("_"):
            continue
        if section not in _SECTIONS:
            raise JobError(f"{source}: unknown section {section!r}; allowed: {', '.join(_SECTIONS)}")
    for section, schema in _SECTIONS.items():
        value = job.get(section)
        if schema is None or value is None:
            continue
        if not isinstance(value, dict):
            raise JobError(f"{source}: section {section!r} must be a mapping")
        for key, val in value.items():
            if not isinstance(key, str) or key not in schema:
                raise JobError(f"{source}: unknown key {section}.{key}; allowed: {', '.join(schema)}")
            types = schema[key]
            if not isinstance(val, types) or (isinstance(val, bool) and bool not in types):
                names = "/".join("null" if t is type(None) else t.__name__ for t in types)
                raise JobError(f"{source}: {section}.{key} must be {names}, got {val!r}")
    for section, defaults in DEFAULTS.items():
        merged = dict(defaults)
        merged.update(job.get(section) or {})
        job[section] = merged
    if "stream" not in job:
        if "dataset" not in job:
            raise JobError(f"{source}: missing section 'dataset'")
        if not isinstance(job.get("kernel"), dict) or not isinstance(job["kernel"].get("name"), str):
            raise JobError(f"{source}: section 'kernel' must name a kernel (kernel.name, a string)")
    gram = job["gram"]
    if gram["tile_size"] < 1:
        raise JobError(f"{source}: gram.tile_size must be >= 1, got {gram['tile_size']}")
    if gram["dtype"] not in ("float64", "float32"):
        raise JobError(f"{source}: gram.dtype must be float64 or float32, got {gram['dtype']!r}")
    if isinstance(gram["keep_embeddings"], str) and gram["keep_embeddings"] != "auto":
        raise JobError(f"{source}: gram.keep_embeddings must be true, false or auto, got {gram['keep_embeddings']!r}")
    if not gram["checkpoint_seconds"] > 0:
        raise JobError(f"{source}: gram.checkpoint_seconds must be > 0, got {gram['checkpoint_seconds']}")
    fit = job["fit"]
    if fit["sample_size"] is not None and fit["sample_size"] < 1:
        raise JobError(f"{source}: fit.sample_size must be >= 1 or null, got {fit['sample_size']}")
    if job.get("output") is not None and not isinstance(job["output"], str):
        raise JobError(f"{source}: output must be a path string")
    grid = job.get("grid")
    if grid:
        if not isinstance(grid, dict):
            raise JobError(f"{source}: grid must map dotted keys to lists of values")
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                raise JobError(f"{source}: grid.{key} must be a non-empty list")
            if key.split(".")[0] not in ("kernel", "fit", "gram", "dataset"):
                raise JobError(f"{source}: grid key {key!r} must start with kernel., fit., gram. or dataset.")
    return _typed(job, name)


def _typed(job: dict[str, Any], name: str | None) -> Job:
    return Job(name=name, dataset=job.get("dataset"), kernel=job.get("kernel"), fit=FitSpec(**job["fit"]),
               gram=GramSpec(**job["gram"]), cluster=ClusterSpec(**job["cluster"]),
               **{key: job.get(key) for key in _OPTIONAL})


def expand_grid(job: Job) -> list[tuple[str, Job]]:
    """One ``(setting_name, job)`` per grid combination; ``[("", job)]`` without a grid.

    Setting names read like ``h-2_eta-0.5`` (last component of each key), usable as file names.
    Each setting is validated again (a grid value of the wrong type is one line, as a job's).
    """
    grid = job.grid or {}
    base = job.replace(grid=None)
    if not grid:
        return [("", base)]
    keys = list(grid)
    out = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        j = base.to_dict()
        parts = []
        for key, value in zip(keys, combo):
            set_dotted(j, key, value)
            parts.append(f"{_name_value(key.split('.')[-1])}-{_name_value(value)}")
        setting = "_".join(parts)
        out.append((setting, validate_job(j, source=f"grid setting {setting}", name=job.name)))
    return out


def _name_value(value: Any) -> str:
    """A file-name-safe form of a grid key or value: letters, digits and ``-.+`` only, never a
    path (no separators, and no leading dot)."""
    text = str(value).replace("/", "-").replace(" ", "")
    return "".join(c for c in text if c.isalnum() or c in "-.+").lstrip(".") or "_"
