"""A human summary of a certificate, for `rollguard-certs show`."""

from __future__ import annotations

from datetime import UTC, datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
)


def describe(certificate: x509.Certificate, *, now: datetime | None = None) -> list[str]:
    now = now or datetime.now(UTC)
    lines = [
        f"subject:     {certificate.subject.rfc4514_string() or '(empty)'}",
        f"issuer:      {certificate.issuer.rfc4514_string() or '(empty)'}",
        f"serial:      {certificate.serial_number:x}",
        f"key:         {_key(certificate)}",
    ]
    extensions = certificate.extensions
    try:
        sans = extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [f"DNS:{n}" for n in sans.get_values_for_type(x509.DNSName)]
        names += [f"IP:{n}" for n in sans.get_values_for_type(x509.IPAddress)]
        lines.append(f"SANs:        {', '.join(names) or '(none)'}")
    except x509.ExtensionNotFound:
        lines.append("SANs:        (none)")
    try:
        ca = extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        ca = False
    lines.append(f"CA:          {'yes' if ca else 'no'}")
    try:
        usage = extensions.get_extension_for_class(x509.KeyUsage).value
        # encipher_only / decipher_only raise unless key_agreement is set, so they are skipped.
        lines.append("key usage:   " + ", ".join(u for u in _KEY_USAGES if getattr(usage, u)))
    except x509.ExtensionNotFound:
        lines.append("key usage:   (any)")
    try:
        extended = extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        lines.append("ext. usage:  " + ", ".join(oid._name for oid in extended))
    except x509.ExtensionNotFound:
        lines.append("ext. usage:  (any)")
    start, end = certificate.not_valid_before_utc, certificate.not_valid_after_utc
    lines.append(f"not before:  {start.isoformat()}")
    lines.append(f"not after:   {end.isoformat()} ({_expiry(start, end, now)})")
    return lines


def _key(certificate: x509.Certificate) -> str:
    public = certificate.public_key()
    if isinstance(public, ec.EllipticCurvePublicKey):
        return f"ECDSA {public.curve.name}"
    if isinstance(public, rsa.RSAPublicKey):
        return f"RSA {public.key_size} bits"
    return type(public).__name__


def _expiry(start: datetime, end: datetime, now: datetime) -> str:
    if now < start:
        return "NOT YET VALID"
    if now >= end:
        return f"EXPIRED {(now - end).days} days ago"
    return f"expires in {(end - now).days} days"
