"""What `rollguard-agent` checks before it serves: a `--ready-file` it could never write is exit
2; a certificate no TLS client accepts from a server is exit 2; one that has expired, or is not
valid yet, or cannot sign, is a warning at start-up (why each: `rollguard.agent.server_cert`).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from test_agent_cli import start
from test_cli_flags import read_only_folder

from rollguard.agent.server_cert import check_server_certificate
from rollguard.certs.pki import Issued, issue, load_ca, write_pair
from rollguard.shared.errors import ConfigError

from helpers import Agent, Pki, curl, free_port

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def one_line_refusal(done: object, *texts: str) -> None:
    assert done.returncode == 2, done.stderr  # type: ignore[attr-defined]
    lines = done.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    for text in texts:
        assert text in lines[0], (text, lines[0])


# ---- --ready-file ------------------------------------------------------------------------


def test_a_ready_file_in_a_folder_that_does_not_exist_is_exit_2(pki: Pki, tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "kafka-ready"
    one_line_refusal(
        start(pki, "--ready-file", str(path)),
        f"rollguard-agent: --ready-file {path}: its folder {path.parent} does not exist",
    )


def test_a_ready_file_from_the_environment_is_named_the_same_way(pki: Pki, tmp_path: Path) -> None:
    path = tmp_path / "missing" / "ready"
    done = start(pki, env={"ROLLGUARD_AGENT_READY_FILE": str(path)})
    one_line_refusal(done, f"--ready-file {path}: its folder {path.parent} does not exist")


def test_a_ready_file_in_a_folder_the_agent_cannot_write_is_exit_2(
    pki: Pki, tmp_path: Path
) -> None:
    folder = read_only_folder(tmp_path)
    if folder is None:
        pytest.skip("no folder here is read-only for this user (root, and /proc/sys writable)")
    path = folder / "kafka-ready"
    one_line_refusal(
        start(pki, "--ready-file", str(path)),
        f"--ready-file {path}: its folder {folder} is not writable",
    )


@pytest.mark.parametrize("kind", ["folder", "file in a file"])
def test_a_ready_file_that_is_a_folder_or_under_a_file_is_exit_2(
    pki: Pki, tmp_path: Path, kind: str
) -> None:
    (tmp_path / "plain").write_text("")
    path = tmp_path if kind == "folder" else tmp_path / "plain" / "ready"
    expected = "is a directory" if kind == "folder" else f"{tmp_path / 'plain'} is not a folder"
    one_line_refusal(start(pki, "--ready-file", str(path)), f"--ready-file {path}: ", expected)


# ---- the server certificate: the command ------------------------------------------------


def test_a_client_certificate_as_the_server_s_is_exit_2_naming_it(pki: Pki) -> None:
    # rollguard-certs issues the roller's certificate for clientAuth only
    done = start(pki, "--cert", str(pki.client_cert), "--key", str(pki.client_key))
    one_line_refusal(
        done,
        f"rollguard-agent: --cert {pki.client_cert}: its extendedKeyUsage allows clientAuth, "
        "not serverAuth, so every TLS client refuses it from a server",
    )


def test_an_expired_certificate_is_a_warning_and_the_probes_are_still_served(
    pki: Pki, tmp_path: Path
) -> None:
    ca = load_ca(pki.ca, pki.ca.with_name("ca.key"))
    expired = issue(ca, "agent", server=True, ips=["127.0.0.1"],
                    not_after=datetime.now(UTC) - timedelta(days=2))  # fmt: skip
    write_pair(expired, tmp_path / "old.crt", tmp_path / "old.key", force=True)
    old = dataclasses.replace(
        pki, server_cert=tmp_path / "old.crt", server_key=tmp_path / "old.key"
    )
    with Agent(old, f"127.0.0.1:{free_port()}") as agent:
        warned = [line for line in agent.output.text().splitlines() if "--cert" in line]
        assert len(warned) == 1 and "WARNING" in warned[0], warned
        assert f"--cert {tmp_path / 'old.crt'}: expired at " in warned[0]
        assert "the agent loads the new one within --cert-reload-interval" in warned[0]
        assert agent.state().status == 0  # curl refuses the certificate, as the warning says
        assert curl(agent.probe + "/v1/ready").status in (204, 503)  # the probe port answers


def test_the_test_pki_s_server_certificate_starts_without_a_word(pki: Pki) -> None:
    with Agent(pki, f"127.0.0.1:{free_port()}") as agent:
        assert "--cert" not in agent.output.text()


# ---- the server certificate: the rules ---------------------------------------------------


KEY_USAGES = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
              "key_agreement", "key_cert_sign", "crl_sign", "encipher_only",
              "decipher_only")  # fmt: skip


def usage(**allowed: bool) -> x509.KeyUsage:
    return x509.KeyUsage(**{name: allowed.get(name, False) for name in KEY_USAGES})


def leaf(
    folder: Path,
    ca: Issued,
    key_usage: x509.KeyUsage | None,
    extended: list[x509.ObjectIdentifier] | None,
    *,
    days: tuple[int, int] = (-1, 30),
) -> Path:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agent")]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW + timedelta(days=days[0]))
        .not_valid_after(NOW + timedelta(days=days[1]))
    )
    if key_usage is not None:
        builder = builder.add_extension(key_usage, critical=True)
    if extended is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    path = folder / f"leaf-{len(list(folder.iterdir()))}.crt"
    path.write_bytes(builder.sign(ca.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    return path


@pytest.fixture
def ca(pki: Pki) -> Issued:
    return load_ca(pki.ca, pki.ca.with_name("ca.key"))


SERVER = [ExtendedKeyUsageOID.SERVER_AUTH]


@pytest.mark.parametrize(
    ("key_usage", "extended", "refused"),
    [
        (usage(digital_signature=True), [ExtendedKeyUsageOID.CLIENT_AUTH],
         "its extendedKeyUsage allows clientAuth, not serverAuth"),
        (usage(digital_signature=True), [ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE],
         "its extendedKeyUsage allows anyExtendedKeyUsage, not serverAuth"),
        (usage(crl_sign=True), SERVER,
         "its keyUsage has none of digitalSignature, keyEncipherment, keyAgreement"),
    ],
)  # fmt: skip
def test_what_no_client_accepts_from_a_server_is_refused(
    tmp_path: Path,
    ca: Issued,
    key_usage: x509.KeyUsage,
    extended: list[x509.ObjectIdentifier],
    refused: str,
) -> None:
    path = leaf(tmp_path, ca, key_usage, extended)
    with pytest.raises(ConfigError) as caught:
        check_server_certificate(path, now=NOW)
    assert str(caught.value) == (
        f"--cert {path}: {refused}, so every TLS client refuses it from a server"
    )


@pytest.mark.parametrize(
    ("key_usage", "extended", "days", "warning"),
    [
        (usage(digital_signature=True), SERVER, (-1, 30), None),
        (None, None, (-1, 30), None),  # no extension restricts it
        (usage(digital_signature=True, key_encipherment=True),
         [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], (-1, 30), None),
        (usage(key_encipherment=True), SERVER, (-1, 30), "its keyUsage lacks digitalSignature"),
        (usage(digital_signature=True), SERVER, (-30, -1), "expired at 2026-05-31T00:00:00Z"),
        (usage(digital_signature=True), SERVER, (1, 30), "not valid before 2026-06-02T00:00:00Z"),
    ],
)  # fmt: skip
def test_what_time_may_cure_or_some_clients_accept_is_a_warning(
    tmp_path: Path,
    ca: Issued,
    key_usage: x509.KeyUsage | None,
    extended: list[x509.ObjectIdentifier] | None,
    days: tuple[int, int],
    warning: str | None,
) -> None:
    path = leaf(tmp_path, ca, key_usage, extended, days=days)
    warnings = check_server_certificate(path, now=NOW)
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith(f"--cert {path}: {warning}")


def test_an_unreadable_certificate_is_named_as_before(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"^certificate {tmp_path / 'none.crt'}: no such file$"):
        check_server_certificate(tmp_path / "none.crt", now=NOW)
