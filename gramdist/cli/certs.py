"""``gramdist certs DIR``: a CA and scheduler, worker and client certificates for a TLS cluster."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("certs", help="write a CA and TLS certificates for the scheduler, workers and clients",
                       description="Write DIR/ca.pem (+ ca.key, keep it private) and scheduler, worker and "
                                   "client certificates it signs. Run again with --client NAME to add a "
                                   "client certificate signed by the same CA. Needs the cryptography package "
                                   "(pip install 'gramdist[tls]').")
    p.add_argument("dir", help="folder for the files (created, mode 0700)")
    p.add_argument("--client", dest="clients", action="append", metavar="NAME",
                   help="name of a client certificate (repeatable; default: client)")
    p.add_argument("--host", dest="hosts", action="append", default=[], metavar="NAME",
                   help="extra host name or IP address for the certificates (informative: Dask does not check them)")
    p.add_argument("--days", type=int, default=365, help="validity of the new certificates (default 365)")
    p.add_argument("--force", action="store_true", help="replace existing files, the CA included")
    p.set_defaults(func=cmd_certs)


def cmd_certs(args: argparse.Namespace) -> int:
    from gramdist.engine.certs import write_certificates

    clients = args.clients or ["client"]
    files = write_certificates(args.dir, clients=clients, hosts=args.hosts, days=args.days, force=args.force)
    d = args.dir.rstrip("/")
    server_files = " ".join(f"--from-file={files[n]}" for n in ("ca.pem", "scheduler.pem", "scheduler.key",
                                                                 "worker.pem", "worker.key"))
    print(f"certificates in {d} (keys readable by you only; keep ca.key off the cluster):")
    print(f"  scheduler:  dask scheduler --protocol tls --tls-ca-file {d}/ca.pem "
          f"--tls-cert {d}/scheduler.pem --tls-key {d}/scheduler.key")
    print(f"  workers:    dask worker tls://SCHEDULER:8786 --tls-ca-file {d}/ca.pem "
          f"--tls-cert {d}/worker.pem --tls-key {d}/worker.key")
    for name in clients:
        flags = f"--tls-dir {d}" if name == "client" else (f"--tls-ca-file {d}/ca.pem --tls-cert {d}/{name}.pem "
                                                           f"--tls-key {d}/{name}.key")
        print(f"  client:     gramdist submit JOB --scheduler tls://SCHEDULER:8786 {flags}")
    print(f"  compose:    GRAMDIST_CERTS={d} docker compose -f deploy/docker-compose.yml "
          "-f deploy/docker-compose.tls.yml up -d")
    print(f"  kubernetes: kubectl create secret generic gramdist-tls {server_files}")
    return 0
