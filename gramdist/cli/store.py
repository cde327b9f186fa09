"""``gramdist info STORE`` and ``gramdist verify STORE``: describe and check a store."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    info = sub.add_parser("info", help="describe a store")
    info.add_argument("store")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_info)

    verify = sub.add_parser("verify", help="check a store's tiles against the checksums recorded when written")
    verify.add_argument("store")
    verify.add_argument("--repair", action="store_true",
                        help="unmark damaged tiles so that rerunning the job recomputes them")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=cmd_verify)


def cmd_info(args: argparse.Namespace) -> int:
    from gramdist.engine import feature_store as fs
    from gramdist.engine.store import store_info

    if fs.is_feature_store(args.store):
        return _feature_info(fs.feature_info(args.store), args.json)
    info = store_info(args.store)
    if args.json:
        print(json.dumps(info))
        return 0
    k = info["kernel"] or {}
    ds = info["dataset"] or {}
    print(f"store:     {info['store']}")
    print(f"status:    {'complete' if info['complete'] else 'INCOMPLETE'} "
          f"({info['tiles_done']}/{info['tiles_total']} tiles of {info['tile_size']})")
    print(f"shape:     {info['shape'][0]} x {info['shape'][1]} "
          f"({'symmetric' if info['symmetric'] else 'test x train'})")
    print(f"kernel:    {k.get('name')} {k.get('params')}")
    print(f"dataset:   {ds.get('name')} ({ds.get('n_graphs')} graphs, checksum {ds.get('checksum')})")
    if info["test_dataset"]:
        td = info["test_dataset"]
        print(f"test:      {td.get('name')} ({td.get('n_graphs')} graphs)")
    print(f"fit:       {info['fit']}")
    print(f"normalize: {info['normalize']}")
    print(f"version:   {info['gramdist_version']}")
    if info["stats"]:
        print(f"timings:   {info['stats']}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when every written tile matches its checksum (or there are none to check), 1 when
    some do not."""
    from gramdist.engine import feature_store as fs
    from gramdist.engine.store import verify_store

    verify = fs.verify_features if fs.is_feature_store(args.store) else verify_store
    report = verify(args.store, repair=args.repair)
    print(json.dumps(report) if args.json else report["message"])
    return 1 if report["damaged"] else 0


def _feature_info(info: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps(info))
        return 0
    k = info["kernel"] or {}
    ds = info["dataset"] or {}
    n, width = info["shape"]
    kind = (f"Nyström, {width} components ({info['nystroem']})" if info["feature_kind"] == "nystroem"
            else f"explicit CSR rows, {info['nnz']} non-zeros" if info["nnz"] is not None else "explicit CSR rows")
    rows = [("store", f"{info['store']} (feature store)"),
            ("status", f"{'complete' if info['complete'] else 'INCOMPLETE'} ({info['chunks_done']}/"
                       f"{info['chunks_total']} chunks of {info['chunk_size']} graphs)"),
            ("features", f"{n} graphs; {kind}"),
            ("kernel", f"{k.get('name')} {k.get('params')}"),
            ("dataset", f"{ds.get('name')} ({ds.get('n_graphs')} graphs, checksum {ds.get('checksum')})"),
            ("fit", f"{info['fit']}" + (f" (state from {info['from_store']})" if info["from_store"] else "")),
            ("normalize", info["normalize"]), ("disk", f"{info['disk_bytes'] / 2**20:.1f} MiB"),
            ("version", info["gramdist_version"])]
    for label, value in rows:
        print(f"{label + ':':<10} {value}")
    if info["stats"]:
        print(f"timings:   {info['stats']}")
    return 0
