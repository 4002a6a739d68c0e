"""Every long-running `rollguard` command ends within seconds on SIGINT (exit 3) and SIGTERM.

Each command is started as a real process against peers that accept connections and never say a
word (the worst case: an agent or a Kafka listener behind a hung proxy), with timeouts far longer
than the test. Once the process is blocked on them, one signal must end it within 2 s (plus the
time Python needs to start), whatever it was doing: an await, or a worker thread stuck in
kafka-python's socket calls. The connect and mm2 commands have their own, in test_connect*.py;
the agent's are in test_agent_cli.py.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import BIN, Pki, SilentJmxPort, inventory, signalled

LIMIT = 2.0  # seconds from the signal to the exit


@pytest.fixture
def silent() -> Iterator[SilentJmxPort]:
    port = SilentJmxPort()  # accepts TCP connections, never answers: hung TLS and Kafka peers
    try:
        yield port
    finally:
        port.close()


def commands(tmp_path: Path, pki: Pki, port: int) -> dict[str, list[str]]:
    slow = ["--timeout", "10m", "--retry-max-retries", "0"]
    where = [
        "--inventory",
        str(inventory(tmp_path / "inventory.yaml", [f"https://127.0.0.1:{port}"])),
    ]
    roll = [
        *where,
        *pki.client_flags(),
        *slow,
        "--bootstrap",
        f"127.0.0.1:{port}",
        "--state-dir",
        str(tmp_path / "state"),
        "--roll-id",
        "s1",
    ]
    return {
        "state": ["state", *pki.client_flags(), *slow, f"https://127.0.0.1:{port}"],
        "collect": ["collect", *where, *pki.client_flags(), *slow, "--out", str(tmp_path / "ds")],
        "roll": ["roll", *roll],
        "plan": ["plan", *roll],
    }


@pytest.mark.parametrize("command", ["state", "collect", "roll", "plan"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_command_within_two_seconds(
    command: str, signum: signal.Signals, tmp_path: Path, pki: Pki, silent: SilentJmxPort
) -> None:
    argv = [str(BIN / "rollguard"), *commands(tmp_path, pki, silent.port)[command]]
    # blocked on the silent peer: it has connected, and is still running
    done = signalled(argv, signum, lambda: silent.accepted, what=f"{command} to connect")
    assert done.returncode == 3, done.stderr
    assert done.seconds < LIMIT, f"{command} took {done.seconds:.1f}s to end after {signum.name}"
    assert "Traceback" not in done.stderr, done.stderr
    if command == "roll":
        assert f"interrupted by {signum.name}; resume with --resume s1" in done.stderr
