"""What the Kafka Connect tests share: the command run in-process (fast, its stdout and stderr
captured) or as a process, a peer per worker version. No tests here."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from rollguard.peers.connect import WORKER_VERSIONS, ConnectSim
from rollguard.roller import cli as roller_cli

MM2 = "east->west.MirrorSourceConnector"
CHECKPOINT = "east->west.MirrorCheckpointConnector"
HEARTBEAT = "east->west.MirrorHeartbeatConnector"
FAST_RETRIES = ["--retry-max-retries", "2", "--retry-initial-backoff-ms", "10"]


@dataclass
class Done:
    code: int
    out: str
    err: str

    @property
    def json(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


class Cli:
    """`rollguard ...` in this process: main() with an injected environment."""

    def __init__(self, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture):
        self.capsys = capsys
        self.caplog = caplog

    def __call__(self, *argv: str, env: dict[str, str] | None = None) -> Done:
        self.capsys.readouterr()
        self.caplog.clear()
        with self.caplog.at_level(logging.WARNING):
            code = roller_cli.main(list(argv), env or {})
        captured = self.capsys.readouterr()
        logged = "".join(f"{r.getMessage()}\n" for r in self.caplog.records)
        return Done(code, captured.out, captured.err + logged)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Cli:
    return Cli(capsys, caplog)


@pytest.fixture(params=sorted(WORKER_VERSIONS))
def worker(request: pytest.FixtureRequest) -> Iterator[ConnectSim]:
    """A Connect peer of each version generation (2.8, 3.4, 3.5, current)."""
    with ConnectSim(version=WORKER_VERSIONS[request.param], restart_delay=0.05) as sim:
        yield sim


@pytest.fixture
def connect() -> Iterator[ConnectSim]:
    with ConnectSim(restart_delay=0.0, version=WORKER_VERSIONS["current"]) as sim:
        yield sim


def generation(sim: ConnectSim) -> str:
    return next(k for k, v in WORKER_VERSIONS.items() if v == sim.version)


def changes(sim: ConnectSim) -> list[str]:
    """The requests that change state, as "METHOD path"."""
    return [f"{r.method} {r.path}" for r in sim.requests if r.method != "GET"]
