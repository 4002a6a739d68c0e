"""The real control plane's credentials, as a cluster has them: a CA made for this control plane,
the API server's serving certificate, the service-account token signing pair, and client
certificates for the admin (in `system:masters`), each component and any user a test makes,
written with kubeconfigs that carry them inline.

Every key is ECDSA P-256; every certificate is valid from five minutes ago for two days.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The components' own users, which the API server's bootstrap RBAC policy knows (the controller
# manager's also in system:masters: see --use-service-account-credentials; kwok, the kubelet of
# every node it fakes, in system:masters for want of one identity the Node authorizer would
# accept for all of them): the kubeconfig's name, the user, its groups.
COMPONENT_USERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "controller-manager": ("system:kube-controller-manager", ("system:masters",)),
    "scheduler": ("system:kube-scheduler", ()),
    "kwok": ("kwok", ("system:masters",)),
}


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass(frozen=True)
class Issued:
    """A certificate and its key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _private_pem(self.key)


def _name(common: str, organizations: Iterable[str] = ()) -> x509.Name:
    # Kubernetes reads a client certificate's CN as the user and each O as a group.
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca() -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("rollguard test kubernetes CA")
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(ca: Issued, common: str, groups: Iterable[str] = (), *, server: bool = False) -> Issued:
    """A client certificate of user `common` in `groups`, or with `server` the API server's."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common, groups))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if server:
        names: list[x509.GeneralName] = [
            x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default")
        ]
        names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def _write(path: Path, data: bytes, *, secret: bool = False) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_pki(pki: Path, folder: Path, server: str, admin_kubeconfig: Path) -> Issued:
    """A new CA and everything it signs: in `pki` the CA's certificate, the API server's serving
    pair, the service-account signing pair (sa.key, sa.pub) and the admin's pair; the admin's
    kubeconfig, and each component's in `folder` (`<name>.kubeconfig`). Returns the CA."""
    pki.mkdir(parents=True, exist_ok=True)
    ca = make_ca()
    _write(pki / "ca.crt", ca.cert_pem)
    serving = issue(ca, "kube-apiserver", server=True)
    _write(pki / "serving.crt", serving.cert_pem)
    _write(pki / "serving.key", serving.key_pem, secret=True)
    # The service-account token signing pair (ES256).
    signing = ec.generate_private_key(ec.SECP256R1())
    _write(pki / "sa.key", _private_pem(signing), secret=True)
    public = signing.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(pki / "sa.pub", public)
    admin = issue(ca, "rollguard-admin", ["system:masters"])
    _write(pki / "admin.crt", admin.cert_pem)
    _write(pki / "admin.key", admin.key_pem, secret=True)
    write_kubeconfig(admin_kubeconfig, server, ca, "rollguard-admin", admin)
    for name, (user, groups) in COMPONENT_USERS.items():
        write_kubeconfig(folder / f"{name}.kubeconfig", server, ca, user, issue(ca, user, groups))
    return ca


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Issued,
    user: str,
    issued: Issued | None = None,
    *,
    token: str | None = None,
    namespace: str | None = None,
) -> Path:
    """A self-contained kubeconfig (JSON, which is YAML): certificates inline; the user's
    client certificate (`issued`) or bearer `token`."""
    credentials: dict[str, str] = {"token": token} if token else {}
    if issued is not None:
        credentials = {
            "client-certificate-data": _b64(issued.cert_pem),
            "client-key-data": _b64(issued.key_pem),
        }
    context = {"cluster": "rollguard", "user": user}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "rollguard", "cluster": {
            "server": server, "certificate-authority-data": _b64(ca.cert_pem),
        }}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "rollguard", "context": context}],
        "current-context": "rollguard",
    }  # fmt: skip
    _write(path, json.dumps(config, indent=1).encode(), secret=True)
    return path
