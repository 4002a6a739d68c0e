"""TLS contexts for every rollguard connection, built in one place.

Both sides use TLS 1.2 or newer. The server side always requires a client certificate signed
by the configured CA (mutual TLS), and optionally one that no CRL of its CA revokes. Files are
checked before OpenSSL sees them, so that a bad file gives an error naming the file and what is
wrong with it instead of "PEM lib".

The server side is stricter than OpenSSL's defaults:

- TLS 1.2 only with ECDHE key exchange and AEAD ciphers (AES-GCM, ChaCha20-Poly1305): forward
  secrecy, and no CBC suite (LUCKY13 and its kind). TLS 1.3's suites are all AEAD: unchanged.
- No session outlives its context: no TLS 1.3 tickets (`num_tickets = 0`) and no TLS 1.2
  tickets (`OP_NO_TICKET`). A TLS 1.2 session ID can only be resumed from the cache of the
  context that made it, and the agent builds a new context whenever its TLS files change, so a
  session never survives a rotation of the client CA or of the CRL.
"""

from __future__ import annotations

import ssl
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from rollguard.shared.errors import TlsFileError

MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2
# TLS 1.2 suites of the server: ECDHE (forward secrecy) with an AEAD cipher, nothing else.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"
_CRL_BEGIN = b"-----BEGIN X509 CRL-----"


def server_context(cert: Path, key: Path, ca: Path, crl: Path | None = None) -> ssl.SSLContext:
    """A server context that presents `cert`/`key` and requires a client certificate from `ca`,
    not revoked by the CRLs in `crl` when given (checked on every handshake)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_VERSION
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_ciphers(TLS12_CIPHERS)
    context.num_tickets = 0
    context.options |= ssl.OP_NO_TICKET
    _load_chain(context, cert, key)
    _load_ca(context, ca)
    if crl is not None:
        _load_crl(context, crl, ca)
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


def trusting_nothing() -> ssl.SSLContext:
    """A client context (TLS 1.2+) with no CA: every certificate fails its check. For a client
    whose URL needs no TLS, where a default context would load a CA bundle for nothing."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MINIMUM_VERSION
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


def read_crls(path: Path) -> list[x509.CertificateRevocationList]:
    """Every PEM CRL in `path`; TlsFileError naming the file otherwise."""
    data = _read(path, "CRL file")
    blocks = [_CRL_BEGIN + part for part in data.split(_CRL_BEGIN)[1:]]
    if not blocks:
        raise TlsFileError(f"CRL file {path}: no PEM CRL in it (-----BEGIN X509 CRL-----)")
    try:
        return [x509.load_pem_x509_crl(block) for block in blocks]
    except ValueError as exc:
        raise TlsFileError(f"CRL file {path}: not a valid PEM CRL ({exc})") from exc


def _load_crl(context: ssl.SSLContext, crl: Path, ca: Path) -> None:
    """Check every client certificate against its CA's CRL (VERIFY_CRL_CHECK_LEAF).

    OpenSSL then refuses a certificate whose CA has no CRL here, and every certificate of a CA
    whose CRL has expired: both would lock clients out without a word, so both are refused
    here, naming the CA. A CRL that no CA of the bundle signed is a wrong file."""
    authorities = read_certificates(ca, "CA bundle")
    crls = read_crls(crl)
    now = datetime.now(UTC)
    for entry in crls:
        issuers = [c for c in authorities if c.subject == entry.issuer]
        if not any(_signed_by(entry, issuer) for issuer in issuers):
            raise TlsFileError(
                f"CRL file {crl}: the CRL of {entry.issuer.rfc4514_string()!r} is not signed by "
                f"a CA in {ca}"
            )
        if entry.next_update_utc is not None and entry.next_update_utc < now:
            raise TlsFileError(
                f"CRL file {crl}: the CRL of {entry.issuer.rfc4514_string()!r} expired at "
                f"{entry.next_update_utc:%Y-%m-%dT%H:%M:%SZ}; every certificate it covers would "
                "be refused"
            )
    for authority in authorities:
        if not any(entry.issuer == authority.subject for entry in crls):
            raise TlsFileError(
                f"CRL file {crl} has no CRL of CA {authority.subject.rfc4514_string()!r} in "
                f"{ca}: every client certificate it issued would be refused"
            )
    try:
        context.load_verify_locations(cafile=crl)
    except ssl.SSLError as exc:
        raise TlsFileError(f"CRL file {crl}: rejected by OpenSSL ({exc})") from exc
    context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF


def _signed_by(crl: x509.CertificateRevocationList, issuer: x509.Certificate) -> bool:
    public_key = issuer.public_key()
    try:
        return crl.is_signature_valid(public_key)  # type: ignore[arg-type]
    except (TypeError, ValueError, UnsupportedAlgorithm):
        return False


def _load_ca(context: ssl.SSLContext, ca: Path) -> None:
    read_certificates(ca, "CA bundle")
    try:
        context.load_verify_locations(cafile=ca)
    except ssl.SSLError as exc:
        raise TlsFileError(f"CA bundle {ca}: rejected by OpenSSL ({exc})") from exc
