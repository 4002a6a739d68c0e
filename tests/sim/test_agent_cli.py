"""`rollguard-agent` start-up: bad settings exit 2 with one line, and nothing is left listening."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from helpers import BIN, Agent, Broker, Pki, free_port, wait_until


def start(
    pki: Pki, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "rollguard-agent"), "--cert", str(pki.server_cert),
               "--key", str(pki.server_key), "--cacert", str(pki.ca),
               "--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0", *args]  # fmt: skip
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ROLLGUARD_AGENT_")}
    return subprocess.run(command, capture_output=True, text=True, timeout=30,
                          env={**clean, **(env or {})})  # fmt: skip


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--bogus"], {}, "unrecognized arguments: --bogus"),
        (["--listen", "nowhere"], {}, "--listen: 'nowhere' is not HOST:PORT"),
        ([], {"ROLLGUARD_AGENT_SAMPLE_TIMEOUT": "soon"}, "ROLLGUARD_AGENT_SAMPLE_TIMEOUT"),
        (["--sample-interval", "0"], {}, "--sample-interval: '0' is not a positive number"),
        (["--jmx", "host-without-port"], {}, "--jmx: 'host-without-port' is neither"),
        (["--max-sample-age", "5"], {}, "--max-sample-age 5 must be at least"),
        (
            ["--max-sample-age", "14", "--jmx-backend", "jmxquery"],
            {},
            "--max-sample-age 14 must be at least --running-interval plus --sample-timeout (15)",
        ),
        (["--java", "/no/such/java"], {}, "--java: '/no/such/java' is not an executable"),
        (["--jmx-backend", "jpype"], {}, "--jmx-backend: 'jpype' is not one of persistent"),
        (["--event-loop", "trio"], {}, "--event-loop: 'trio' is not uvloop or asyncio"),
        (["--jmx-credentials-file", "/no/such/file"], {}, "--jmx-credentials-file /no/such/file"),
        (["--cert", "/no/such.crt"], {}, "certificate /no/such.crt: no such file"),
        (["--log-level", "loud"], {}, "--log-level: 'loud' is not one of"),
        (["--listen", "256.0.0.1:8443"], {}, "--listen 256.0.0.1:8443: cannot"),
        (["--retry-jitter-factor", "2"], {}, "--retry-jitter-factor 2 must be in [0, 1]"),
        ([], {"ROLLGUARD_AGENT_RETRY_MAX_BACKOFF_MS": "100"}, "must not exceed --retry-max"),
        # every number: ASCII digits, finite, in its range
        (["--max-connections", "0"], {}, "--max-connections: '0' is not a whole number from 1"),
        (
            ["--max-connections", "\u0666\u0664"],
            {},
            "--max-connections: '\u0666\u0664' is not a whole number",
        ),
        ([], {"ROLLGUARD_AGENT_MAX_CONNECTIONS": "1e3"}, "MAX_CONNECTIONS: '1e3' is not a whole"),
        (["--probe-max-connections", "9" * 30], {}, "is not a whole number from 1 to 10000"),
        (["--handshake-timeout", "inf"], {}, "--handshake-timeout: 'inf' is not a duration"),
        ([], {"ROLLGUARD_AGENT_HEADER_TIMEOUT": "nan"}, "HEADER_TIMEOUT: 'nan' is not a duration"),
        (["--idle-timeout", "2h"], {}, "--idle-timeout: '2h' is out of range"),
        (["--max-header-bytes", "100"], {}, "--max-header-bytes: '100' is not a whole number"),
        (["--timeline-retention", "inf"], {}, "'inf' is not a duration"),
        (
            ["--timeline-segment-bytes", "\u0661\u0660\u0662\u0664"],
            {},
            "--timeline-segment-bytes: '\u0661\u0660\u0662\u0664' is not",
        ),
        (["--sample-interval", "1e-9"], {}, "--sample-interval: '1e-9' is not a duration"),
        (["--listen", "127.0.0.1:\u0668\u0660"], {}, "--listen: '127.0.0.1:\u0668\u0660': port"),
        (["--jmx", "h:\u0669\u0669"], {}, "--jmx: 'h:\u0669\u0669' is neither"),
        (
            ["--retry-max-retries", "\u0665"],
            {},
            "--retry-max-retries: '\u0665' is not a whole number",
        ),
        (["--node-id", ""], {}, "--node-id: '' is not a node name"),
        (["--crl", "/no/such.crl"], {}, "CRL file /no/such.crl: no such file"),
    ],
)
def test_bad_settings_exit_2_with_one_line_naming_them(
    pki: Pki, args: list[str], env: dict[str, str], message: str
) -> None:
    done = start(pki, *args, env=env)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_key_of_another_certificate_is_named(pki: Pki, other_pki: Pki) -> None:
    done = start(pki, "--key", str(other_pki.server_key))
    assert done.returncode == 2
    assert f"private key {other_pki.server_key} does not belong to certificate" in done.stderr


def test_an_unreadable_ca_is_named(pki: Pki, tmp_path: Path) -> None:
    done = start(pki, "--cacert", str(tmp_path))
    assert done.returncode == 2 and f"CA bundle {tmp_path}: is a directory" in done.stderr


def test_required_tls_files_are_asked_for() -> None:
    done = subprocess.run([str(BIN / "rollguard-agent")], capture_output=True, text=True)
    assert done.returncode == 2 and "--cert is required" in done.stderr


def test_a_port_in_use_exits_2_and_leaves_nothing_listening(pki: Pki) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        api = free_port()
        done = start(pki, "--listen", f"127.0.0.1:{api}", "--probe-listen", f"127.0.0.1:{busy}")
        assert done.returncode == 2
        assert f"--probe-listen 127.0.0.1:{busy}: port {busy} is already in use" in done.stderr
    # the API port was bound before the probe port failed; it must have been released
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", api)) != 0


def test_every_setting_can_come_from_the_environment(pki: Pki) -> None:
    with Broker("--state", "3") as broker:
        env = {
            "ROLLGUARD_AGENT_JMX": broker.address,
            "ROLLGUARD_AGENT_SAMPLE_INTERVAL": "0.3",
            "ROLLGUARD_AGENT_LOG_FORMAT": "json",
        }
        with Agent(pki, broker.address, env=env) as agent:
            wait_until(lambda: agent.state().status == 200, timeout=20, what="a 200")
            assert '"level": "info"' in agent.output.text()
    # A flag on the command line wins over the environment: the bad variable is never read,
    # and the first error is the one of a later setting.
    done = start(pki, "--sample-timeout", "2", "--log-format", "xml",
                 env={"ROLLGUARD_AGENT_SAMPLE_TIMEOUT": "soon"})  # fmt: skip
    assert done.returncode == 2
    assert "--log-format" in done.stderr and "SAMPLE_TIMEOUT" not in done.stderr


def test_jmxquery_with_a_password_warns_once_and_names_the_persistent_backend(
    pki: Pki, tmp_path: Path
) -> None:
    secret = tmp_path / "jmx"
    secret.write_text("monitor s3cret\n")
    with Agent(pki, f"127.0.0.1:{free_port()}", "--jmx-backend", "jmxquery",
               "--jmx-credentials-file", str(secret)) as agent:  # fmt: skip
        agent.output.wait_for("API listening")
        text = agent.output.text()
    assert text.count("jmxquery's JMX reader takes the password only as a command-line") == 1
    assert "the persistent backend (the default) gives it to its JVM on stdin" in text
    assert "s3cret" not in text


def test_the_pre_0_2_flag_and_variable_names_still_work_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from rollguard.agent import config
    from rollguard.shared.cli import Parser

    parser = config.build_parser(Parser(prog="rollguard-agent"))
    args = parser.parse_args(
        ["--tls-cert", "c.pem", "--tls-key", "k.pem", "--timeline-retention-hours", "24"]
    )
    with caplog.at_level("WARNING"):
        settings = config.load(args, {"ROLLGUARD_AGENT_TLS_CA": "ca.pem"})
    assert (settings.tls_cert, settings.tls_key, settings.tls_ca) == (
        Path("c.pem"),
        Path("k.pem"),
        Path("ca.pem"),
    )
    assert settings.timeline_retention_seconds == 24 * 3600
    warnings = caplog.text
    assert "--tls-cert is deprecated; use --cert c.pem" in warnings
    assert "ROLLGUARD_AGENT_TLS_CA is deprecated; use ROLLGUARD_AGENT_CACERT=ca.pem" in warnings
    assert "--timeline-retention-hours is deprecated; use --timeline-retention 24h" in warnings
    both = parser.parse_args(["--cert", "a.pem", "--tls-cert", "b.pem"])
    with pytest.raises(config.ConfigError, match="give --cert or --tls-cert, not both"):
        config.load(both, {})
