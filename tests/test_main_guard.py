"""A script without ``if __name__ == "__main__":`` never gets a LocalCluster whose workers would
run it again (``gramdist.engine.main_guard``): under ``in_process="auto"`` it runs in process with
a warning naming its line, asked for explicitly it gets one readable error. Before, such a
script died with a few hundred lines of tracebacks ending in "Nanny failed to start"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gramdist import GramTransformer
from gramdist.datasets import load_dataset
from gramdist.engine.main_guard import _guarded_lines

# MUTAG made to look large: "auto" would start the shared LocalCluster for it
PRELUDE = """\
import numpy as np
import gramdist.engine.placement as placement
from gramdist import GramTransformer
from gramdist.datasets import load_dataset

placement.IN_PROCESS_MAX_ENTRIES = 0
"""


def _run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    return subprocess.run([sys.executable, *args, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)


@pytest.fixture(scope="module")
def mutag_sum() -> float:
    return float(np.sum(GramTransformer(kernel="wl", in_process=True).fit_transform(load_dataset("MUTAG"))))


def test_an_unguarded_script_runs_in_process_with_a_warning_at_its_line(tmp_path, mutag_sum):
    done = _run(tmp_path, """\
        k = GramTransformer(kernel="wl").fit_transform(load_dataset("MUTAG"))
        print(float(np.sum(k)))
        k = GramTransformer(kernel="wl").fit_transform(load_dataset("MUTAG"))
    """)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[0]) == mutag_sum
    assert "Nanny" not in done.stderr and "Traceback" not in done.stderr
    warned = [line for line in done.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1  # once per script
    assert warned[0].startswith(f"{tmp_path / 'job.py'}:7: RuntimeWarning: gramdist runs this computation in this process")
    assert 'if __name__ == "__main__":' in warned[0]


def test_a_guarded_script_gets_its_local_cluster(tmp_path, mutag_sum):
    done = _run(tmp_path, """\
        from gramdist.engine import cluster

        def main():
            k = GramTransformer(kernel="wl").fit_transform(load_dataset("MUTAG"))
            print(float(np.sum(k)), cluster._shared.get("client") is not None)

        if "__main__" == __name__:  # either way round
            main()
    """)
    assert done.returncode == 0, done.stderr
    total, on_cluster = done.stdout.split()
    assert float(total) == mutag_sum and on_cluster == "True"
    assert "RuntimeWarning" not in done.stderr


def test_an_unguarded_script_that_asks_for_workers_gets_one_readable_error(tmp_path):
    done = _run(tmp_path, """\
        GramTransformer(kernel="wl", in_process=False).fit_transform(load_dataset("MUTAG"))
    """)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gramdist.errors.JobError: starting Dask workers would run ")
    assert "in_process=True" in last and "Nanny" not in done.stderr


def test_code_without_a_script_is_not_judged(tmp_path):
    probe = "from gramdist.engine.main_guard import unguarded_script; print(unguarded_script())"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path).stdout.strip() == "None"
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(probe + "\n")  # `python -m pkg`: multiprocessing imports no __main__ again
    assert subprocess.run([sys.executable, "-m", "pkg"], capture_output=True, text=True,
                          cwd=tmp_path).stdout.strip() == "None"
    (tmp_path / "script.py").write_text(probe + "\n")
    assert subprocess.run([sys.executable, "script.py"], capture_output=True, text=True,
                          cwd=tmp_path).stdout.strip().endswith("script.py")


def test_guarded_lines(tmp_path):
    source = tmp_path / "s.py"
    source.write_text(textwrap.dedent("""\
        x = 1
        if __name__ == "__main__":
            a = 2
            b = 3
        if __name__ != "__main__":
            c = 4
        if name == "__main__":
            d = 5
    """))
    assert _guarded_lines(str(source), source.stat().st_mtime_ns) == ((3, 4),)
