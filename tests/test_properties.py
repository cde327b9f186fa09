"""Property-based tests of the readers (issue #29): generated job files, CSV/SMILES/SDF files and
networkx graphs are fed to the readers, which must either return a consistent batch (or job)
or raise one of gramdist's own errors — never a ``KeyError``, ``TypeError``, ``UnicodeError``
or an RDKit exception escaping as a traceback. (Generated TU folders: ``test_datasets_tu.py``.)

``GRAMDIST_FUZZ_EXAMPLES`` sets the number of examples (CI: the default below)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramdist.errors import GramdistError
from gramdist.graphs import GraphBatch

EXAMPLES = int(os.environ.get("GRAMDIST_FUZZ_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                                 HealthCheck.too_slow])


def consistent(batch: GraphBatch) -> None:
    """What every batch a reader returns satisfies (the checks of the kernels' entry)."""
    batch.validate("a reader's batch")
    assert batch.n_graphs >= 1 and batch.node_offsets[-1] == batch.n_nodes
    for arr, size in ((batch.node_labels, batch.n_nodes), (batch.node_attrs, batch.n_nodes),
                      (batch.edge_labels, batch.n_edges), (batch.edge_attrs, batch.n_edges),
                      (batch.y, batch.n_graphs)):
        assert arr is None or len(arr) == size
    for arr in (batch.node_attrs, batch.edge_attrs):
        assert arr is None or np.all(np.isfinite(arr))


def only_ours(call, *args, **kwargs):
    """``call(...)``'s result, or None when it raised a gramdist error (with a one-line message)."""
    try:
        return call(*args, **kwargs)
    except GramdistError as exc:
        assert str(exc) and "\n" not in str(exc).strip(), repr(str(exc))
        return None


# ---------------------------------------------------------------------------- job files
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=12),
                     st.floats(allow_nan=True, allow_infinity=True))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                       max_leaves=6)
_KEYS = st.sampled_from(["dataset", "kernel", "gram", "fit", "cluster", "test_dataset", "grid", "name", "features",
                         "seed", "nystroem", "other"])
_SUBKEYS = st.sampled_from(["name", "h", "path", "synthetic", "tile_size", "normalize", "dtype", "sample_size",
                            "seed", "n_workers", "limit", "skip", "smiles", "package", "scheduler", "keep_embeddings",
                            "checkpoint_seconds", "compression_level", "max_tiles_in_flight", "jobqueue", "x"])


@st.composite
def job_documents(draw):
    """A job mapping that starts valid and is then bent: keys dropped, added, values replaced."""
    doc = {"dataset": {"synthetic": {"n_graphs": 6, "seed": 1}}, "kernel": {"name": "wl", "h": 2},
           "gram": {"tile_size": 4}}
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["drop", "set", "set_sub", "replace_section"]))
        key = draw(_KEYS)
        if op == "drop":
            doc.pop(key, None)
        elif op == "set":
            doc[key] = draw(_VALUES)
        elif op == "replace_section":
            doc[key] = draw(st.dictionaries(_SUBKEYS, _VALUES, max_size=3))
        elif isinstance(doc.get(key), dict):
            doc[key][draw(_SUBKEYS)] = draw(_VALUES)
    return doc


@SETTINGS
@given(doc=job_documents())
def test_generated_job_files_load_or_fail_in_one_line(tmp_path_factory, doc):
    from gramdist.jobs import load_job

    path = tmp_path_factory.mktemp("job") / "job.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    job = only_ours(load_job, path)
    if job is not None:  # a job that loads names a kernel the registry knows
        from gramdist.engine.plan import kernel_from_spec

        only_ours(kernel_from_spec, job.kernel)


@SETTINGS
@given(text=st.text(alphabet=st.sampled_from([*"dataset: kernel{}[],\n -#&*!|>'\"%@`\t0129.eE", "\x00", "é"]),
                    max_size=80))
def test_arbitrary_yaml_text_is_one_line(tmp_path_factory, text):
    from gramdist.jobs import load_job

    path = tmp_path_factory.mktemp("job") / "job.yaml"
    path.write_text(text)
    only_ours(load_job, path)


@SETTINGS
@given(data=st.binary(max_size=64))
def test_arbitrary_bytes_as_a_job_file_are_one_line(tmp_path_factory, data):
    from gramdist.jobs import load_job

    path = tmp_path_factory.mktemp("job") / "job.yaml"
    path.write_bytes(data)
    only_ours(load_job, path)


# ---------------------------------------------------------------------------- molecules
rdkit = pytest.importorskip("rdkit")
_SMILES_ATOMS = ["C", "c", "N", "n", "O", "o", "S", "Cl", "Br", "F", "[Na+]", "[O-]", "[nH]", "1", "2", "(", ")",
                 "=", "#", ".", "/", "\\", "@", "[C@@H]", "X", "%", "[", "]", "*"]
_SMILES = st.lists(st.sampled_from(_SMILES_ATOMS), min_size=0, max_size=14).map("".join)
_TARGET = st.one_of(st.integers(-3, 3).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["", "NA", "nan", "x", "1e400", " 2 "]))
_FIELD = st.text(alphabet=st.sampled_from(list("ab,\"\n\r ;\t")), max_size=6)


def _load(spec):
    from gramdist.datasets import load_dataset

    batch = only_ours(load_dataset, spec)
    if batch is not None:
        consistent(batch)
    return batch


@SETTINGS
@given(rows=st.lists(st.tuples(_SMILES, _TARGET, _FIELD), min_size=0, max_size=8), header_ok=st.booleans(),
       bom=st.booleans(), crlf=st.booleans())
def test_generated_csv_files_read_or_fail_in_one_line(tmp_path_factory, rows, header_ok, bom, crlf):
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n" if crlf else "\n")
    w.writerow(["smiles", "y", "note"] if header_ok else ["smi", "y"])
    for row in rows:
        w.writerow(row)
    path = tmp_path_factory.mktemp("csv") / "mols.csv"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode())
    batch = _load({"smiles": str(path), "target": "y"})
    if batch is not None:
        assert batch.y is not None and np.all(np.isfinite(batch.y.astype(float)))


@SETTINGS
@given(lines=st.lists(st.tuples(_SMILES, st.text(max_size=6)), min_size=0, max_size=8),
       junk=st.binary(max_size=6), at=st.integers(0, 200), gz=st.sampled_from([None, "whole", "cut"]))
def test_generated_smi_files_read_or_fail_in_one_line(tmp_path_factory, lines, junk, at, gz):
    import gzip

    text = "".join(f"{s} {name}\n" for s, name in lines).encode()
    data = text[:at] + junk + text[at:]
    path = tmp_path_factory.mktemp("smi") / ("mols.smi.gz" if gz else "mols.smi")
    if gz:
        packed = gzip.compress(data)
        data = packed if gz == "whole" else packed[: max(1, len(packed) * at // 200)]
    path.write_bytes(data)
    _load({"smiles": str(path)})


def _sdf_text() -> bytes:
    from rdkit import Chem

    out = []
    for i, smi in enumerate(["CCO", "c1ccccc1O", "[Na+].[Cl-]", "CC(=O)N"]):
        mol = Chem.MolFromSmiles(smi)
        mol.SetProp("y", str(i % 2))
        out.append(Chem.MolToMolBlock(mol) + f">  <y>\n{i % 2}\n\n$$$$\n")
    return "".join(out).encode()


SDF = None


@SETTINGS
@given(edits=st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace", "truncate"]), st.floats(0, 1),
                                st.binary(min_size=1, max_size=4)), min_size=1, max_size=3),
       gz=st.booleans())
def test_corrupted_sdf_files_read_or_fail_in_one_line(tmp_path_factory, edits, gz):
    import gzip

    global SDF
    SDF = SDF or _sdf_text()
    data = bytearray(SDF)
    for op, where, chunk in edits:
        pos = int(where * max(len(data) - 1, 0))
        if op == "insert":
            data[pos:pos] = chunk
        elif op == "delete":
            del data[pos:pos + len(chunk)]
        elif op == "replace":
            data[pos:pos + len(chunk)] = chunk
        else:
            del data[pos:]
    path = tmp_path_factory.mktemp("sdf") / ("mols.sdf.gz" if gz else "mols.sdf")
    path.write_bytes(gzip.compress(bytes(data)) if gz else bytes(data))
    _load({"sdf": str(path), "target": "y"})


# ---------------------------------------------------------------------------- networkx
nx = pytest.importorskip("networkx")
_LABELS = st.one_of(st.integers(-(2**65), 2**65), st.text(max_size=3), st.booleans(), st.none(),
                    st.floats(allow_nan=True, allow_infinity=True), st.tuples(st.integers(0, 3)))
_ATTRS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=0, max_size=3),
                   st.text(max_size=2), st.none())


@st.composite
def nx_graphs(draw):
    g = nx.Graph() if draw(st.booleans()) else nx.DiGraph()
    n = draw(st.integers(0, 6))
    for v in range(n):
        data = {}
        if draw(st.integers(0, 9)) > 0:
            data["label"] = draw(_LABELS)
        if draw(st.booleans()):
            data["attr"] = draw(_ATTRS)
        g.add_node(draw(st.one_of(st.just(v), st.text(min_size=1, max_size=2))), **data)
    nodes = list(g.nodes)
    for _ in range(draw(st.integers(0, 8))) if nodes else ():
        u, v = draw(st.sampled_from(nodes)), draw(st.sampled_from(nodes))
        g.add_edge(u, v, **({"w": draw(_ATTRS)} if draw(st.booleans()) else {}))
    if draw(st.booleans()):
        g.graph["y"] = draw(_LABELS)
    return g


@SETTINGS
@given(graphs=st.lists(nx_graphs(), min_size=0, max_size=4),
       keys=st.tuples(st.sampled_from(["label", None, "missing"]), st.sampled_from(["attr", None]),
                      st.sampled_from(["w", None]), st.sampled_from(["y", None])))
def test_generated_networkx_graphs_convert_or_fail_in_one_line(graphs, keys):
    from gramdist.datasets.nx import from_networkx

    node_label, node_attr, edge_attr, y = keys
    batch = only_ours(from_networkx, graphs, node_label=node_label, node_attr=node_attr, edge_attr=edge_attr, y=y)
    if batch is None:
        return
    consistent(batch)
    assert batch.n_graphs == len(graphs)
    assert batch.n_nodes == sum(g.number_of_nodes() for g in graphs)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None)
@given(graphs=st.lists(nx_graphs(), min_size=1, max_size=3), kernel=st.sampled_from(["wl", "sp", "vertex_histogram"]))
def test_generated_networkx_graphs_through_compute_gram(graphs, kernel):
    """The Python API entry: graphs given as networkx reach a Gram or one gramdist error."""
    import gramdist

    K = only_ours(gramdist.compute_gram, graphs, kernel=kernel)
    if K is not None:
        K = np.asarray(K)
        assert K.shape == (len(graphs), len(graphs)) and np.allclose(K, K.T)
        assert all(math.isfinite(x) for x in K.ravel())


def test_a_single_line_message_is_required_by_the_helper():
    """The helper itself fails on what it must reject (a multi-line message, a foreign error)."""
    with pytest.raises(AssertionError):
        only_ours(lambda: (_ for _ in ()).throw(GramdistError("two\nlines")))
    with pytest.raises(KeyError):
        only_ours(lambda: {}["x"])
    assert only_ours(Path, "x") == Path("x")
