"""The boundaries ARCHITECTURE.md states, checked on the source (imports, names, shapes)."""

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


def outside_the_store_package() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if not p.relative_to(PACKAGE).as_posix().startswith("engine/store/")]


def test_only_the_store_package_imports_zarr():
    for path in outside_the_store_package():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "engine/tasks.py":  # tasks only pre-imports the codecs in warm_up
            continue
        assert "zarr" not in {m.split(".")[0] for m in imported_modules(path)}, f"{rel} imports zarr"


#: names only a store's layout uses (array names, and attributes no job or report shares:
#: ``keep_embeddings`` is also the job's ``gram.keep_embeddings``, so it is not listed)
#: the JSON reports of the store package (``gramdist info``), read by the command line
REPORTS = {"info", "pending", "report"}
STORE_ONLY_NAMES = {"tile_checksums", "diag_cols", "y_cols", "graph_ids_cols", "fit_indices",
                    "chunks_done", "chunk_checksums", "row_nnz", "state_complete", "diag_complete",
                    "nystroem_complete", "pending_append", "checksummed", "generation", "store_kind", "feature_kind",
                    "dataset_checksum", "test_checksum", "kernel_attrs", "commit_attrs"}


def test_nothing_outside_the_store_package_names_a_store_array_or_attribute():
    """No ``x.attrs`` of a store (only a kernel's and a Nyström basis' JSON state are called
    ``attrs`` elsewhere), and no array or attribute name used as a key."""
    from gramdist.engine.store.layout import ARRAY_NAMES, ATTRIBUTE_NAMES

    assert STORE_ONLY_NAMES <= ARRAY_NAMES | ATTRIBUTE_NAMES | {"kernel_attrs", "commit_attrs"}
    allowed_attrs_owners = {"state", "nys", "nystroem_"}
    for path in outside_the_store_package():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("kernels/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "attrs":
                owner = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", None)
                assert owner in allowed_attrs_owners, f"{rel}:{node.lineno} reads .attrs of {owner}"
            key = None
            report = isinstance(getattr(node, "value", None), ast.Name) and node.value.id in REPORTS
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and not report:
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            assert key not in STORE_ONLY_NAMES, f"{rel}:{node.lineno} names the store's {key!r}"


def test_no_store_path_arithmetic_outside_the_store_package():
    """A store may live elsewhere than a local folder: only the store package (its
    ``Location``) turns a store's place into paths: siblings, sidecar files, renames."""
    modules = [p for p in outside_the_store_package() if p.relative_to(PACKAGE).as_posix().startswith("engine/")]
    modules += [PACKAGE / name for name in ("estimator.py", "feature_transformer.py", "plotting.py")]
    modules += [PACKAGE / "evaluation" / "combine.py"]
    for path in modules:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(PACKAGE).as_posix()
        for needle in ("with_name(", "os.path.join(", "os.path.abspath(", "os.replace(", "shutil.rmtree(", "O_EXCL"):
            assert needle not in text, f"{rel} does a store's path arithmetic itself ({needle})"


def test_functions_a_reader_can_take_in_at_once():
    """No function over 8 parameters (estimators' ``__init__`` aside), none in the engine over
    60 lines."""
    long, wide = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = n.body[1:] if n.body and isinstance(n.body[0], ast.Expr) and isinstance(
                getattr(n.body[0], "value", None), ast.Constant) else n.body
            lines = (body[-1].end_lineno - body[0].lineno + 1) if body else 0
            a = n.args
            k = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) - (1 if a.args and a.args[0].arg in ("self", "cls")
                                                                         else 0)
            if lines > 60 and rel.startswith("engine/"):
                long.append(f"{rel}:{n.name} ({lines} lines)")
            if k > 8 and n.name != "__init__":
                wide.append(f"{rel}:{n.name} ({k} parameters)")
    assert not long + wide, sorted(long + wide)


def test_engine_never_names_a_kernel():
    from gramdist.kernels import KERNELS

    for path in modules_under("engine"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & set(KERNELS), f"{path.relative_to(PACKAGE)} compares with kernel names"
        assert "gramdist.kernels." not in path.read_text().replace("gramdist.kernels.base", "")


def test_run_job_takes_only_what_a_user_sets():
    params = set(inspect.signature(runner.run_job).parameters)
    # placement: where it runs; context: progress, log, and a detached job's id (its store lock carries it)
    assert params == {"job", "out", "placement", "overwrite", "context"}


def test_the_public_wrappers_take_what_the_engine_takes():
    from gramdist.engine import append

    public = inspect.signature(gramdist.append).parameters
    assert list(public) == list(inspect.signature(append.append).parameters)
    from gramdist.engine import search

    assert list(inspect.signature(gramdist.search).parameters) == list(inspect.signature(search.search).parameters)
