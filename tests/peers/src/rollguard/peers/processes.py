"""Real processes for tests, benchmarks and the demo: the one port helper (`free_port`), the
machine-wide start-up slots, the Java test broker, the agent, a PKI.

Every real component (a Kafka node, a Connect worker, the control plane's processes,
Prometheus, the test broker, the agent) registers in `spawn`'s one registry; none keeps a
registry or a port helper of its own.

Used from a checkout (editable install): the test broker's source and classes are found
relative to the repository (`tests/broker`, `build/testbroker`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rollguard.certs.pki import issue, make_ca, write_pair
from rollguard.peers.spawn import Stops, stop_process, track

# tests/peers/src/rollguard/peers/processes.py -> the repository
ROOT = Path(__file__).resolve().parents[5]
BROKER_SOURCE = ROOT / "tests" / "broker" / "TestBroker.java"
BROKER_CLASSES = ROOT / "build" / "testbroker"
BIN = Path(sys.executable).parent

T = TypeVar("T")


# ---- ports ---------------------------------------------------------------------------------

_HANDED_OUT: set[int] = set()
_PORTS = threading.Lock()


def free_port() -> int:
    """A free port below Linux's ephemeral range (32768-60999), so that no client connection
    of another test takes it between now and the server's bind; drawn at random from this
    pytest worker's own share of 20000-32000 (several clusters choose at once, one per worker),
    and never one this process handed out before (the JVMs bind theirs only seconds later)."""
    low, high = 20000, 32000
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
        share = (high - low) // count
        low += int(worker[2:]) % count * share
        high = low + share
    rng = random.SystemRandom()
    with _PORTS:
        for _ in range(400):
            port = rng.randrange(low, high)
            if port in _HANDED_OUT:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError(f"no free port in {low}-{high}")


def wait_until(
    probe: Callable[[], T | None], timeout: float, interval: float = 0.05, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


# How many real systems may be starting at once on this machine, across the test workers (and
# any other run of the suite beside them). A JVM's start is a burst of CPU (a Kafka node about
# 4 s of it in its first seconds, class loading and JIT, a cluster's nodes at once), and `make
# test` starts its real-system files first on four workers: four clusters starting together on
# two busy cores starved each other past every deadline (CI, stop 44: a 3-node cluster not made in
# 300 s, a Connect worker's REST resources not up after 120 s). A big start (`HEAVY_START`
# processes or more: the 9-node cluster, the four pods with their agents) takes every slot:
# beside another start on a loaded machine, both missed their deadlines (CI, stop 45).
STARTUP_SLOTS = 2
HEAVY_START = 6
STARTUP_FOLDER = Path(tempfile.gettempdir()) / f"rollguard-startup-{os.getuid()}"


@contextlib.contextmanager
def startup_slot(what: str, timeout: float = 600, *, processes: int = 1) -> Iterator[None]:
    """Hold one of `STARTUP_SLOTS` machine-wide slots (a `flock`ed file each: the kernel lets
    go of it when its process dies, so none is ever stale) while `what` starts, every slot if
    it starts `HEAVY_START` processes or more; waits for them with a deadline.

    A heavy start takes the slots in order and holds those it has while it waits for the rest;
    a light one takes any free slot: neither can wait on the other in a circle."""
    STARTUP_FOLDER.mkdir(mode=0o700, exist_ok=True)
    deadline = time.monotonic() + timeout
    held: list[int] = []
    try:
        if processes >= HEAVY_START:
            for slot in range(STARTUP_SLOTS):
                held.append(_take_slot([slot], what, deadline, timeout))
        else:
            held.append(_take_slot(range(STARTUP_SLOTS), what, deadline, timeout))
        yield
    finally:
        for fd in held:
            os.close(fd)  # closing the only descriptor releases the lock


def _take_slot(slots: Sequence[int], what: str, deadline: float, timeout: float) -> int:
    """The descriptor of the first of `slots` that could be locked, polled until `deadline`."""
    while True:
        for slot in slots:
            fd = os.open(STARTUP_FOLDER / f"slot-{slot}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        if time.monotonic() > deadline:
            raise AssertionError(f"no start-up slot for {what} within {timeout:g}s")
        time.sleep(0.2)


def build_broker() -> Path:
    """Compile the test broker if its classes are missing or older than its source."""
    target = BROKER_CLASSES / "TestBroker.class"
    if not target.exists() or target.stat().st_mtime < BROKER_SOURCE.stat().st_mtime:
        BROKER_CLASSES.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "--release", "17", "-d", str(BROKER_CLASSES), str(BROKER_SOURCE)],
            check=True,
        )
    return BROKER_CLASSES


class LineReader:
    """Collects a process's output lines on a thread, so tests can wait for one with a deadline."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:  # type: ignore[no-untyped-def]
        for raw in iter(stream.readline, ""):
            with self._lock:
                self.lines.append(raw.rstrip("\n"))
        stream.close()

    def text(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        regex = re.compile(pattern)

        def probe() -> re.Match[str] | None:
            with self._lock:
                for line in self.lines:
                    match = regex.search(line)
                    if match:
                        return match
            return None

        return wait_until(probe, timeout, what=f"a line matching {pattern!r}")


class Broker(Stops):
    """The Java test broker: Kafka's MBeans over remote JMX on 127.0.0.1."""

    def __init__(self, *flags: str, port: int = 0) -> None:
        classes = build_broker()
        # The JVM starts between these two moments (wall clock, seconds): what the agent reports
        # as the broker's start time must lie between them.
        self.launched_at = time.time()
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx64m",
                "-XX:+UseSerialGC",
                # A test broker lives seconds to minutes: C1 only, no perf file (less CPU).
                "-XX:TieredStopAtLevel=1",
                "-XX:-UsePerfData",
                "-cp",
                str(classes),
                "TestBroker",
                "--port",
                str(port),
                *flags,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        track(self.process)
        self.output = LineReader(self.process.stdout)
        match = self.output.wait_for(r"JMX_PORT=(\d+) JMX_URL=(\S+)")
        self.ready_at = time.time()
        self.port = int(match.group(1))
        self.url = match.group(2)
        self.address = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.process, 10, signal.SIGKILL)


@dataclass(frozen=True)
class Pki:
    """Paths of a CA, an agent (server) certificate and a roller (client) certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_flags(self) -> list[str]:
        """How rollguard (and curl) are told to present the roller's certificate."""
        return [
            "--cert",
            str(self.client_cert),
            "--key",
            str(self.client_key),
            "--cacert",
            str(self.ca),
        ]


class Agent(Stops):
    """`rollguard-agent` as a real process on ephemeral ports."""

    def __init__(
        self,
        pki: Pki,
        jmx: str,
        *extra: str,
        env: dict[str, str] | None = None,
        interval: str = "0.3",
        running_interval: str = "0.5",
        timeout: str = "4",
        start_timeout: float = 20,
        listen: str = "127.0.0.1:0",
        probe_listen: str = "127.0.0.1:0",
        cert: Path | None = None,
        key: Path | None = None,
    ) -> None:
        """`listen`/`probe_listen`: HOST:PORT (port 0: any); `cert`/`key`: the agent's own
        pair, else the PKI's agent certificate."""
        self.pki = pki
        command = [
            str(BIN / "rollguard-agent"),
            "--listen",
            listen,
            "--probe-listen",
            probe_listen,
            "--cert",
            str(cert or pki.server_cert),
            "--key",
            str(key or pki.server_key),
            "--cacert",
            str(pki.ca),
            "--jmx",
            jmx,
            "--sample-interval",
            interval,
            "--running-interval",
            running_interval,
            "--sample-timeout",
            timeout,
            *extra,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        track(self.process)
        self.output = LineReader(self.process.stdout)
        match = self.output.wait_for(
            r"API listening on https://([\d.]+):(\d+).*http://[\d.]+:(\d+)", start_timeout
        )
        host = listen.rpartition(":")[0]
        probe_host = probe_listen.rpartition(":")[0]
        self.api = f"https://{host}:{match.group(2)}"
        self.probe = f"http://{probe_host}:{match.group(3)}"

    def state(self, path: str = "/v1/broker-state", **kwargs: object) -> Curl:
        return curl(self.api + path, self.pki, **kwargs)  # type: ignore[arg-type]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        stop_process(self.process, 10, sig)
        return self.process.returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if exc[0] is not None:
            print("agent output:\n" + self.output.text())


@dataclass(frozen=True)
class Curl:
    returncode: int
    status: int
    body: str
    seconds: float

    def json(self) -> object:
        import json

        return json.loads(self.body)


def curl(
    url: str,
    pki: Pki | None = None,
    *,
    cert: Path | None = None,
    key: Path | None = None,
    ca: Path | None = None,
    method: str = "GET",
    no_client_cert: bool = False,
    extra: Sequence[str] = (),
) -> Curl:
    """curl as people run it: `curl --cert --key --cacert`; status 0 when no HTTP answer."""
    command = ["curl", "-s", "-S", "--max-time", "10", "-X", method, "-w", "\n%{http_code}"]
    if pki is not None:
        ca = ca or pki.ca
        if not no_client_cert:
            cert, key = cert or pki.client_cert, key or pki.client_key
    if ca is not None:
        command += ["--cacert", str(ca)]
    if cert is not None and key is not None:
        command += ["--cert", str(cert), "--key", str(key)]
    started = time.monotonic()
    done = subprocess.run([*command, *extra, url], capture_output=True, text=True, timeout=30)
    body, _, status = done.stdout.rpartition("\n")
    return Curl(done.returncode, int(status or 0), body, time.monotonic() - started)


def make_pki(folder: Path, name: str = "rollguard test CA") -> Pki:
    ca = make_ca(name)
    server = issue(ca, "agent", server=True, dns=["localhost"], ips=["127.0.0.1"])
    client = issue(ca, "roller", server=False)
    folder.mkdir(parents=True, exist_ok=True)
    write_pair(ca, folder / "ca.crt", folder / "ca.key", force=True)
    write_pair(server, folder / "agent.crt", folder / "agent.key", force=True)
    write_pair(client, folder / "roller.crt", folder / "roller.key", force=True)
    return Pki(
        folder / "ca.crt",
        folder / "agent.crt",
        folder / "agent.key",
        folder / "roller.crt",
        folder / "roller.key",
    )


def raise_priority(nice: int = -5) -> None:
    """This thread (and the threads it makes, which inherit it) at a higher scheduling
    priority where it may (root): an observer, or a harness holding a JVM to a pace, starved by
    the load it watches or stages sees nothing, or lets go."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
