"""TLS contexts: versions, client certificates, and errors that name the bad file."""

from __future__ import annotations

import os
import shutil
import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from rollguard.shared.errors import TlsFileError
from rollguard.shared.tls import client_context, server_context

from helpers import Pki


def test_server_requires_tls_1_2_and_a_client_certificate(pki: Pki) -> None:
    context = server_context(pki.server_cert, pki.server_key, pki.ca)
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert context.verify_mode is ssl.CERT_REQUIRED


def test_server_offers_ecdhe_aead_suites_in_tls_1_2_and_no_session_tickets(pki: Pki) -> None:
    context = server_context(pki.server_cert, pki.server_key, pki.ca)
    tls12 = [c for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12, "no TLS 1.2 suite at all"
    for suite in tls12:
        assert suite["aead"] and suite["kea"] == "kx-ecdhe", suite["name"]
        assert "CBC" not in suite["description"] and "SHA1" not in suite["name"]
    assert {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.3"} >= {
        "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"
    }  # fmt: skip
    assert context.num_tickets == 0
    assert context.options & ssl.OP_NO_TICKET
    assert not context.verify_flags & ssl.VERIFY_CRL_CHECK_LEAF  # no CRL given


def test_client_checks_host_names_and_needs_tls_1_2(pki: Pki) -> None:
    context = client_context(pki.ca, pki.client_cert, pki.client_key)
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED


def test_broken_files_are_named_with_what_is_wrong(
    pki: Pki, other_pki: Pki, tmp_path: Path
) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("hello")
    encrypted = tmp_path / "encrypted.key"
    key = serialization.load_pem_private_key(pki.server_key.read_bytes(), None)
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
    )
    cases = [
        ((tmp_path / "missing.crt", pki.server_key, pki.ca), "missing.crt: no such file"),
        ((garbage, pki.server_key, pki.ca), "garbage.pem: no valid PEM certificate"),
        ((pki.server_cert, garbage, pki.ca), "garbage.pem: not a valid PEM private key"),
        ((pki.server_cert, encrypted, pki.ca), "is encrypted"),
        ((pki.server_cert, other_pki.server_key, pki.ca), "does not belong to certificate"),
        ((pki.server_cert, pki.server_key, tmp_path), "is a directory"),
        ((pki.server_cert, pki.server_key, garbage), "CA bundle"),
    ]
    for files, message in cases:
        with pytest.raises(TlsFileError, match=message):
            server_context(*files)


def test_unreadable_file_is_permission_denied(pki: Pki, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root, whom file permissions do not stop from reading")
    locked = tmp_path / "locked.key"
    shutil.copy(pki.server_key, locked)
    locked.chmod(0)
    with pytest.raises(TlsFileError, match="permission denied"):
        server_context(pki.server_cert, locked, pki.ca)


def test_client_certificate_needs_its_key(pki: Pki) -> None:
    with pytest.raises(TlsFileError, match="without a private key"):
        client_context(pki.ca, pki.client_cert)
