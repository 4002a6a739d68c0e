"""TLS contexts for every rollguard connection, built in one place.

Both sides use TLS 1.2 or newer. The server side always requires a client certificate signed
by the configured CA (mutual TLS). Files are checked before OpenSSL sees them, so that a bad
file gives an error naming the file and what is wrong with it instead of "PEM lib".
"""

from __future__ import annotations

import ssl
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from shared.errors import TlsFileError

MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2


def server_context(cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    """A server context that presents `cert`/`key` and requires a client certificate from `ca`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_VERSION
    context.verify_mode = ssl.CERT_REQUIRED
    _load_chain(context, cert, key)
    _load_ca(context, ca)
    return context


def client_context(
    ca: Path | None, cert: Path | None = None, key: Path | None = None
) -> ssl.SSLContext:
    """A client context that trusts `ca` (the system's CAs when None; host names are checked)
    and presents `cert`/`key` if given.

    Pass the context as httpx's `verify=`: httpx drops a `cert=` tuple given beside a CA path.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MINIMUM_VERSION
    if ca is None:
        context.load_default_certs()
    else:
        _load_ca(context, ca)
    if cert is not None:
        if key is None:
            raise TlsFileError(f"client certificate {cert} given without a private key")
        _load_chain(context, cert, key)
    return context


def read_certificates(path: Path, role: str) -> list[x509.Certificate]:
    """Every PEM certificate in `path`; TlsFileError naming the file and `role` otherwise."""
    data = _read(path, role)
    try:
        certificates = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise TlsFileError(f"{role} {path}: no valid PEM certificate in it ({exc})") from exc
    return certificates


def _read(path: Path, role: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TlsFileError(f"{role} {path}: no such file") from None
    except PermissionError:
        raise TlsFileError(f"{role} {path}: permission denied") from None
    except IsADirectoryError:
        raise TlsFileError(f"{role} {path}: is a directory, not a file") from None
    except OSError as exc:
        raise TlsFileError(f"{role} {path}: cannot be read ({exc.strerror})") from exc


def _check_key(path: Path) -> None:
    data = _read(path, "private key")
    try:
        serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise TlsFileError(
            f"private key {path}: is encrypted; rollguard needs an unencrypted PEM key"
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise TlsFileError(f"private key {path}: not a valid PEM private key ({exc})") from exc


def _load_chain(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    read_certificates(cert, "certificate")
    _check_key(key)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TlsFileError(f"private key {key} does not belong to certificate {cert}") from exc
        raise TlsFileError(f"certificate {cert} / key {key}: rejected by OpenSSL ({exc})") from exc


def _load_ca(context: ssl.SSLContext, ca: Path) -> None:
    read_certificates(ca, "CA bundle")
    try:
        context.load_verify_locations(cafile=ca)
    except ssl.SSLError as exc:
        raise TlsFileError(f"CA bundle {ca}: rejected by OpenSSL ({exc})") from exc
