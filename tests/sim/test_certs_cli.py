"""`rollguard-certs`: files, modes, refusals and one-line errors."""

from __future__ import annotations

import ssl
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from rollguard.certs.cli import main

from helpers import BIN


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_a_whole_pki_with_modes_names_and_usages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path)
    assert run(capsys, "init-ca", "--dir", d)[0] == 0
    code, _, _ = run(capsys, "issue-server", "--dir", d, "kafka-0",
                     "--dns", "kafka-0.kafka.prod.svc",
                     "--ip", "127.0.0.1", "--ip", "::1")  # fmt: skip
    assert code == 0
    assert run(capsys, "issue-client", "--dir", d, "roller")[0] == 0

    for key in ("ca.key", "kafka-0.key", "roller.key"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600, key
    server = load(tmp_path / "kafka-0.crt")
    assert isinstance(server.public_key(), ec.EllipticCurvePublicKey)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["kafka-0.kafka.prod.svc"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usage
    client = load(tmp_path / "roller.crt")
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH in usage
    # the chain verifies with OpenSSL as a TLS stack would use it
    context = ssl.create_default_context(cafile=tmp_path / "ca.crt")
    context.load_cert_chain(tmp_path / "roller.crt", tmp_path / "roller.key")

    code, out, _ = run(capsys, "show", str(tmp_path / "kafka-0.crt"))
    assert code == 0
    for text in ("CN=kafka-0", "DNS:kafka-0.kafka.prod.svc", "IP:127.0.0.1", "serverAuth",
                 "ECDSA secp256r1", "expires in 36"):  # fmt: skip
        assert text in out


def test_rsa_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path)
    assert run(capsys, "init-ca", "--dir", d, "--key-type", "rsa", "--rsa-bits", "2048")[0] == 0
    assert run(capsys, "issue-client", "--dir", d, "ops", "--key-type", "rsa")[0] == 0
    key = load(tmp_path / "ops.crt").public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 3072


def test_nothing_is_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path)
    run(capsys, "init-ca", "--dir", d)
    before = (tmp_path / "ca.crt").read_bytes()
    code, _, err = run(capsys, "init-ca", "--dir", d)
    assert code == 2 and "--force" in err and (tmp_path / "ca.crt").read_bytes() == before
    assert run(capsys, "init-ca", "--dir", d, "--force")[0] == 0
    assert (tmp_path / "ca.crt").read_bytes() != before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["issue-server", "agent"], "at least one --dns or --ip"),
        (["issue-server", "agent", "--ip", "300.1.2.3"], "'300.1.2.3' is not an IP address"),
        (["issue-server", "agent", "--dns", "bad..name"], "not a valid DNS name"),
        (["issue-client", "roller", "--dns", "x"], "name only"),
        (["issue-client", "roller", "--days", "0"], "--days: '0' is not a whole number from 1 to"),
        (["issue-client", "roller", "--days", "\u0663"], "--days: '\u0663' is not a whole number"),
        (  # argparse's usage error of the sub-command, as before the settings were declared once
            ["init-ca", "--days", "5x"],
            "rollguard-certs init-ca: argument --days: '5x' is not a whole number (see --help)",
        ),
        (["issue-client", "roller", "--day", "3"], "--day 3; did you mean --days?"),
        (["issue-client", "roller", "--rsa-bits", "\u0662048"], "--rsa-bits: '\u0662048' is not"),
        (["issue-client", "roller", "--cacert", "/nonexistent/ca.crt"], "init-ca"),
        (["issue-client", "roller", "--cacert", "a", "--ca-cert", "b"], "--cacert or --ca-cert"),
        (["show", "/nonexistent.crt"], "no such file"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    run(capsys, "init-ca", "--dir", str(tmp_path))
    if args[0] != "frobnicate":
        args = [*args, "--dir", str(tmp_path)] if args[0] != "show" else args
    try:
        code, _, err = run(capsys, *args)
    except SystemExit as exit_:
        code, (_, err) = int(exit_.code or 0), capsys.readouterr()
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_ca_key_that_does_not_match_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "init-ca", "--dir", str(tmp_path / "a"))
    run(capsys, "init-ca", "--dir", str(tmp_path / "b"))
    code, _, err = run(capsys, "issue-client", "x", "--cacert", str(tmp_path / "a/ca.crt"),
                       "--cakey", str(tmp_path / "b/ca.key"), "--dir", str(tmp_path))  # fmt: skip
    assert code == 2 and "does not belong" in err


def test_the_old_ca_flag_names_still_work_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "init-ca", "--dir", str(tmp_path / "ca"))
    code, _, err = run(capsys, "issue-client", "x", "--ca-cert", str(tmp_path / "ca/ca.crt"),
                       "--ca-key", str(tmp_path / "ca/ca.key"), "--dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    assert "--ca-cert is deprecated; use --cacert" in err
    assert "--ca-key is deprecated; use --cakey" in err
    assert (tmp_path / "x.crt").exists()


def test_console_script_is_installed(tmp_path: Path) -> None:
    done = subprocess.run([str(BIN / "rollguard-certs"), "init-ca", "--dir", str(tmp_path)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ca.crt").exists()


def test_output_json_for_issue_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, _ = run(capsys, "init-ca", "--dir", str(tmp_path), "--output", "json")
    assert code == 0
    written = json.loads(out)
    assert written == {"certificate": str(tmp_path / "ca.crt"), "key": str(tmp_path / "ca.key")}
    code, out, _ = run(capsys, "show", written["certificate"], "--output", "json")
    shown = json.loads(out)
    assert code == 0 and shown["subject"] == "CN=rollguard CA" and shown["CA"] == "yes"
