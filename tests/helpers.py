"""Test-only helpers (the installed commands run as people type them, and sent a signal; a clock
the test moves; curl as people run it, silent ports, an HTTPS peer, a real tier that is
missing) and, re-exported, the real processes of `rollguard.peers.processes` that tests,
benchmarks and the demo share."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from rollguard.peers.processes import (
    BIN,
    BROKER_CLASSES,
    BROKER_SOURCE,
    ROOT,
    Agent,
    Broker,
    Curl,
    LineReader,
    Pki,
    build_broker,
    curl,
    free_port,
    make_pki,
    wait_until,
)
from rollguard.peers.served import Served

__all__ = [
    "BIN",
    "BROKER_CLASSES",
    "BROKER_SOURCE",
    "ENVIRONMENT_ONLY",
    "REQUIRE_ALL_TIERS",
    "ROOT",
    "Agent",
    "Broker",
    "Clock",
    "Curl",
    "HttpsPeer",
    "LineReader",
    "Pki",
    "Signalled",
    "SilentJmxPort",
    "answer",
    "build_broker",
    "curl",
    "free_port",
    "inventory",
    "make_pki",
    "missing_tier",
    "mounted",
    "require_all_tiers",
    "rollguard",
    "run",
    "signalled",
    "state_of",
    "until_running",
    "wait_until",
]


# `make test` sets it: every real tier (a real Kafka, Connect, Kubernetes control plane,
# Prometheus, Spark, Chromium for the report page) must then run, and one that cannot fails.
REQUIRE_ALL_TIERS = "ROLLGUARD_REQUIRE_ALL_TIERS"

# The only skips allowed under ROLLGUARD_REQUIRE_ALL_TIERS (tests/conftest.py fails the session
# on any other): what this machine is, not something `make` could install. Each a full match of
# the skip's reason.
ENVIRONMENT_ONLY = (
    # root reads any file whatever its mode: a permission-denied case cannot happen
    re.compile(r"running as root, whom file permissions do not stop from reading"),
    # root writes any folder whatever its mode, and /proc/sys is writable (a privileged container)
    re.compile(r"no folder here is read-only for this user \(root, and /proc/sys writable\)"),
    # mounting needs root and a kernel that lets this container mount (CAP_SYS_ADMIN)
    re.compile(r"cannot mount a small tmpfs here \(the disk-full test's own disk\): .+", re.S),
    # the hard limit of open files is the machine's (or the container's), not ours to raise
    re.compile(r"the hard limit of open files \(\d+\) is below \d+: .+", re.S),
    # an installed agent ships its compiled JMX reader: the compile path cannot be taken there
    re.compile(r"a shipped reader is never compiled"),
)


def require_all_tiers() -> bool:
    """Whether ROLLGUARD_REQUIRE_ALL_TIERS is set (to anything but empty or 0), as `make test`
    sets it."""
    return os.environ.get(REQUIRE_ALL_TIERS, "") not in ("", "0")


def missing_tier(reason: str) -> NoReturn:
    """A real tier cannot run here (a binary, a jar, a wheel `make` provides is absent): under
    `make test` (ROLLGUARD_REQUIRE_ALL_TIERS) a failure saying `reason`, else a skip saying it.
    Every real tier's skip goes through here, never through pytest.skip."""
    __tracebackhide__ = True  # the skip or failure points at its caller, not here
    if require_all_tiers():
        said = f"{reason} ({REQUIRE_ALL_TIERS} is set: every real tier must run)"
        raise pytest.fail.Exception(said, pytrace=False) from None  # the reason says it all
    pytest.skip(reason)


def run(
    argv: Sequence[str],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """One of the installed commands (`argv[0]`: rollguard, rollguard-agent, rollguard-certs,
    rollguard-report, or its path) as people type it, to its end, its output captured; in this
    process's environment without its ROLLGUARD_ variables (a developer's own would change what
    the command reads), with `env` over it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ROLLGUARD_")}
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**clean, **(env or {})})  # fmt: skip


def rollguard(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`rollguard ARGS` (`run`)."""
    return run(["rollguard", *args], env=env, timeout=timeout)


def inventory(
    path: Path, agents: Sequence[str], *, cluster: str | None = None, restart: str = "true"
) -> Path:
    """An inventory at `path` (JSON being YAML): node i named kafka-i, its agent `agents[i]`, its
    restart command `restart` (`{i}` in it: its id), the `cluster` if given."""
    nodes = [
        {"id": i, "name": f"kafka-{i}", "agent": url, "restart": restart.replace("{i}", str(i))}
        for i, url in enumerate(agents)
    ]
    path.write_text(
        json.dumps({"cluster": cluster, "nodes": nodes} if cluster else {"nodes": nodes})
    )
    return path


@dataclass(frozen=True)
class Signalled:
    """How a command ended after a signal: its exit code, its output, and how long it took."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float  # from the signal to its end


def signalled(
    argv: Sequence[str],
    signum: int,
    ready: Callable[[], object],
    *,
    what: str,
    timeout: float = 30,
    ends_within: float = 30,
    env: Mapping[str, str] | None = None,
) -> Signalled:
    """`argv` started, sent `signum` once `ready()` says it is where the test wants it (within
    `timeout`; the command still running then), then waited for up to `ends_within` seconds.
    Killed if the test fails before it ends."""
    process = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        wait_until(lambda: ready() or process.poll() is not None, timeout, 0.1, what)
        assert process.poll() is None, process.communicate()
        sent = time.monotonic()
        process.send_signal(signum)
        out, err = process.communicate(timeout=ends_within)
        return Signalled(process.returncode, out, err, time.monotonic() - sent)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


class Clock:
    """An injected clock (seconds, from `now`): the test moves it, nothing sleeps; an injected
    `sleep` moves it too."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def mounted(pki: Pki, folder: Path) -> Pki:
    """`pki` with the agent's CA, certificate and key copied into `folder`, as a mounted
    Secret: a test rotates them there (the roller's pair stays `pki`'s)."""
    folder.mkdir()
    for name in ("ca.crt", "agent.crt", "agent.key"):
        shutil.copy(pki.ca.parent / name, folder / name)
    return Pki(folder / "ca.crt", folder / "agent.crt", folder / "agent.key",
               pki.client_cert, pki.client_key)  # fmt: skip


def state_of(agent: Agent) -> dict[str, object] | None:
    """The agent's broker-state body when it answers 200, else None."""
    answer = agent.state()
    if answer.status != 200:
        return None
    body = answer.json()
    assert isinstance(body, dict)
    return body


def until_running(agent: Agent, timeout: float = 30) -> list[dict[str, object]]:
    """Every 200 body the agent serves (polled every 0.2 s) until one says RUNNING."""
    bodies: list[dict[str, object]] = []

    def running() -> bool:
        body = state_of(agent)
        if body is not None:
            bodies.append(body)
            return body["brokerState"] == 3
        return False

    wait_until(running, timeout=timeout, interval=0.2, what="RUNNING")
    return bodies


class SilentJmxPort:
    """A TCP port that accepts connections and never says a word: a hung JMX endpoint."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


async def answer(  # type: ignore[no-untyped-def]
    send, status: int, body: object, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """An ASGI app's whole answer: `status`, `headers`, `body` (bytes as they are, anything else
    as JSON)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": data})


async def running_agent(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    """An agent-shaped ASGI app whose broker is always RUNNING: for tests about something else
    than what the agents say (a roll does not start when not one agent answers)."""
    await answer(send, 200, b'{"brokerState": 3}')


class HttpsPeer(Served):
    """An ASGI app served on 127.0.0.1 over mutual TLS, in a background thread (`Served`).

    For test peers that speak HTTP (a flaky agent, a server under a thundering herd); the
    clients under test connect to it exactly as they connect to a real agent.
    """

    def __init__(self, app, pki: Pki, **config: object) -> None:  # type: ignore[no-untyped-def]
        from rollguard.shared.tls import server_context

        self.app = app
        tls = server_context(pki.server_cert, pki.server_key, pki.ca)
        super().__init__(app, "https-peer", tls=tls, **config)
