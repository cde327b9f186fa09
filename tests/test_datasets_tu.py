"""Tests of the TU-format reader: hand-worked parsing, one test per bad input, fuzzing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import dataset_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramdist.datasets.tu import parse_numeric, read_tu
from gramdist.errors import DatasetError

# Three graphs: a path 1-2-3; two isolated nodes 4, 5 (no edges); a triangle 6-7-8 with a
# self-loop on 8. Every edge is listed in both directions as TU does; the self-loop once.
TOY = {
    "A": "1, 2\n2, 1\n2, 3\n3, 2\n6, 7\n7, 6\n7, 8\n8, 7\n8, 6\n6, 8\n8, 8\n",
    "graph_indicator": "1\n1\n1\n2\n2\n3\n3\n3\n",
    "graph_labels": "1\n-1\n1\n",
    "node_labels": "0\n1\n0\n2\n2\n0\n1\n1\n",
    "node_attributes": "0.5, 1\n1.5, 2\n2.5, 3\n3.5, 4\n4.5, 5\n5.5, 6\n6.5, 7\n7.5, 8\n",
    "edge_labels": "10\n10\n11\n11\n12\n12\n13\n13\n14\n14\n15\n",
    "edge_attributes": "0.1\n0.1\n0.2\n0.2\n0.3\n0.3\n0.4\n0.4\n0.5\n0.5\n0.6\n",
}


def write_toy(root: Path, name: str = "TOY", **override: str | bytes | None) -> Path:
    """Write the toy dataset (with files replaced, or removed when given None) and return its folder."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    files = {**TOY, **override}
    for part, text in files.items():
        if text is None:
            continue
        data = text if isinstance(text, bytes) else text.encode()
        (folder / f"{name}_{part}.txt").write_bytes(data)
    return folder


def with_line(part: str, lineno: int, new: str) -> dict[str, str]:
    """Override that replaces 1-based line ``lineno`` of TOY[part]."""
    lines = TOY[part].splitlines()
    lines[lineno - 1] = new
    return {part: "\n".join(lines) + "\n"}


def raises(folder: Path, *patterns: str) -> str:
    with pytest.raises(DatasetError) as info:
        read_tu(folder)
    msg = str(info.value)
    for p in patterns:
        assert re.search(p, msg), f"{p!r} not in {msg!r}"
    return msg


# --------------------------------------------------------------------------- valid input
def test_toy_hand_worked(tmp_path):
    b = read_tu(write_toy(tmp_path))
    assert b.name == "TOY" and b.n_graphs == 3 and b.n_nodes == 8
    np.testing.assert_array_equal(b.node_offsets, [0, 3, 5, 8])
    np.testing.assert_array_equal(b.edge_offsets, [0, 2, 2, 6])
    # local endpoints, u <= v, sorted by (u, v) within each graph; the self-loop kept once
    np.testing.assert_array_equal(b.edges, [[0, 1], [1, 2], [0, 1], [0, 2], [1, 2], [2, 2]])
    # label/attributes of the first line listing each edge
    np.testing.assert_array_equal(b.edge_labels, [10, 11, 12, 14, 13, 15])
    np.testing.assert_allclose(b.edge_attrs[:, 0], [0.1, 0.2, 0.3, 0.5, 0.4, 0.6])
    np.testing.assert_array_equal(b.node_labels, [0, 1, 0, 2, 2, 0, 1, 1])
    assert b.node_attrs.shape == (8, 2)
    np.testing.assert_allclose(b.node_attrs[:, 0], np.arange(8) + 0.5)
    np.testing.assert_array_equal(b.y, [1, -1, 1])
    np.testing.assert_array_equal(b.graph_ids, [1, 2, 3])
    assert b.y.dtype == np.int64 and b.node_labels.dtype == np.int64
    assert b.adjacency().nnz == 2 * 2 + 2 * 3 + 1


def test_optional_files_absent(tmp_path):
    folder = write_toy(tmp_path, node_labels=None, node_attributes=None, edge_labels=None,
                       edge_attributes=None)
    b = read_tu(folder)
    assert b.node_labels is None and b.node_attrs is None
    assert b.edge_labels is None and b.edge_attrs is None
    assert b.n_edges == 6


def test_duplicates_and_one_direction(tmp_path):
    # 2-1 listed first (its label wins), 1-2 duplicated, 2-3 only in one direction
    a = "2, 1\n1, 2\n1, 2\n3, 2\n"
    folder = write_toy(tmp_path, A=a, edge_labels="7\n8\n9\n5\n", edge_attributes=None,
                       graph_indicator="1\n1\n1\n1\n1\n1\n1\n2\n", graph_labels="0\n1\n")
    b = read_tu(folder)
    np.testing.assert_array_equal(b.edges, [[0, 1], [1, 2]])
    np.testing.assert_array_equal(b.edge_labels, [7, 5])
    np.testing.assert_array_equal(b.edge_offsets, [0, 2, 2])


def test_edges_out_of_graph_order(tmp_path):
    lines = TOY["A"].splitlines()
    perm = [8, 0, 4, 2, 10, 1, 6, 3, 5, 7, 9]
    labels = TOY["edge_labels"].splitlines()
    folder = write_toy(tmp_path, A="\n".join(lines[i] for i in perm),
                       edge_labels="\n".join(labels[i] for i in perm), edge_attributes=None)
    b, ref = read_tu(folder), read_tu(write_toy(tmp_path / "ref", edge_attributes=None))
    np.testing.assert_array_equal(b.edges, ref.edges)
    np.testing.assert_array_equal(b.edge_offsets, ref.edge_offsets)
    # first occurrence now differs for 6-8 (8, 6 listed first: label 14) and 7-8 (label 13)
    np.testing.assert_array_equal(b.edge_labels, [10, 11, 12, 14, 13, 15])


def test_crlf_bom_and_trailing_blank_lines(tmp_path):
    crlf = {k: v.replace("\n", "\r\n") for k, v in TOY.items()}
    crlf["A"] = "\ufeff" + crlf["A"] + "\r\n\r\n"
    crlf["node_attributes"] = "\n".join("  " + ln for ln in TOY["node_attributes"].splitlines()) + "\n\n"
    b = read_tu(write_toy(tmp_path, **crlf))
    ref = read_tu(write_toy(tmp_path / "ref"))
    assert b.checksum() == ref.checksum()


def test_name_argument_and_inference(tmp_path):
    folder = write_toy(tmp_path, name="TOY")
    renamed = folder.rename(tmp_path / "toy-copy")
    assert read_tu(renamed).name == "TOY"
    assert read_tu(renamed, name="TOY").n_graphs == 3


def test_all_graphs_without_edges(tmp_path):
    folder = write_toy(tmp_path, A="", edge_labels="", edge_attributes="")
    b = read_tu(folder)
    assert b.n_edges == 0 and b.n_graphs == 3
    assert b.edges.shape == (0, 2) and b.edge_attrs is None
    assert len(b.edge_labels) == 0


# --------------------------------------------------------------------------- bad input
def test_missing_folder(tmp_path):
    raises(tmp_path / "NOPE", "NOPE", "folder not found")


@pytest.mark.parametrize("part", ["A", "graph_indicator", "graph_labels"])
def test_missing_required_file(tmp_path, part):
    raises(write_toy(tmp_path, **{part: None}), f"TOY_{part}.txt", "file not found")


def test_non_numeric_token(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_labels", 4, "C")),
           r"TOY_node_labels\.txt line 4", "non-numeric token 'C'")


def test_non_numeric_attribute(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_attributes", 2, "1.5, abc")),
           r"TOY_node_attributes\.txt line 2", "non-numeric token 'abc'")


def test_float_in_integer_file(tmp_path):
    raises(write_toy(tmp_path, **with_line("graph_labels", 3, "1.0")),
           r"TOY_graph_labels\.txt line 3", "expected an integer, found '1.0'")


def test_node_id_out_of_range(tmp_path):
    raises(write_toy(tmp_path, **with_line("A", 5, "6, 9")),
           r"TOY_A\.txt line 5", r"node id 9 out of range 1\.\.8")


def test_zero_node_id(tmp_path):
    raises(write_toy(tmp_path, **with_line("A", 3, "0, 3")), r"TOY_A\.txt line 3", "node id 0 out of range")


def test_negative_node_id(tmp_path):
    raises(write_toy(tmp_path, **with_line("A", 4, "3, -2")), r"TOY_A\.txt line 4", "node id -2 out of range")


def test_edge_joining_two_graphs(tmp_path):
    raises(write_toy(tmp_path, **with_line("A", 2, "3, 4")),
           r"TOY_A\.txt line 2", r"edge \(3, 4\) joins graph 1 and graph 2")


def test_graph_ids_skip(tmp_path):
    raises(write_toy(tmp_path, graph_indicator="1\n1\n1\n3\n3\n4\n4\n4\n", graph_labels="0\n0\n0\n0\n"),
           r"TOY_graph_indicator\.txt line 4", "graph id 3 after 1", "contiguous")


def test_graph_ids_decrease(tmp_path):
    raises(write_toy(tmp_path, graph_indicator="1\n1\n2\n1\n2\n3\n3\n3\n"),
           r"TOY_graph_indicator\.txt line 4", "graph id 1 after 2", "non-decreasing")


def test_graph_ids_not_starting_at_one(tmp_path):
    raises(write_toy(tmp_path, graph_indicator="2\n2\n2\n3\n3\n4\n4\n4\n"),
           r"TOY_graph_indicator\.txt line 1", "ids must start at 1")


def test_zero_graph_id(tmp_path):
    raises(write_toy(tmp_path, graph_indicator="0\n1\n1\n2\n2\n3\n3\n3\n"),
           r"TOY_graph_indicator\.txt line 1", "graph id 0")


def test_node_labels_fewer_lines(tmp_path):
    raises(write_toy(tmp_path, node_labels="0\n1\n0\n2\n2\n0\n1\n"),
           r"TOY_node_labels\.txt line 8", "file ends after 7 lines, expected 8", "one per node")


def test_node_labels_more_lines(tmp_path):
    raises(write_toy(tmp_path, node_labels=TOY["node_labels"] + "3\n"),
           r"TOY_node_labels\.txt line 9", "9 lines, expected 8")


def test_node_attributes_line_count(tmp_path):
    raises(write_toy(tmp_path, node_attributes=TOY["node_attributes"] + "1, 2\n"),
           r"TOY_node_attributes\.txt line 9", "expected 8")


def test_edge_labels_line_count(tmp_path):
    raises(write_toy(tmp_path, edge_labels="1\n" * 10),
           r"TOY_edge_labels\.txt line 11", "expected 11", r"TOY_A\.txt")


def test_edge_attributes_line_count(tmp_path):
    raises(write_toy(tmp_path, edge_attributes="1.0\n" * 12),
           r"TOY_edge_attributes\.txt line 12", "12 lines, expected 11")


def test_graph_labels_line_count(tmp_path):
    raises(write_toy(tmp_path, graph_labels="1\n-1\n"),
           r"TOY_graph_labels\.txt line 3", "expected 3", "one per graph")


def test_nan_attribute(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_attributes", 6, "nan, 1")),
           r"TOY_node_attributes\.txt line 6", "attribute nan in column 1 is not finite")


def test_inf_edge_attribute(tmp_path):
    raises(write_toy(tmp_path, **with_line("edge_attributes", 3, "-inf")),
           r"TOY_edge_attributes\.txt line 3", "-inf", "not finite")


def test_overflowing_float_attribute(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_attributes", 1, "1e999, 1")),
           r"TOY_node_attributes\.txt line 1", "not finite")


def test_empty_dataset(tmp_path):
    raises(write_toy(tmp_path, graph_indicator="", graph_labels="", A="", node_labels="",
                     node_attributes="", edge_labels="", edge_attributes=""),
           r"TOY_graph_indicator\.txt", "empty dataset")


@pytest.mark.parametrize("line", ["2 3", "2\t3", "2;3", "2|3"])
def test_wrong_delimiter(tmp_path, line):
    raises(write_toy(tmp_path, **with_line("A", 3, line)), r"TOY_A\.txt line 3", "wrong delimiter")


def test_too_many_values(tmp_path):
    raises(write_toy(tmp_path, **with_line("A", 7, "7, 8, 9")),
           r"TOY_A\.txt line 7", "expected 2 comma-separated values, found 3")


def test_attribute_columns_differ(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_attributes", 5, "1.0")),
           r"TOY_node_attributes\.txt line 5", "expected 2 comma-separated values, found 1")


def test_empty_value(tmp_path):
    raises(write_toy(tmp_path, **with_line("A", 1, "1, ")), r"TOY_A\.txt line 1", "empty value in column 2")


def test_blank_line_inside(tmp_path):
    raises(write_toy(tmp_path, graph_labels="1\n\n-1\n1\n"), r"TOY_graph_labels\.txt line 2", "blank line")


def test_split_sign(tmp_path):
    # np.fromstring alone would read "- 5" as -5; the structural check must not
    raises(write_toy(tmp_path, **with_line("graph_labels", 2, "- 1")), r"TOY_graph_labels\.txt line 2")


def test_integer_overflow(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_labels", 2, "99999999999999999999")),
           r"TOY_node_labels\.txt line 2", "out of the int64 range")


def test_non_utf8(tmp_path):
    data = TOY["node_labels"].encode().replace(b"2\n2\n", b"2\n\xff\xfe\n")
    raises(write_toy(tmp_path, node_labels=data), r"TOY_node_labels\.txt line 5", "not valid UTF-8")


def test_non_ascii_utf8_token(tmp_path):
    raises(write_toy(tmp_path, **with_line("graph_labels", 1, "１")),  # full-width digit one
           r"TOY_graph_labels\.txt line 1", "non-numeric token")


def test_multi_column_node_labels(tmp_path):
    raises(write_toy(tmp_path, **with_line("node_labels", 1, "0, 1")),
           r"TOY_node_labels\.txt line 1", "expected 1 comma-separated value,")


# --------------------------------------------------------------------------- parser vs reference
@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(-(2**62), 2**62), min_size=3, max_size=3), min_size=1, max_size=20),
    pads=st.lists(st.sampled_from(["", " ", "  ", "\t", " \t"]), min_size=4, max_size=4),
    crlf=st.booleans(),
)
def test_parse_numeric_matches_reference(rows, pads, crlf):
    a, b, c, d = pads
    nl = "\r\n" if crlf else "\n"
    text = nl.join(f"{a}{x}{b},{c}{y}{d},{z}" for x, y, z in rows)
    got = parse_numeric(text.encode(), "f.txt", "int", 3)
    np.testing.assert_array_equal(got, np.array(rows, dtype=np.int64))


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=2,
                              max_size=2), min_size=1, max_size=20))
def test_parse_numeric_floats_roundtrip(rows):
    text = "\n".join(", ".join(repr(v) for v in r) for r in rows)
    got = parse_numeric(text.encode(), "f.txt", "float", None)
    np.testing.assert_array_equal(got, np.array(rows, dtype=np.float64))


def _parsed_or_error(data: bytes, kind: str, ncols: int | None, piece_bytes: int) -> object:
    """parse_numeric's array or its error message, large files cut into pieces of
    ``piece_bytes`` (three threads)."""
    from gramdist.datasets import tu

    saved = tu.PIECE_BYTES, tu.available_cpus
    tu.PIECE_BYTES, tu.available_cpus = piece_bytes, lambda: 3
    try:
        return parse_numeric(data, "f.txt", kind, ncols).tolist()
    except DatasetError as exc:
        return str(exc)
    finally:
        tu.PIECE_BYTES, tu.available_cpus = saved


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.lists(st.integers(-999, 99999), min_size=1, max_size=3), min_size=1, max_size=30),
    noise=st.lists(st.tuples(st.integers(0, 400), st.sampled_from(list(b"0,\n x;.\r"))), max_size=3),
    ncols=st.sampled_from([None, 1, 2, 3]),
)
def test_parse_in_pieces_equals_one_piece(lines, noise, ncols):
    """A file parsed in pieces of whole lines, one thread each, gives what one piece gives: the
    same values, or the same error naming the same line (whatever piece holds it)."""
    data = bytearray("\n".join(", ".join(map(str, r)) for r in lines).encode())
    for at, byte in noise:
        data[at % len(data)] = byte
    data = bytes(data)
    whole = _parsed_or_error(data, "int", ncols, 1 << 40)
    assert _parsed_or_error(data, "int", ncols, 8) == whole


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.integers(0, 40), max_size=60), big=st.booleans())
def test_first_of_each_is_numpys_unique_return_index(keys, big):
    """Edges deduplicated through one unstable sort of (key, line) keep what np.unique keeps:
    the first line of each edge, edges in key order; a bound too large for the packed key
    takes np.unique itself."""
    from gramdist.datasets.tu import _first_of_each

    k = np.asarray(keys, dtype=np.int64)
    bound = 2**62 if big else 41
    assert _first_of_each(k, bound).tolist() == np.unique(k, return_index=True)[1].tolist()


# --------------------------------------------------------------------------- fuzzing
FUZZ_EXAMPLES = int(os.environ.get("GRAMDIST_FUZZ_EXAMPLES", "300"))
_ALPHABET = list(b"0123456789,,,\n\n -+.eE\tx;\r") + [0xFF, 0xC3, 0x00]


@st.composite
def corruptions(draw):
    part = draw(st.sampled_from(sorted(TOY)))
    data = bytearray(TOY[part].encode())
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "dup_line", "drop_line", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        byte = draw(st.sampled_from(_ALPHABET))
        lines = bytes(data).split(b"\n")
        k = draw(st.integers(0, len(lines) - 1))
        if op == "insert":
            data[pos:pos] = bytes([byte])
        elif op == "delete" and data:
            del data[pos]
        elif op == "replace" and data:
            data[pos] = byte
        elif op == "dup_line":
            lines.insert(k, lines[k])
            data = bytearray(b"\n".join(lines))
        elif op == "drop_line":
            del lines[k]
            data = bytearray(b"\n".join(lines))
        elif op == "truncate":
            data = data[:pos]
    return part, bytes(data)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corruption=corruptions())
def test_fuzz_corruptions_give_batch_or_dataset_error(tmp_path_factory, corruption):
    part, data = corruption
    folder = write_toy(tmp_path_factory.mktemp("fuzz"), **{part: data})
    try:
        b = read_tu(folder)
    except DatasetError as exc:
        msg = str(exc)
        assert re.match(r"TOY_\w+\.txt", msg), msg
        # the slow pass located the problem (the generic fallback message is never needed)
        assert "malformed numeric text" not in msg, msg
        return
    # a valid result is internally consistent
    assert b.n_graphs >= 1 and b.node_offsets[-1] == b.n_nodes
    assert np.all(b.edges[:, 0] <= b.edges[:, 1])
    assert np.all(b.edges[:, 1] < np.repeat(b.nodes_per_graph, b.edges_per_graph))
    for arr, size in ((b.node_labels, b.n_nodes), (b.node_attrs, b.n_nodes),
                      (b.edge_labels, b.n_edges), (b.y, b.n_graphs)):
        assert arr is None or len(arr) == size
    assert b.node_attrs is None or np.isfinite(b.node_attrs).all()


# --------------------------------------------------------------------------- real datasets
# graphs, classes, avg nodes, max nodes, avg (undirected) edges, node labels, attr dims, edge labels
README_TABLE = {
    "MUTAG": (188, 2, 17.9, 28, 19.8, 7, 0, True),
    "PTC_MR": (344, 2, 14.3, 64, 14.7, 18, 0, True),
    "ENZYMES": (600, 6, 32.6, 126, 62.1, 3, 18, False),
    "PROTEINS": (1113, 2, 39.1, 620, 72.8, 3, 1, False),
    "DD": (1178, 2, 284.3, 5748, 715.7, 82, 0, False),
    "NCI1": (4110, 2, 29.9, 111, 32.3, 37, 0, False),
    "NCI109": (4127, 2, 29.7, 111, 32.1, 38, 0, False),
}


@pytest.mark.parametrize("name", sorted(README_TABLE))
def test_real_dataset_matches_readme(name):
    graphs, classes, avg_n, max_n, avg_e, n_labels, attr_dim, has_elab = README_TABLE[name]
    b = read_tu(dataset_dir(name))
    assert b.n_graphs == graphs and len(np.unique(b.y)) == classes
    assert round(b.nodes_per_graph.mean(), 1) == avg_n and b.nodes_per_graph.max() == max_n
    assert round(b.edges_per_graph.mean(), 1) == avg_e
    assert len(np.unique(b.node_labels)) == n_labels
    assert (0 if b.node_attrs is None else b.node_attrs.shape[1]) == attr_dim
    assert (b.edge_labels is not None) == has_elab


def test_mutag_fixture_graph(mutag):
    # first MUTAG graph from the raw files, parsed naively
    g = mutag[0]
    root = dataset_dir("MUTAG")
    ind = [int(x) for x in (root / "MUTAG_graph_indicator.txt").read_text().split()]
    n0 = ind.count(1)
    pairs = {tuple(sorted(int(t) - 1 for t in ln.split(",")))
             for ln in (root / "MUTAG_A.txt").read_text().splitlines() if int(ln.split(",")[0]) <= n0}
    assert g.n_nodes == n0
    assert set(map(tuple, g.edges.tolist())) == pairs and len(g.edges) == len(pairs)
