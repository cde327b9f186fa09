"""Every kernel that needs numerical node attributes refuses graphs without them in one way:
a ``JobError`` naming the kernel and where attributes come from, for a job file and for a
Python caller alike (``kernels.base.node_attributes``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gramdist.datasets import load_dataset
from gramdist.errors import JobError
from gramdist.kernels import make_kernel
from gramdist.kernels.base import NODE_ATTRIBUTES_HINT

#: (kernel, parameters) that read node attributes
NEEDS_ATTRIBUTES = [
    ("propagation_attr", {}),
    ("graphhopper", {"attributes": "linear"}),
    ("graphhopper", {"attributes": "gaussian"}),
    ("sp_attr", {}),
    ("hgk_wl", {}),
    ("hgk_sp", {}),
    ("wwl", {"node_features": "continuous"}),
    ("mlg", {"node_features": "attributes"}),
    ("csm", {"node_attributes": True}),
]


def _fit_and_embed(kernel, graphs) -> None:
    state = kernel.fit(graphs, seed=0)
    kernel.embed(graphs, state)


@pytest.mark.parametrize(("name", "params"), NEEDS_ATTRIBUTES, ids=lambda p: str(p))
def test_refusal_names_both_sources(name, params):
    graphs = load_dataset({"name": "MUTAG", "limit": 8})  # labels, no node attributes
    assert graphs.node_attrs is None
    with pytest.raises(JobError) as err:
        _fit_and_embed(make_kernel(name, **params), graphs)
    msg = str(err.value)
    assert msg.startswith(f"kernel {name}: ")
    assert "numerical node attributes, but the graphs have none" in msg
    assert NODE_ATTRIBUTES_HINT in msg


def test_fitted_width_is_checked():
    graphs = load_dataset({"name": "ENZYMES", "limit": 6})  # 18 attribute columns
    kernel = make_kernel("sp_attr")
    state = kernel.fit(graphs, seed=0)
    narrower = load_dataset({"name": "ENZYMES", "limit": 6, "node_attributes": [0, 1]})
    with pytest.raises(JobError, match="these graphs have 2 node attributes, the kernel was fitted with 18"):
        kernel.embed(narrower, state)


def test_cli_one_line(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("dataset: {name: MUTAG, limit: 8}\nkernel: {name: hgk_wl}\n")
    run = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", str(job), "--out", str(tmp_path / "s")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2
    errors = [line for line in run.stderr.splitlines() if line.startswith("gramdist: error:")]
    assert len(errors) == 1 and "Traceback" not in run.stderr
    assert errors[0].startswith("gramdist: error: kernel hgk_wl: hashes numerical node attributes")
    assert "dataset.node_attributes" in errors[0] and "from_networkx" in errors[0]
    assert errors[0].endswith("; for labels only, use wl or sp")
