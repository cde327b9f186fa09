"""The boundaries ARCHITECTURE.md states, checked on the source (imports, not behaviour)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import gramdist
from gramdist.engine import runner

PACKAGE = Path(gramdist.__file__).parent


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def test_kernels_never_import_dask_or_zarr():
    for path in modules_under("kernels"):
        bad = {m for m in imported_modules(path) if m.split(".")[0] in ("dask", "distributed", "zarr")}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_kernels_never_import_the_engine_or_the_front_ends():
    for path in modules_under("kernels"):
        bad = {m for m in imported_modules(path)
               if m.startswith(("gramdist.engine", "gramdist.cli", "gramdist.evaluation", "gramdist.stream"))}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_kernel_families_do_not_import_each_other():
    families = [p.name for p in (PACKAGE / "kernels").iterdir() if (p / "__init__.py").is_file()]
    for family in families:
        for path in modules_under(f"kernels/{family}"):
            others = {m for m in imported_modules(path) for f in families
                      if f != family and m.startswith(f"gramdist.kernels.{f}")}
            assert not others, f"{path.relative_to(PACKAGE)} imports {sorted(others)}"


def test_only_the_store_modules_import_zarr():
    allowed = {"engine/store.py", "engine/feature_store.py"}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in allowed or rel == "engine/tasks.py":  # tasks only pre-imports the codecs in warm_up
            continue
        assert "zarr" not in {m.split(".")[0] for m in imported_modules(path)}, f"{rel} imports zarr"


def test_engine_never_names_a_kernel():
    from gramdist.kernels import KERNELS

    for path in modules_under("engine"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & set(KERNELS), f"{path.relative_to(PACKAGE)} compares with kernel names"
        assert "gramdist.kernels." not in path.read_text().replace("gramdist.kernels.base", "")


def test_run_job_takes_only_what_a_user_sets():
    params = set(inspect.signature(runner.run_job).parameters)
    # job_id: the id of a detached job (gramdist submit), which its store lock carries
    assert params == {"job", "out", "scheduler", "client", "overwrite", "progress", "log", "job_id"}
