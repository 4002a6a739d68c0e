"""The agent's bounds: connection slots, handshake, header and idle timeouts, header size, and a
flood of 3,000 unauthenticated and 1,000 slow authenticated connections against a real agent.

The flood runs in its own process (`python tests/sim/test_agent_limits.py flood ...`), so that the
honest client measured here does not share an event loop or a GIL with it; `bench/agent_flood.py`
runs the same flood and prints the figures.
"""

from __future__ import annotations

import json
import resource
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rollguard.agent.connections import ConnectionLimiter, Stage
from rollguard.agent.memory import MemoryTrimmer
from rollguard.peers.flood import (
    KeepAlive,
    api_connections,
    flood_result,
    fresh_get,
    metric,
    p,
    probe_get,
    raise_file_limit,
    rss,
    select_ready,
    start_flood,
)

from helpers import BIN, Agent, Broker, Pki, wait_until

TESTS = Path(__file__).resolve().parents[1]

# ---- a flood, and the measurements around it -------------------------------------------------


class Closed(list[str]):
    def closer(self, name: str) -> Callable[[], None]:
        return lambda: self.append(name)


def test_a_full_port_closes_the_oldest_connection_not_yet_answered() -> None:
    closed, drops = Closed(), Closed()
    limiter = ConnectionLimiter(3, on_drop=drops.append)
    silent = limiter.admit(closed.closer("silent"), Stage.HANDSHAKE)
    roller = limiter.admit(closed.closer("roller"), Stage.HANDSHAKE)
    slowloris = limiter.admit(closed.closer("slowloris"), Stage.HANDSHAKE)
    assert silent and roller and slowloris
    limiter.advance(slowloris, Stage.UNPROVEN)  # authenticated, its request head never ends
    limiter.advance(roller, Stage.UNPROVEN)
    limiter.advance(roller, Stage.PROVEN)  # answered: never pushed out
    assert limiter.admit(closed.closer("new 1"), Stage.HANDSHAKE) is not None
    assert limiter.admit(closed.closer("new 2"), Stage.HANDSHAKE) is not None
    assert closed == ["silent", "slowloris"] and drops == ["evicted", "evicted"]
    assert limiter.admit(closed.closer("new 3"), Stage.HANDSHAKE) is not None
    assert closed == ["silent", "slowloris", "new 1"]
    assert [limiter.count(stage) for stage in Stage] == [2, 0, 1] and len(limiter) == 3


def test_when_every_slot_is_proven_a_newcomer_is_refused_and_a_release_frees_one() -> None:
    closed, drops = Closed(), Closed()
    limiter = ConnectionLimiter(2, on_drop=drops.append)
    slots = [limiter.admit(closed.closer(f"c{i}"), Stage.UNPROVEN) for i in range(2)]
    for slot in slots:
        assert slot is not None
        limiter.advance(slot, Stage.PROVEN)
    assert limiter.admit(closed.closer("late"), Stage.HANDSHAKE) is None
    assert drops == ["refused"] and closed == []
    assert slots[0] is not None
    limiter.release(slots[0])
    limiter.release(slots[0])  # idempotent: a connection can end two ways at once
    limiter.advance(slots[0], Stage.UNPROVEN)  # a released slot stays released
    assert len(limiter) == 1 and limiter.admit(closed.closer("late"), Stage.HANDSHAKE)
    assert limiter.close_all(below=Stage.PROVEN) == 1 and closed == ["late"]
    assert [limiter.count(stage) for stage in Stage] == [0, 0, 1]


def test_memory_is_trimmed_during_a_burst_of_drops_and_once_they_stop() -> None:
    trims: list[int] = []
    trimmer = MemoryTrimmer(trim=lambda: trims.append(trimmer.drops), burst=100, quiet=5)
    for _ in range(250):
        trimmer.dropped("evicted")
    assert trims == [100, 200]  # at once, during the burst
    assert not trimmer.check()  # drops came since the last check: the burst may go on
    assert trimmer.check() and trims == [100, 200, 250]  # they stopped: the rest is trimmed
    for _ in range(4):
        trimmer.dropped()
    assert not trimmer.check() and not trimmer.check()  # too few to be worth a trim
    assert trimmer.trims == 3


# ---- the bounds of one connection, on a real agent ----------------------------------------------


@pytest.fixture(scope="module")
def tight(pki: Pki, broker: Broker) -> Iterator[Agent]:
    """An agent with short timeouts and few slots, so the bounds show within seconds."""
    flags = ("--header-timeout", "1s", "--idle-timeout", "1s", "--handshake-timeout", "1s",
             "--max-connections", "4", "--probe-max-connections", "3")  # fmt: skip
    with Agent(pki, broker.address, *flags) as running:
        wait_until(lambda: running.state().status == 200, timeout=20, what="a first 200")
        yield running


def plain_socket(url: str) -> socket.socket:
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_after(sock: socket.socket, send: bytes = b"", every: float = 0.0) -> float:
    """Seconds until the agent closes `sock` (which is then closed here too), sending `send`
    once, or a byte of it every `every` seconds (slowloris)."""
    started = time.monotonic()
    sent = 0
    with sock:
        sock.settimeout(every or 10)
        if send and not every:
            sock.sendall(send)
        while time.monotonic() - started < 10:
            if every and sent < len(send):
                sock.sendall(send[sent : sent + 1])
                sent += 1
            try:
                if not sock.recv(65536):
                    return time.monotonic() - started
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - started
    raise AssertionError("the agent never closed the connection")


@pytest.mark.parametrize("port", ["api", "probe"])
def test_a_connection_that_sends_nothing_or_trickles_its_headers_is_closed(
    tight: Agent, pki: Pki, port: str
) -> None:
    def connect() -> socket.socket:
        if port == "probe":
            return plain_socket(tight.probe)
        return KeepAlive(tight, pki).sock

    dropped = f'rollguard_agent_connections_dropped_total{{port="{port}",reason="header-timeout"}}'
    before = metric(tight, dropped)
    assert 0.9 < closed_after(connect()) < 3
    slowloris = b"GET /v1/ready HTTP/1.1\r\nhost: x\r\nx-a: b\r\nx-c: d\r\n"
    assert 0.9 < closed_after(connect(), slowloris, every=0.2) < 3  # bytes do not extend it
    assert metric(tight, dropped) == before + 2


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(
    tight: Agent, pki: Pki
) -> None:
    client = KeepAlive(tight, pki)
    assert client.get()[0] == 200
    time.sleep(0.5)
    assert client.get()[0] == 200  # within the idle timeout: the same connection
    assert 0.9 < closed_after(client.sock) < 3


@pytest.mark.parametrize("port", ["api", "probe"])
def test_a_header_larger_than_the_limit_is_431_and_the_agent_keeps_serving(
    tight: Agent, pki: Pki, port: str
) -> None:
    with plain_socket(tight.probe) if port == "probe" else KeepAlive(tight, pki).sock as sock:
        sock.sendall(b"GET /v1/ready HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 20000 + b"\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
    assert json.loads(body) == {
        "error": "header-too-large",
        "message": "the request line and headers exceed 8192 bytes",
    }
    # just under the limit is served
    with KeepAlive(tight, pki) as client:
        big = b"GET /v1/broker-state HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 7000
        client.sock.sendall(big + b"\r\n\r\n")
        assert client.sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
    assert probe_get(tight, "/v1/ready")[0] == 204
    name = f'rollguard_agent_connections_dropped_total{{port="{port}",reason="header-too-large"}}'
    assert metric(tight, name) >= 1


def test_a_full_port_keeps_its_answered_connection_and_drops_the_silent_ones(
    tight: Agent, pki: Pki
) -> None:
    roller = KeepAlive(tight, pki)
    assert roller.get()[0] == 200
    silent = [plain_socket(tight.api) for _ in range(20)]
    time.sleep(0.2)
    assert roller.get()[0] == 200  # the answered connection kept its slot
    roller.close()
    closed = 0
    for sock in silent:  # all but the newest few were closed to make room
        sock.settimeout(2)
        try:
            closed += sock.recv(1) == b""
        except TimeoutError:
            pass
        except OSError:
            closed += 1
        sock.close()
    assert closed >= 20 - 3
    assert fresh_get(tight, pki)[0] == 200  # a newcomer gets a slot
    held = api_connections(tight)
    assert held <= 4
    assert (
        metric(tight, 'rollguard_agent_connections_dropped_total{port="api",reason="evicted"}')
        >= 17
    )


def test_limits_that_do_not_fit_the_open_file_limit_exit_2(pki: Pki) -> None:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    done = subprocess.run(
        [str(BIN / "rollguard-agent"), "--cert", str(pki.server_cert), "--key",
         str(pki.server_key), "--cacert", str(pki.ca), "--listen", "127.0.0.1:0",
         "--probe-listen", "127.0.0.1:0", "--max-connections", "1000"],
        capture_output=True, text=True, timeout=30, preexec_fn=low_limit,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "rollguard-agent: --max-connections 1000 and --probe-max-connections 32 need 1096 open "
        "files, but the limit is 256 (ulimit -n)"
    )


# ---- the flood -----------------------------------------------------------------------------

# What the agent may use above its own resting size while 4,000 connections come at it, and
# keep once they are gone (measured: about 5 MB and 1.5 MB; before these bounds: 298 MB for
# 3,000 connections, never given back).
FLOOD_RSS_BOUND = 25 * 2**20
AFTER_RSS_BOUND = 8 * 2**20


@pytest.mark.alone  # latency bounds: run where no other test competes for the CPU
def test_a_flood_of_4000_connections_leaves_memory_bounded_and_honest_clients_served(
    pki: Pki, broker: Broker
) -> None:
    plain, slow = 3000, 1000
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < plain + slow + 512:
        pytest.skip(
            f"the hard limit of open files ({hard}) is below {plain + slow + 512}: "
            f"the flood's {plain + slow} connections and the test's own files need that many"
        )
    raise_file_limit(hard if hard != resource.RLIM_INFINITY else plain + slow + 512)
    with Agent(pki, broker.address) as agent:  # the default limits
        pid = agent.process.pid
        wait_until(lambda: agent.state().status == 200, timeout=20, what="a first 200")
        roller = KeepAlive(agent, pki)
        for _ in range(10):  # warm up: the code paths and buffers every request uses
            fresh_get(agent, pki)
            for _ in range(20):
                roller.get()
        resting = rss(pid)
        flooding = start_flood(agent, pki, plain=plain, slow=slow, hold=10)
        assert flooding.stdout is not None
        latencies: list[float] = []
        fresh: list[float] = []
        probes: list[float] = []
        peak, held, all_in = 0, 0.0, False
        while flooding.poll() is None:
            peak = max(peak, rss(pid))
            status, seconds = roller.get()
            assert status == 200
            latencies.append(seconds)
            if len(latencies) % 10 == 0:
                for path, expected in (("/v1/ready", 204), ("/metrics", 200)):
                    status, seconds = probe_get(agent, path)
                    assert status == expected
                    probes.append(seconds)
                held = max(held, api_connections(agent))
                if all_in or select_ready(flooding):
                    all_in = True  # every flood connection is made: a newcomer must get in
                    status, seconds = fresh_get(agent, pki)
                    assert status == 200
                    fresh.append(seconds)
            time.sleep(0.02)
        roller.close()
        result = flood_result(flooding, timeout=60)
        assert (result.plain_opened, result.slow_authenticated) == (plain, slow), result
        assert result.closed_by_agent >= plain + slow - 64  # all but what the limit holds

        assert peak - resting < FLOOD_RSS_BOUND, f"{(peak - resting) / 2**20:.1f} MB"
        assert held <= 64
        # the roller's keep-alive requests, all through the flood
        assert statistics.median(latencies) < 0.005 and p(latencies, 0.99) < 0.1
        assert max(latencies) < 1.0, f"{max(latencies):.3f}s (the roller's timeout is 5 s)"
        assert fresh and statistics.median(fresh) < 0.05 and max(fresh) < 1.0
        assert max(probes) < 1.0
        wait_until(
            lambda: rss(pid) - resting < AFTER_RSS_BOUND,
            timeout=5,
            what=f"memory to come back within {AFTER_RSS_BOUND / 2**20:.0f} MB of rest",
        )
