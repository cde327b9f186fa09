"""Which inputs are molecules: SMILES by syntax, molecule files by suffix; TU dataset names and
folders never (no RDKit needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gramdist.datasets.molecules import is_molecule_input, looks_like_smiles

TU_NAMES = ["MUTAG", "NCI1", "NCI109", "PTC_MR", "PTC_FM", "ENZYMES", "PROTEINS", "DD", "COX2", "BZR", "DHFR",
            "AIDS", "IMDB-BINARY", "REDDIT-BINARY", "COLLAB", "Mutagenicity", "SN12C", "P388", "PC-3",
            "NCI-H23", "SF-295", "OHSU", "KKI", "Peking_1", "MSRC_9", "Yeast", "QM9", "ZINC_full"]


@pytest.mark.parametrize("smiles", ["C", "CCO", "c1ccccc1", "[Na+].[Cl-]", "F/C=C/F", "C[C@@H](O)C(=O)O",
                                    "Clc1ccc(Br)cc1", "C1CC2CCC1CC2", "C%10CCCCC%10", "[2H]OC", "*C"])
def test_smiles_are_recognised(smiles):
    assert looks_like_smiles(smiles) and is_molecule_input(smiles) and is_molecule_input([smiles, "CC"])


@pytest.mark.parametrize("text", [*TU_NAMES, "", "C C", "C1CC", "C(C", "CC)", "1CC1", "../shared/datasets/MUTAG",
                                  "/data/NCI1", "Hg", "Na"])
def test_dataset_names_and_folders_are_not_molecules(text):
    assert not looks_like_smiles(text) and not is_molecule_input(text) and not is_molecule_input([text])


def test_existing_folders_and_other_inputs_are_not_molecules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "CCO").mkdir()  # a folder named like a SMILES is a folder
    assert not is_molecule_input("CCO") and not is_molecule_input(tmp_path)
    for x in ([], (), None, 3, [1, 2], [{"a": 1}], b"CCO", np.zeros(3)):
        assert not is_molecule_input(x)
    for path in ("a.sdf", "b.SDF.gz", "c.csv", "d.smi", Path("x/y.csv")):
        assert is_molecule_input(path)
    assert is_molecule_input(np.array(["CC(C)O", "CC"], dtype=object))




def test_dataset_names_on_disk_are_not_molecules():
    root = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
    names = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    assert all(not is_molecule_input(n) for n in names)
