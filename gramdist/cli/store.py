"""``gramdist info``, ``verify`` and ``upgrade``: describe, check and bring up to date a store."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    info = sub.add_parser("info", help="describe a store")
    info.add_argument("store")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_info)

    verify = sub.add_parser("verify", help="check a store: metadata, done-mask, every tile against its checksum")
    verify.add_argument("store")
    verify.add_argument("--repair", action="store_true",
                        help="restore lost metadata, rebuild a lost done-mask, unmark damaged tiles so that "
                             "rerunning the job (or `gramdist append STORE`) recomputes them")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=cmd_verify)

    upgrade = sub.add_parser("upgrade", help="add the metadata a store of an older gramdist lacks "
                             "(dimension names, for xarray); the Gram itself is not touched")
    upgrade.add_argument("store")
    upgrade.set_defaults(func=cmd_upgrade)


def cmd_info(args: argparse.Namespace) -> int:
    from gramdist.engine.store import FeatureStore, open_store

    store = open_store(args.store)
    if isinstance(store, FeatureStore):
        return _feature_info(store.info(), args.json)
    info = store.info()
    if args.json:
        print(json.dumps(info))
        return 0
    k = info["kernel"] or {}
    ds = info["dataset"] or {}
    print(f"store:     {info['store']}")
    print(f"status:    {'complete' if info['complete'] else 'INCOMPLETE'} "
          f"({info['tiles_done']}/{info['tiles_total']} tiles of {info['tile_size']})")
    print(f"shape:     {info['shape'][0]} x {info['shape'][1]} {info['dtype']} "
          f"({'symmetric' if info['symmetric'] else 'test x train'})")
    print(f"kernel:    {k.get('name')} {k.get('params')}{_versions(info['kernel_versions'])}")
    print(f"dataset:   {ds.get('name')} ({ds.get('n_graphs')} graphs, checksum {ds.get('checksum')})")
    if ds.get("source", {}).get("file"):  # a molecule file: where it was and its content hash
        print(f"source:    {ds['source']['file']} (sha256 {ds['source']['sha256'][:16]}…)")
    if info["test_dataset"]:
        td = info["test_dataset"]
        print(f"test:      {td.get('name')} ({td.get('n_graphs')} graphs)")
    for k, rec in enumerate(info["appends"]):
        src = json.dumps(rec.get("source")) if rec.get("source") is not None else "Python"
        print(f"append {k + 1}:  {rec.get('n_graphs')} graphs from {src} (rows {rec['rows'][0]}..{rec['rows'][1] - 1}, "
              f"checksum {rec.get('checksum')})")
    pending = info["pending_append"]
    if pending:
        state = "being committed" if pending.get("state") == "committing" else "in progress or interrupted"
        done = (f", {pending['tiles_done']}/{pending['tiles_total']} tiles of the grown Gram"
                if "tiles_done" in pending else "")
        print(f"pending:   append of {pending.get('n_graphs')} graphs ({pending['from'][0]} -> {pending['to'][0]} rows) "
              f"{state}{done}; this store reads as it was before it")
    writer = info["writer"]
    if writer:
        stale = f" - stale ({writer['stale']}): the next writer takes it over" if writer.get("stale") else ""
        print(f"writer:    {writer.get('command') or 'gramdist'} ({writer['description']}){stale}")
    print(f"fit:       {info['fit']}")
    print(f"normalize: {info['normalize']}")
    print(f"version:   {info['gramdist_version']}")
    if info["stats"]:
        print(f"timings:   {info['stats']}")
    if info["needs_upgrade"]:
        print(f"upgrade:   made by gramdist {info['gramdist_version']}: its arrays lack dimension names, so "
              f"xarray cannot open it; `gramdist upgrade {info['store']}` adds them (metadata only)")
    if info.get("outdated_checksums"):
        print(f"upgrade:   its checksums (gramdist {info['gramdist_version']}) cannot see two values swapped within "
              f"a tile, nor a changed label or id; `gramdist upgrade {info['store']}` records ones that do")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    from gramdist.engine.store import FeatureStore, open_store

    store = open_store(args.store)  # a clear error for a path that is no store, before taking its lock
    with store.lock(log=lambda m: None):
        store = open_store(args.store, mode="r+")
        lines = []
        if not isinstance(store, FeatureStore):
            changed = store.upgrade()
            if changed:
                lines.append(f"added dimension names to {', '.join(changed)}")
        lines += store.upgrade_checksums()
    for line in lines or ["already up to date"]:
        print(f"{args.store}: {line}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when nothing is wrong (every written tile, or feature chunk, on disk and matching
    its checksum, no metadata lost), 1 when something is (one line each; with ``--repair``, also
    what was done)."""
    from gramdist.engine.store import StoreLock, verify

    if args.repair:  # it rewrites the done-mask: never beside a run writing the same store
        with StoreLock(args.store):
            report = verify(args.store, repair=True)
    else:
        report = verify(args.store)
    print(json.dumps(report) if args.json else report["message"])
    return 1 if report["problems"] or report["damaged"] else 0


def _versions(versions: dict[str, int]) -> str:
    """The kernel definitions past version 1 a store was made with, for the kernel line."""
    return "".join(f", {name} v{v}" for name, v in sorted(versions.items()))


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
            ("kernel", f"{k.get('name')} {k.get('params')}{_versions(info['kernel_versions'])}"),
            ("dataset", f"{ds.get('name')} ({ds.get('n_graphs')} graphs, checksum {ds.get('checksum')})"),
            ("fit", f"{info['fit']}" + (f" (state from {info['from_store']})" if info["from_store"] else "")),
            ("normalize", info["normalize"]), ("disk", f"{info['disk_bytes'] / 2**20:.1f} MiB"),
            ("version", info["gramdist_version"])]
    for label, value in rows:
        print(f"{label + ':':<10} {value}")
    if info["stats"]:
        print(f"timings:   {info['stats']}")
    return 0
