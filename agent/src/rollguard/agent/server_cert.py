"""Whether `--cert` can serve TLS at all, checked once at start-up.

OpenSSL loads any certificate that matches its key, and the agent would then listen, while every
client refused its certificate during every handshake. The roller, curl and `openssl s_client`
check it with OpenSSL's purpose check for a TLS server (Java's and Go's are alike):

- an extendedKeyUsage without serverAuth (a client certificate given as --cert, say), or a
  keyUsage without any of digitalSignature, keyEncipherment and keyAgreement: every client
  refuses it, always. A mistake in the files, made once at deploy time: the agent refuses to
  start (exit 2), as it refuses a key of another certificate.
- a keyUsage without digitalSignature: every key exchange the agent offers (ECDHE in TLS 1.2,
  all of TLS 1.3) is signed with the key; OpenSSL's TLS 1.3 clients let that pass, Java's and
  TLS 1.2 clients do not. A warning.
- expired, or not yet valid: a warning, not a refusal. Validity changes with time alone, so a
  refusal would turn files accepted yesterday into a sidecar that cannot start today, taking
  the probe port and the ready file (the broker pod's readiness) down with it, for a fault of
  the API port alone. The agent reloads its files every --cert-reload-interval: a renewed
  certificate is served without a restart.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from rollguard.shared.errors import ConfigError
from rollguard.shared.tls import read_certificates

__all__ = ["check_server_certificate"]

E = TypeVar("E", bound=x509.ExtensionType)

# RFC 5280's names, as `openssl x509 -text` and `rollguard-certs show` print them.
_USAGE_NAMES = {
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
    ExtendedKeyUsageOID.CODE_SIGNING: "codeSigning",
    ExtendedKeyUsageOID.EMAIL_PROTECTION: "emailProtection",
    ExtendedKeyUsageOID.TIME_STAMPING: "timeStamping",
    ExtendedKeyUsageOID.OCSP_SIGNING: "OCSPSigning",
    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE: "anyExtendedKeyUsage",
}


def check_server_certificate(path: Path, *, now: datetime) -> list[str]:
    """The warnings about the first certificate of `path` (the one the agent presents);
    ConfigError naming --cert and the path when no TLS client would accept it."""
    certificate = read_certificates(path, "certificate")[0]
    refusal = _refusal(certificate)
    if refusal is not None:
        raise ConfigError(f"--cert {path}: {refusal}, so every TLS client refuses it from a server")
    return [f"--cert {path}: {warning}" for warning in _warnings(certificate, now)]


def _refusal(certificate: x509.Certificate) -> str | None:
    extended = _extension(certificate, x509.ExtendedKeyUsage)
    if extended is not None and ExtendedKeyUsageOID.SERVER_AUTH not in extended:
        names = ", ".join(_USAGE_NAMES.get(oid, oid.dotted_string) for oid in extended)
        return f"its extendedKeyUsage allows {names or 'nothing'}, not serverAuth"
    usage = _extension(certificate, x509.KeyUsage)
    if usage is not None and not (
        usage.digital_signature or usage.key_encipherment or usage.key_agreement
    ):
        return "its keyUsage has none of digitalSignature, keyEncipherment, keyAgreement"
    return None


def _warnings(certificate: x509.Certificate, now: datetime) -> list[str]:
    warnings = []
    usage = _extension(certificate, x509.KeyUsage)
    if usage is not None and not usage.digital_signature:
        warnings.append(
            "its keyUsage lacks digitalSignature, which every key exchange the agent offers "
            "needs (ECDHE, TLS 1.3): TLS 1.2 clients, and strict ones such as Java's, refuse it"
        )
    start, end = certificate.not_valid_before_utc, certificate.not_valid_after_utc
    if now >= end:
        warnings.append(
            f"expired at {end:%Y-%m-%dT%H:%M:%SZ}: every TLS client refuses it until it is "
            "renewed (the agent loads the new one within --cert-reload-interval)"
        )
    elif now < start:
        warnings.append(
            f"not valid before {start:%Y-%m-%dT%H:%M:%SZ}: TLS clients refuse it until then "
            "(or this host's clock is wrong)"
        )
    return warnings


def _extension(certificate: x509.Certificate, kind: type[E]) -> E | None:
    try:
        return certificate.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None
