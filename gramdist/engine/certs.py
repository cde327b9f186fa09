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
    crypto = _crypto()
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
    ca_validity = (validity[0], now + datetime.timedelta(days=max(days, 3650)))
    if _kept(out, "ca", force):
        ca = _read(crypto, out, "ca")
    else:
        ca = _new_ca(crypto, ca_validity)
        _write(crypto, out, "ca", *ca)
    files = {"ca.pem": out / "ca.pem", "ca.key": out / "ca.key"}
    alt_names = _alt_names(crypto, hosts)
    for name in (*SERVER_ROLES, *names):
        if not _kept(out, name, force):
            _write(crypto, out, name, *_new_certificate(crypto, name, ca, alt_names, validity))
        files[f"{name}.pem"], files[f"{name}.key"] = out / f"{name}.pem", out / f"{name}.key"
    return files


def _kept(out: Path, name: str, force: bool) -> bool:
    """Whether ``name``'s certificate and key exist and are kept (not ``force``)."""
    return not force and (out / f"{name}.pem").exists() and (out / f"{name}.key").exists()


def _read(crypto: Any, out: Path, name: str) -> tuple[Any, Any]:
    """The certificate and private key ``name`` in ``out``."""
    x509, _, serialization, *_ = crypto
    return (x509.load_pem_x509_certificate((out / f"{name}.pem").read_bytes()),
            serialization.load_pem_private_key((out / f"{name}.key").read_bytes(), password=None))


def _write(crypto: Any, out: Path, name: str, cert: Any, key: Any) -> None:
    """``name.key`` (created readable by its owner only) and ``name.pem`` in ``out``."""
    serialization = crypto[2]
    key_path = out / f"{name}.key"
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    (out / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _new_ca(crypto: Any, validity: tuple[datetime.datetime, datetime.datetime]) -> tuple[Any, Any]:
    """A self-signed CA certificate (may sign end certificates only) and its new EC P-256 key."""
    x509, hashes, _, ec, _, oid = crypto
    ca_key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(oid.COMMON_NAME, f"gramdist cluster CA ({socket.gethostname()})")])
    ca_cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(validity[0]).not_valid_after(validity[1])
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    return ca_cert, ca_key


def _alt_names(crypto: Any, hosts: Iterable[str]) -> list[Any]:
    """The subject alternative names of every certificate: this host's names, ``localhost``,
    ``scheduler``, 127.0.0.1 and ``hosts``, each once."""
    x509 = crypto[0]
    alt_names: list[Any] = []
    for host in ["localhost", "scheduler", socket.gethostname(), socket.getfqdn(), "127.0.0.1", *hosts]:
        try:
            entry = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            entry = x509.DNSName(host)
        if entry not in alt_names:
            alt_names.append(entry)
    return alt_names


def _new_certificate(crypto: Any, name: str, ca: tuple[Any, Any], alt_names: list[Any],
                     validity: tuple[datetime.datetime, datetime.datetime]) -> tuple[Any, Any]:
    """A certificate for ``name`` signed by ``ca`` (certificate, key), and its new EC P-256 key."""
    x509, hashes, _, ec, eku, oid = crypto
    ca_cert, ca_key = ca
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
    return cert, key
