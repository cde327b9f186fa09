"""Certificates for a TLS Dask cluster: one CA, and scheduler, worker and client certificates.

Dask's TLS is mutual: the scheduler, every worker and every client present a certificate signed
by the cluster's CA and refuse peers that do not, so only holders of a certificate can send the
cluster code to run. :func:`write_certificates` makes such a set in one folder::

    ca.pem  ca.key                the CA (keep ca.key private: it can sign new certificates)
    scheduler.pem  scheduler.key  for ``dask scheduler --protocol tls``
    worker.pem  worker.key        for ``dask worker tls://...``
    client.pem  client.key        for ``gramdist run/submit/status/cancel --tls-dir FOLDER``

Keys are EC P-256, written readable by their owner only (the folder too). Run it again with
another ``clients`` name to add a certificate for another user, signed by the same CA; files
that exist are kept unless ``force``. Dask does not check host names (a cluster's CA is its
own and workers are reached by IP address), so the names in the certificates are informative.
Needs the ``cryptography`` package (the ``tls`` extra).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gramdist.errors import GramdistError

#: the certificates every cluster needs; clients are named by the caller
SERVER_ROLES = ("scheduler", "worker")


def _crypto() -> Any:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise GramdistError("making certificates needs the cryptography package: "
                            "pip install 'gramdist[tls]'") from None
    return x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID


def write_certificates(folder: str | os.PathLike, *, clients: Iterable[str] = ("client",),
                       hosts: Iterable[str] = (), days: int = 365, force: bool = False) -> dict[str, Path]:
    """Write a CA and the scheduler, worker and client certificates into ``folder``.

    Parameters
    ----------
    folder : created if missing (mode 0700).
    clients : names of the client certificates (``<name>.pem`` / ``<name>.key``).
    hosts : extra DNS names or IP addresses for the certificates' subject alternative names
        (localhost, 127.0.0.1, this host's name and ``scheduler`` are always in).
    days : validity of the new certificates.
    force : replace existing files (a new CA invalidates every certificate it signed).

    Returns
    -------
    dict : file name -> path, for every file of the set (written now or kept).
    """
    x509, hashes, serialization, ec, eku, oid = _crypto()
    if days < 1:
        raise GramdistError(f"--days must be at least 1, got {days}")
    names = [str(c) for c in clients]
    for name in names:
        if not name or "/" in name or name.startswith(".") or name in ("ca", *SERVER_ROLES):
            raise GramdistError(f"client certificate name {name!r}: choose a plain name other than "
                                f"ca, {', '.join(SERVER_ROLES)}")
    out = Path(folder)
    if not out.exists():  # a folder made here is private; an existing one keeps its mode (the keys are 0600)
        out.mkdir(parents=True, mode=0o700)
        os.chmod(out, 0o700)
    now = datetime.datetime.now(datetime.UTC)
    validity = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days))
    files: dict[str, Path] = {}

    def write(name: str, cert: Any, key: Any) -> None:
        key_path = out / f"{name}.key"
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        os.chmod(key_path, 0o600)
        (out / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def exists(name: str) -> bool:
        return not force and (out / f"{name}.pem").exists() and (out / f"{name}.key").exists()

    if exists("ca"):
        ca_cert = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
        ca_key = serialization.load_pem_private_key((out / "ca.key").read_bytes(), password=None)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(oid.COMMON_NAME, f"gramdist cluster CA ({socket.gethostname()})")])
        ca_cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(validity[0]).not_valid_after(now + datetime.timedelta(days=max(days, 3650)))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                content_commitment=False, key_encipherment=False,
                                                data_encipherment=False, key_agreement=False,
                                                encipher_only=False, decipher_only=False), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        write("ca", ca_cert, ca_key)
    files["ca.pem"], files["ca.key"] = out / "ca.pem", out / "ca.key"

    alt_names: list[Any] = []
    for host in ["localhost", "scheduler", socket.gethostname(), socket.getfqdn(), "127.0.0.1", *hosts]:
        try:
            entry = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            entry = x509.DNSName(host)
        if entry not in alt_names:
            alt_names.append(entry)
    for name in (*SERVER_ROLES, *names):
        if not exists(name):
            key = ec.generate_private_key(ec.SECP256R1())
            cert = (x509.CertificateBuilder()
                    .subject_name(x509.Name([x509.NameAttribute(oid.COMMON_NAME, f"gramdist {name}")]))
                    .issuer_name(ca_cert.subject).public_key(key.public_key())
                    .serial_number(x509.random_serial_number())
                    .not_valid_before(validity[0]).not_valid_after(validity[1])
                    .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
                    .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                    # every Dask peer is both a TLS server and a TLS client
                    .add_extension(x509.ExtendedKeyUsage([eku.SERVER_AUTH, eku.CLIENT_AUTH]), critical=False)
                    .sign(ca_key, hashes.SHA256()))
            write(name, cert, key)
        files[f"{name}.pem"], files[f"{name}.key"] = out / f"{name}.pem", out / f"{name}.key"
    return files
