"""``gramdist search STORE QUERIES --top K``: the library graphs most similar to each query."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.cli.common import add_tls_arguments, apply_tls_arguments, run_context
from gramdist.errors import JobError

#: query files read as molecules (SMILES or SDF, gzipped or not)
_SMILES_FILES = (".csv", ".csv.gz", ".smi", ".smi.gz")
_SDF_FILES = (".sdf", ".sdf.gz")
COLUMNS = ("query", "query_id", "rank", "row", "id", "value")


def register(sub: Any) -> None:
    ap = sub.add_parser(
        "search", help="the graphs of a store most similar to each query graph",
        description="For each query graph, the TOP library graphs with the largest normalised kernel value, "
                    "with the store's own fitted state: from a feature store (explicit or Nystrom rows: dot "
                    "products), or from a Gram store (its graphs re-read from the sources it recorded, or --base; "
                    "the kernel itself evaluated against each query, any kernel). One task per library chunk "
                    "keeps only its TOP per query; the queries x library matrix is never formed. "
                    "Output: CSV rows query,query_id,rank,row,id,value (rank 1 is the most similar).")
    ap.add_argument("store", help="a finished feature store (`gramdist features`) or a Gram store (`gramdist run`)")
    ap.add_argument("queries", help="the query graphs: a SMILES file (.smi, .csv with a 'smiles' column), an SDF, "
                                    "a TU folder, a dataset name, a job file (its dataset), or a dataset mapping "
                                    "in YAML, e.g. '{name: NCI1, limit: 100}'")
    ap.add_argument("--top", type=int, default=10, help="graphs per query (default 10)")
    ap.add_argument("--base", help="a Gram store's graphs (as `gramdist append --base` takes them), when the sources it recorded "
                                   "cannot be re-read; checked against the store's content checksum")
    ap.add_argument("--out", help="write the CSV here (default: stdout), or a Parquet table when the name ends in "
                                  ".parquet (gramdist[parquet]); an existing file needs --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    ap.add_argument("--scheduler", help="address of an existing Dask scheduler (tcp://HOST:PORT)")
    ap.add_argument("--workers", type=int, default=None,
                    help="local worker processes (default: this process for a small library, else one per core; "
                         "0: in this process)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--json", action="store_true", help="print a JSON summary line on stdout (needs --out)")
    add_tls_arguments(ap)
    ap.set_defaults(func=cmd_search)


def query_argument(text: str) -> Any:
    """QUERIES as ``gramdist.search`` takes them: a molecule file stays a path, a job file
    becomes its ``dataset:`` mapping, anything else reads as ``gramdist append``'s DATA."""
    from gramdist.cli.append import parse_dataset_argument

    lower = text.lower()
    if lower.endswith(_SMILES_FILES + _SDF_FILES):
        return text
    if lower.endswith((".yaml", ".yml")) and Path(text).is_file():
        from gramdist.jobs import load_job

        dataset = load_job(text).dataset
        return dict(dataset) if isinstance(dataset, dict) else dataset
    return parse_dataset_argument(text)


def result_rows(result: Any) -> list[tuple]:
    rows = []
    for q in range(result.rows.shape[0]):
        for rank in range(result.rows.shape[1]):
            if result.rows[q, rank] < 0:
                break
            rows.append((q, int(result.query_ids[q]), rank + 1, int(result.rows[q, rank]), int(result.ids[q, rank]),
                         repr(float(result.values[q, rank]))))
    return rows


def write_csv(rows: list[tuple], out: str | None, overwrite: bool) -> None:
    """The rows as CSV on stdout, or in ``out``, written whole or not at all."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(rows)
    if out is None:
        sys.stdout.write(buf.getvalue())
        return
    data = buf.getvalue().encode("utf-8")
    _write_whole(_target(out, overwrite), lambda f: f.write(data))


def write_parquet(result: Any, out: str, overwrite: bool) -> None:
    """The hits as a Parquet table (the CSV's columns, typed: ``value`` float64 with every bit),
    written whole or not at all; needs pyarrow (``gramdist[parquet]``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise JobError("--out *.parquet needs pyarrow: pip install 'gramdist[parquet]'") from None
    keep = result.rows >= 0
    q, rank = np.nonzero(keep)
    table = pa.table({"query": q.astype(np.int64), "query_id": np.asarray(result.query_ids, dtype=np.int64)[q],
                      "rank": (rank + 1).astype(np.int32), "row": result.rows[keep].astype(np.int64),
                      "id": result.ids[keep].astype(np.int64), "value": result.values[keep].astype(np.float64)})
    _write_whole(_target(out, overwrite), lambda f: pq.write_table(table, f))


def _target(out: str, overwrite: bool) -> Path:
    path = Path(out)
    if path.is_dir():
        raise JobError(f"{out}: a folder; --out names the file to write")
    if path.exists() and not overwrite:
        raise JobError(f"{out}: exists; add --overwrite to replace it")
    return path


def _write_whole(path: Path, write: Any) -> None:
    """``write(binary file)`` into a temporary file beside ``path``, then renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_search(args: argparse.Namespace) -> int:
    from gramdist.cli.append import parse_dataset_argument
    from gramdist.engine.placement import Placement
    from gramdist.engine.search import search
    from gramdist.jobs import ClusterSpec

    if args.top < 1:
        raise JobError(f"--top: expected a positive integer, got {args.top}")
    if args.json and not args.out:
        raise JobError("--json needs --out (stdout carries the CSV otherwise)")
    cluster = apply_tls_arguments(ClusterSpec(n_workers=args.workers), args)
    placement = Placement(scheduler=args.scheduler, cluster=cluster, in_process="auto")
    base = None if args.base is None else parse_dataset_argument(args.base)  # as `gramdist append --base` reads it
    result = search(args.store, query_argument(args.queries), top=args.top, placement=placement,
                    context=run_context(args), base=base)
    rows = result_rows(result)
    if args.out and args.out.lower().endswith(".parquet"):
        write_parquet(result, args.out, args.overwrite)
    else:
        write_csv(rows, args.out, args.overwrite)
    if args.json:
        print(json.dumps({"store": result.store, "out": str(Path(args.out).resolve()), "queries": len(result.query_ids),
                          "top": args.top, "rows": len(rows),
                          "timings": {k: round(v, 4) for k, v in result.timings.items()}}))
    return 0
