"""The API port's TLS as a client meets it: an alert that names each refusal (with both event
loops), refusals counted and logged at most once per interval, CRLs checked on every handshake
and reloaded, no session surviving a client-CA rotation, and TLS 1.2 with ECDHE AEAD suites only.
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from test_agent_cli import start

from rollguard.agent.refusals import Refusals
from rollguard.agent.tls_gate import REASONS, classify
from rollguard.certs.pki import Issued, issue, load_ca, write_pair
from rollguard.peers.flood import metric

from helpers import Agent, Broker, Pki, mounted, wait_until

TLS13, TLS12 = ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2


def attempt(
    agent: Agent,
    ca: Path,
    cert: Path | None = None,
    key: Path | None = None,
    *,
    version: ssl.TLSVersion | None = None,
    ciphers: str | None = None,
) -> str:
    """`GET /v1/broker-state` with Python's ssl: the status line, or the error as it reads."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(ca)
    if cert is not None and key is not None:
        context.load_cert_chain(cert, key)
    if version is not None:
        context.minimum_version = context.maximum_version = version
    if ciphers is not None:
        context.set_ciphers(ciphers)
    port = int(agent.api.rsplit(":", 1)[1])
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(b"GET /v1/broker-state HTTP/1.1\r\nhost: localhost\r\n\r\n")
            return tls.recv(4096).split(b"\r\n", 1)[0].decode()
    except ssl.SSLError as exc:
        return f"refused: {exc}"
    except OSError as exc:
        return f"no TLS answer: {exc!r}"


def s_client(agent: Agent, ca: Path, *flags: str) -> str:
    """openssl s_client sending one request; everything it printed."""
    port = agent.api.rsplit(":", 1)[1]
    done = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
         "-CAfile", str(ca), "-ign_eof", *flags],
        input="GET /v1/broker-state HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return done.stdout + done.stderr


def failures(reason: str) -> str:
    return f'rollguard_tls_handshake_failures_total{{reason="{reason}"}}'


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def agent(request: pytest.FixtureRequest, pki: Pki, broker: Broker) -> Iterator[Agent]:
    with Agent(pki, broker.address, "--event-loop", request.param) as running:
        wait_until(lambda: running.state().status == 200, timeout=20, what="a first 200")
        yield running


def issued_by(pki: Pki, name: str, folder: Path, **kwargs: object) -> tuple[Path, Path, int]:
    """A client certificate from the test CA: paths and serial number."""
    issued = issue(load_ca(pki.ca, pki.ca.with_suffix(".key")), name, server=False, **kwargs)  # type: ignore[arg-type]
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    write_pair(issued, cert, key, force=True)
    return cert, key, issued.certificate.serial_number


def write_crl(ca: Issued, revoked: Sequence[int], path: Path, *, days: float = 1) -> None:
    now = datetime.now(UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.certificate.subject)
        .last_update(now - timedelta(minutes=5) + min(timedelta(days=days - 1), timedelta()))
        .next_update(now + timedelta(days=days))
    )
    for serial in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(serial)
            .revocation_date(now - timedelta(minutes=1))
            .build()
        )
    crl = builder.sign(ca.key, hashes.SHA256())
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))


# ---- alerts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "alert"),
    [(TLS13, "alert certificate required"), (TLS12, "alert handshake failure")],
)
def test_a_client_without_a_certificate_is_told_so_by_a_tls_alert(
    agent: Agent, pki: Pki, version: ssl.TLSVersion, alert: str
) -> None:
    assert alert in attempt(agent, pki.ca, version=version)
    assert attempt(agent, pki.ca, pki.client_cert, pki.client_key, version=version) == (
        "HTTP/1.1 200 OK"
    )


@pytest.mark.parametrize("version", [TLS13, TLS12])
def test_a_certificate_from_another_ca_is_told_unknown_ca(
    agent: Agent, pki: Pki, other_pki: Pki, version: ssl.TLSVersion
) -> None:
    result = attempt(agent, pki.ca, other_pki.client_cert, other_pki.client_key, version=version)
    assert "alert unknown ca" in result


def test_an_expired_certificate_is_told_certificate_expired(
    agent: Agent, pki: Pki, tmp_path: Path
) -> None:
    cert, key, _ = issued_by(
        pki, "expired", tmp_path, days=1, now=datetime.now(UTC) - timedelta(days=30)
    )
    assert "alert certificate expired" in attempt(agent, pki.ca, cert, key)


def test_openssl_s_client_names_the_alert(agent: Agent, pki: Pki, other_pki: Pki) -> None:
    assert "alert certificate required" in s_client(agent, pki.ca, "-tls1_3")
    assert "alert unknown ca" in s_client(
        agent, pki.ca, "-tls1_3", "-cert", str(other_pki.client_cert), "-key",
        str(other_pki.client_key),
    )  # fmt: skip
    assert "HTTP/1.1 200 OK" in s_client(
        agent, pki.ca, "-cert", str(pki.client_cert), "-key", str(pki.client_key)
    )


def test_refusals_are_counted_by_reason_and_logged_at_most_once_per_interval(
    agent: Agent, pki: Pki
) -> None:
    counted = metric(agent, failures("no-certificate"))
    logged = len(re.findall(r"refused a TLS handshake .*no-certificate", agent.output.text()))
    for _ in range(15):
        assert "alert" in attempt(agent, pki.ca)
    wait_until(
        lambda: metric(agent, failures("no-certificate")) == counted + 15,
        timeout=10,
        what="15 more refusals counted",
    )
    lines = re.findall(
        r"WARNING rollguard\.agent\.refusals: refused a TLS handshake from 127\.0\.0\.1:\d+: "
        r"no-certificate "
        r"\(the client sent no certificate\)",
        agent.output.text(),
    )
    assert 1 <= len(lines) <= logged + 1  # one line per 10 s at most, naming peer and cause


def test_the_refusal_log_says_how_many_lines_it_left_out(caplog: pytest.LogCaptureFixture) -> None:
    counted: list[str] = []
    now = [100.0]
    refusals = Refusals(counted.append, loud={"unknown-ca"}, interval=10, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="rollguard.agent.refusals"):
        for _ in range(4):
            refusals.record("unknown-ca", "10.0.0.1:4000", "certificate verify failed")
            now[0] += 1
        refusals.record("timeout", "10.0.0.2:4001", "the handshake did not finish in time")
        now[0] += 10
        refusals.record("unknown-ca", "10.0.0.3:4002", "certificate verify failed")
    records = caplog.records
    assert counted == ["unknown-ca"] * 4 + ["timeout", "unknown-ca"]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("WARNING", "refused a TLS handshake from 10.0.0.1:4000: unknown-ca "
                    "(certificate verify failed)"),
        ("INFO", "refused a TLS handshake from 10.0.0.2:4001: timeout "
                 "(the handshake did not finish in time)"),
        ("WARNING", "refused a TLS handshake from 10.0.0.3:4002: unknown-ca "
                    "(certificate verify failed); 3 more refused for this reason since the "
                    "previous line"),
    ]  # fmt: skip


def test_handshake_failures_are_classified_for_people_and_metrics() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_code, verify.verify_message = 9, "certificate is not yet valid"
    assert classify(verify) == (
        "certificate-not-yet-valid",
        "certificate verify failed: certificate is not yet valid",
    )
    no_cert = ssl.SSLError(1, "peer did not return a certificate")
    no_cert.reason = "PEER_DID_NOT_RETURN_A_CERTIFICATE"
    assert classify(no_cert)[0] == "no-certificate"
    old = ssl.SSLError(1, "unsupported protocol")
    old.reason = "UNSUPPORTED_PROTOCOL"
    assert classify(old) == ("protocol", "unsupported protocol")
    slow = ConnectionAbortedError("SSL handshake is taking longer than 5.0 seconds: aborting")
    assert classify(slow)[0] == "timeout"
    assert classify(ConnectionResetError())[0] == "closed"
    assert set(REASONS) >= {classify(e)[0] for e in (verify, no_cert, old, slow)}


# ---- what is offered -------------------------------------------------------------------------


def test_tls_1_2_is_ecdhe_with_aead_only_and_cbc_is_refused(agent: Agent, pki: Pki) -> None:
    client = (pki.client_cert, pki.client_key)
    for suite in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                  "ECDHE-ECDSA-CHACHA20-POLY1305"):  # fmt: skip
        assert attempt(agent, pki.ca, *client, version=TLS12, ciphers=suite) == "HTTP/1.1 200 OK"
    for suite in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384",
                  "ECDHE-ECDSA-AES128-SHA256", "AES128-GCM-SHA256"):  # fmt: skip
        result = attempt(agent, pki.ca, *client, version=TLS12, ciphers=suite)
        assert "alert handshake failure" in result, suite
    assert attempt(agent, pki.ca, *client, version=TLS13) == "HTTP/1.1 200 OK"


# ---- sessions and rotation ------------------------------------------------------------------


def test_no_session_outlives_a_rotation_of_the_client_ca(
    pki: Pki, other_pki: Pki, broker: Broker, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    secret = mounted(pki, live)
    certificate = ("-cert", str(pki.client_cert), "-key", str(pki.client_key))
    tls13, tls12 = tmp_path / "tls13.session", tmp_path / "tls12.session"
    with Agent(secret, broker.address, "--cert-reload-interval", "0.2s") as agent:
        wait_until(lambda: agent.state().status == 200, timeout=20, what="a first 200")
        # TLS 1.3: no ticket is issued, so there is nothing to resume
        first = s_client(agent, pki.ca, "-tls1_3", *certificate, "-sess_out", str(tls13), "-msg")
        assert "HTTP/1.1 200 OK" in first and "NewSessionTicket" not in first
        assert not tls13.exists()  # s_client had no session to save
        # TLS 1.2: no ticket either; a session ID is resumed from the context that made it...
        first = s_client(agent, pki.ca, "-tls1_2", *certificate, "-sess_out", str(tls12), "-msg")
        assert "HTTP/1.1 200 OK" in first and "NewSessionTicket" not in first
        resumed = s_client(agent, pki.ca, "-tls1_2", "-sess_in", str(tls12))
        assert "Reused, TLSv1.2" in resumed and "HTTP/1.1 200 OK" in resumed

        # ... until the files change: the roller's CA is removed
        shutil.copy(other_pki.ca, live / "ca.crt")
        wait_until(
            lambda: metric(agent, 'rollguard_agent_tls_reloads_total{result="ok"}') == 1,
            timeout=10,
            what="the reload",
        )
        again = s_client(agent, pki.ca, "-tls1_2", "-sess_in", str(tls12))
        assert "Reused" not in again and "HTTP/1.1" not in again
        assert "alert handshake failure" in again  # a full handshake, without a certificate
        # with its certificate, too, the old client is refused now
        assert "alert unknown ca" in attempt(agent, pki.ca, pki.client_cert, pki.client_key)


# ---- CRLs ----------------------------------------------------------------------------------


def test_a_revoked_certificate_is_refused_and_a_new_crl_is_applied_without_a_restart(
    pki: Pki, broker: Broker, tmp_path: Path
) -> None:
    authority = load_ca(pki.ca, pki.ca.with_suffix(".key"))
    early = issued_by(pki, "revoked-early", tmp_path)
    late = issued_by(pki, "revoked-late", tmp_path)
    crl = tmp_path / "crl.pem"
    write_crl(authority, [early[2]], crl)
    with Agent(pki, broker.address, "--crl", str(crl), "--cert-reload-interval", "0.2s") as agent:
        wait_until(lambda: agent.state().status == 200, timeout=20, what="a first 200")
        for version in (TLS13, TLS12):
            assert "alert certificate revoked" in attempt(
                agent, pki.ca, *early[:2], version=version
            )
            assert attempt(agent, pki.ca, *late[:2], version=version) == "HTTP/1.1 200 OK"
        write_crl(authority, [early[2], late[2]], crl)
        wait_until(
            lambda: "alert certificate revoked" in attempt(agent, pki.ca, *late[:2]),
            timeout=10,
            what="the new CRL",
        )
        assert attempt(agent, pki.ca, pki.client_cert, pki.client_key) == "HTTP/1.1 200 OK"
        assert metric(agent, failures("certificate-revoked")) >= 3
        assert "certificate-revoked (certificate verify failed: certificate revoked)" in (
            agent.output.text()
        )


def test_crl_files_that_would_lock_clients_out_are_refused_at_start(
    pki: Pki, other_pki: Pki, tmp_path: Path
) -> None:
    ours = load_ca(pki.ca, pki.ca.with_suffix(".key"))
    theirs = load_ca(other_pki.ca, other_pki.ca.with_suffix(".key"))
    write_crl(theirs, [], tmp_path / "theirs.pem")
    write_crl(ours, [], tmp_path / "expired.pem", days=-1)
    write_crl(ours, [], tmp_path / "ours.pem")
    both = tmp_path / "both-cas.crt"
    both.write_bytes(pki.ca.read_bytes() + other_pki.ca.read_bytes())
    (tmp_path / "garbage.pem").write_text("not a CRL")
    cases: list[tuple[list[str], str, str]] = [
        ([str(tmp_path / "missing.pem")], "CRL file", "no such file"),
        ([str(tmp_path / "garbage.pem")], "CRL file", "no PEM CRL in it"),
        ([str(tmp_path / "theirs.pem")], "is not signed by a CA in", ""),
        ([str(tmp_path / "expired.pem")], "expired at", "every certificate it covers"),
        ([str(tmp_path / "ours.pem"), "--cacert", str(both)], "has no CRL of CA", "some other CA"),
    ]
    for (crl, *more), message, detail in cases:
        done = start(pki, "--crl", crl, *more)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and detail in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
