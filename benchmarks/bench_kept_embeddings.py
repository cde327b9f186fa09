"""Reading a kept embedding back vs embedding the graphs afresh, kernel by kernel (issue 32).

    python benchmarks/bench_kept_embeddings.py [--graphs 1028] [--repeats 3] [--kernels wl dm ...]

For each registered kernel with a job file in ``jobs/`` (``mutag-<name>.yaml``, or the ENZYMES
one for kernels that need attributes): fit on the first 200 graphs of the job's dataset family
(NCI1 for label kernels, ENZYMES for attribute kernels), embed one chunk of ``--graphs`` graphs
(the NCI1 job's tile size), write the embedding as a store keeps it
(:func:`gramdist.engine.store.state.write_embedding`) and read it back
(:func:`~gramdist.engine.store.state.read_embedding`, checksum and digest checked). Reported:
best-of-``--repeats`` embed and read seconds, their ratio, the bytes on disk, and whether the
kernel's embedding can be kept at all (a dataclass of arrays). One process, one core; results
in ``benchmarks/results/kept_embeddings.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, save  # noqa: E402

from gramdist.datasets import load_dataset  # noqa: E402
from gramdist.engine.store.state import read_embedding, write_embedding  # noqa: E402
from gramdist.kernels import KERNELS, make_kernel  # noqa: E402

ATTRIBUTED = {"sp_attr", "hgk_wl", "hgk_sp", "propagation_attr"}


def job_kernel(name: str) -> dict | None:
    for stem in (f"mutag-{name}", f"enzymes-{name}"):
        path = ROOT / "jobs" / f"{stem}.yaml"
        if path.exists():
            return dict(yaml.safe_load(path.read_text())["kernel"])
    return None


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(name: str, graphs, repeats: int, tmp: Path) -> dict:
    spec = job_kernel(name)
    if spec is None:
        return {"kernel": name, "skipped": "no job file"}
    spec.pop("name")
    kernel = make_kernel(name, **spec)
    state = kernel.fit(graphs[:200], 0)
    embed_s, emb = best(lambda: kernel.embed(graphs, state), repeats)
    folder = tmp / name
    folder.mkdir()
    if not write_embedding(str(folder), "r0", emb, "c"):
        return {"kernel": name, "embed_s": embed_s, "kept": False}
    read_s, back = best(lambda: read_embedding(str(folder), "r0", "c"), repeats)
    assert back is not None, name
    # kept by a store unless the kernel says its embedding is cheaper to compute than to read
    return {"kernel": name, "embed_s": embed_s, "read_s": read_s, "read_over_embed": read_s / embed_s,
            "bytes": folder_bytes(folder), "kept": bool(kernel.embedding_worth_keeping)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=1028)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", nargs="+", default=sorted(KERNELS))
    args = ap.parse_args()
    data = {"NCI1": load_dataset("NCI1")[: args.graphs], "ENZYMES": load_dataset("ENZYMES")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.kernels:
            graphs = data["ENZYMES" if name in ATTRIBUTED else "NCI1"]
            try:
                row = measure(name, graphs, args.repeats, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - a kernel that cannot run this dataset: reported
                row = {"kernel": name, "skipped": f"{type(exc).__name__}: {exc}"[:200]}
            rows.append(row)
            if "read_s" in row:
                print(f"{name:18s} embed {row['embed_s']:8.3f} s  read {row['read_s']:7.3f} s  "
                      f"read/embed {row['read_over_embed']:5.2f}  {row['bytes'] / 2**20:7.1f} MiB"
                      + ("" if row["kept"] else "  (not kept: embedding_worth_keeping = False)"), flush=True)
            else:
                print(f"{name:18s} {row.get('skipped') or 'not kept (not a dataclass of arrays)'}", flush=True)
    save("kept_embeddings", {"graphs": args.graphs, "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
