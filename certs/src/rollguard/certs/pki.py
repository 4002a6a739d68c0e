"""Making keys and certificates, and writing them safely.

Every function here is pure apart from `write_pair`, which is the only place that touches the
file system: private keys are created 0600, and nothing is overwritten unless asked.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rollguard.shared.errors import ConfigError
from rollguard.shared.files import atomic_write
from rollguard.shared.tls import read_certificates

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

# Accept a certificate issued moments ago on a host whose clock is slightly behind.
CLOCK_SKEW = timedelta(minutes=5)

_DNS_LABEL = re.compile(r"^(\*|[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)$")


class KeyType(StrEnum):
    EC = "ec"
    RSA = "rsa"


@dataclass(frozen=True, slots=True)
class Issued:
    certificate: x509.Certificate
    key: PrivateKey


def new_key(key_type: KeyType = KeyType.EC, rsa_bits: int = 3072) -> PrivateKey:
    """ECDSA P-256 by default: small, fast, and accepted by every TLS stack Kafka runs on."""
    if key_type is KeyType.RSA:
        return rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    return ec.generate_private_key(ec.SECP256R1())


def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ConfigError(f"--ip {text!r} is not an IP address") from None


def check_dns(name: str) -> str:
    labels = name.rstrip(".").split(".")
    if not name or len(name) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        raise ConfigError(f"--dns {name!r} is not a valid DNS name")
    if "*" in labels[1:]:
        raise ConfigError(f"--dns {name!r}: a wildcard may only be the first label")
    return name


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(days: int, now: datetime | None) -> tuple[datetime, datetime]:
    if days < 1:
        raise ConfigError(f"--days {days}: a certificate must be valid for at least 1 day")
    start = (now or datetime.now(UTC)) - CLOCK_SKEW
    return start, start + CLOCK_SKEW + timedelta(days=days)


def make_ca(
    common_name: str,
    *,
    days: int = 3650,
    key: PrivateKey | None = None,
    now: datetime | None = None,
) -> Issued:
    key = key or new_key()
    not_before, not_after = _validity(days, now)
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(certificate, key)


def issue(
    ca: Issued,
    common_name: str,
    *,
    server: bool,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    days: int = 365,
    key: PrivateKey | None = None,
    now: datetime | None = None,
    not_after: datetime | None = None,
) -> Issued:
    """A leaf certificate for a server (needs a SAN) or a client, signed by `ca`.

    `not_after` overrides `days` (tests use it to make expired certificates).
    """
    names: list[x509.GeneralName] = [x509.DNSName(check_dns(d)) for d in dns]
    names += [x509.IPAddress(parse_ip(ip)) for ip in ips]
    if server and not names:
        raise ConfigError("a server certificate needs at least one --dns or --ip name")
    key = key or new_key()
    start, end = _validity(days, now)
    if not_after is not None:
        start, end = min(start, not_after - timedelta(days=1)), not_after
    public = key.public_key()
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    ca_ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=isinstance(key, rsa.RSAPrivateKey),
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski.value),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def load_ca(cert_path: Path, key_path: Path) -> Issued:
    """Read a CA written by `init-ca`, checking that the key belongs to the certificate."""
    if not cert_path.exists():
        raise ConfigError(
            f"CA certificate {cert_path}: no such file (run 'rollguard-certs init-ca' first)"
        )
    certificate = read_certificates(cert_path, "CA certificate")[0]
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except FileNotFoundError:
        raise ConfigError(f"CA key {key_path}: no such file") from None
    except PermissionError:
        raise ConfigError(f"CA key {key_path}: permission denied") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"CA key {key_path}: not an unencrypted PEM private key") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ConfigError(f"CA key {key_path}: only EC and RSA keys are supported")
    if _spki(key.public_key()) != _spki(certificate.public_key()):
        raise ConfigError(f"CA key {key_path} does not belong to CA certificate {cert_path}")
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.value.ca:
        raise ConfigError(f"CA certificate {cert_path} is not a CA certificate")
    return Issued(certificate, key)


def _spki(public: object) -> bytes:
    return public.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def write_pair(issued: Issued, cert_path: Path, key_path: Path, *, force: bool) -> None:
    """Write the certificate (0644) and key (0600); refuse to overwrite unless `force`.

    Both files are checked before either is written, and each is written to a temporary file
    and renamed into place, so a failure never leaves half a pair behind.
    """
    if not force:
        for path in (cert_path, key_path):
            if path.exists():
                raise ConfigError(f"{path} exists; pass --force to overwrite it")
    key_pem = issued.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    atomic_write(key_path, key_pem, 0o600)
    atomic_write(cert_path, issued.certificate.public_bytes(serialization.Encoding.PEM), 0o644)
