"""The roll's Prometheus metrics (`--metrics-listen`): what each says, fed the roll's events, its
journal and its lease; the bounded server; and a real roll scraped while it waits for a node in
log recovery."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rollguard.peers.cluster import NodePlan, ProcessCluster
from rollguard.peers.commandline import rollguard_args
from rollguard.peers.harness import InventoryRoll
from rollguard.roller.model import AgentAnswer, AgentReport, Node, PlatformView, Role
from rollguard.roller.roll.metrics import RollMetrics, WatchedLease
from rollguard.roller.roll.metrics_server import MetricsServer
from rollguard.roller.roll.node.actions import FORCE, Defer, DeferKind, Restart
from rollguard.roller.roll.node.before import decide
from rollguard.roller.roll.node.budgets import RecoveryTracker
from rollguard.roller.roll.node.outcome import Seen
from rollguard.roller.roll.node.record import How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.node.step import restarted, step
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.rules.safety import Blocker
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.roller.roll.stores.journal import RollRecord
from rollguard.roller.roll.stores.lease import LeaseLost
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.converters import HostPort
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, RecoveryProgress

from helpers import Clock, Pki, inventory, run, wait_until

Sample = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Sample:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(sample: Sample, name: str, **labels: str) -> float | None:
    return sample.get((name, frozenset(labels.items())))


def named(sample: Sample, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in sample.items() if n == name}


def fed() -> tuple[RollMetrics, EventLog, Clock]:
    clock = Clock(1000.0)
    metrics = RollMetrics("r1", "prod", clock=clock)
    events = EventLog(None, "r1", cluster="prod")  # no file: the listeners hear every event
    events.listeners.append(metrics.on_event)
    return metrics, events, clock


def scrape(metrics: RollMetrics) -> Sample:
    return parse(metrics.render().decode())


# ---- what each metric says ----------------------------------------------------------------


def rolled(metrics: RollMetrics, *records: NodeRecord) -> RollRecord:
    """The roll's record with these nodes', as the roll saves it (the loop keeps its nodes up
    to date: a test replaces them as the loop does)."""
    roll = RollRecord("r1", "2026-01-01T00:00:00.000Z")
    roll.nodes.update({r.name: r for r in records})
    metrics.saved(roll)
    return roll


def test_a_nodes_wait_is_its_record_s_with_since_when_and_ends_when_it_is_back() -> None:
    metrics, events, clock = fed()
    events.write(None, Event.ROLL_START)
    deferred = Waiting("availability", "orders-0 at min ISR", clock.now, deferral=True)
    roll = rolled(
        metrics,
        NodeRecord("kafka-0", Phase.PENDING, waiting=deferred),
        NodeRecord("kafka-1", Phase.WAITING, waiting=Waiting("not-ready", "not ready", clock.now)),
    )
    clock.now += 30
    tracker = RecoveryTracker(600, 3600, started=clock.now - 10)
    tracker = tracker.observe(clock.now - 10, 41, 720).observe(clock.now, 40, 700)
    recovering = Waiting("recovery", "kafka-1 is performing log recovery", clock.now)
    roll.nodes["kafka-1"] = replace(
        roll.nodes["kafka-1"], phase=Phase.RECOVERING, waiting=recovering, recovery=tracker
    )
    clock.now += 10
    seen = scrape(metrics)
    assert named(seen, "rollguard_roll_wait_seconds") == {
        frozenset({("node", "kafka-0"), ("reason", "availability")}): 40.0,
        frozenset({("node", "kafka-1"), ("reason", "recovery")}): 10.0,
    }
    assert value(seen, "rollguard_roll_waiting_nodes", reason="recovery") == 1
    assert value(seen, "rollguard_roll_waiting_nodes", reason="availability") == 1
    assert value(seen, "rollguard_roll_waiting_nodes", reason="quorum") == 0
    assert value(seen, "rollguard_roll_nodes", state="waiting") == 2
    assert value(seen, "rollguard_roll_recovery_remaining_logs", node="kafka-1") == 40
    assert value(seen, "rollguard_roll_recovery_remaining_segments", node="kafka-1") == 700
    eta = tracker.eta()
    assert eta == 400.0  # a log in 10 s, 40 left
    assert value(seen, "rollguard_roll_recovery_eta_seconds", node="kafka-1") == eta
    assert value(seen, "rollguard_roll_elapsed_seconds") == 40
    assert value(seen, "rollguard_roll_info", roll_id="r1", cluster="prod") == 1
    # kafka-0 restarted, then back: no wait left; kafka-1 deferred by the quorum
    restarting = Waiting("restart", "waiting for its new process", clock.now)
    roll.nodes["kafka-0"] = NodeRecord(
        "kafka-0", Phase.RESTARTING, how=How.RESTART, waiting=restarting
    )
    clock.now += 5
    assert (
        value(scrape(metrics), "rollguard_roll_wait_seconds", node="kafka-0", reason="restart") == 5
    )
    roll.nodes["kafka-0"] = NodeRecord("kafka-0", Phase.DONE, how=How.RESTART)
    quorum = Waiting("quorum", "the quorum", clock.now, deferral=True)
    roll.nodes["kafka-1"] = NodeRecord("kafka-1", Phase.PENDING, waiting=quorum)
    seen = scrape(metrics)
    assert named(seen, "rollguard_roll_wait_seconds") == {
        frozenset({("node", "kafka-1"), ("reason", "quorum")}): 0.0
    }
    assert named(seen, "rollguard_roll_recovery_remaining_segments") == {}


def test_restarts_forced_ones_and_deferrals_are_counted_once_a_change() -> None:
    metrics, events, _ = fed()
    events.write("kafka-0", Event.DEFER, "orders-0", kind=DeferKind.AVAILABILITY)
    events.repeat("kafka-0", Event.DEFER, "orders-0", kind=DeferKind.AVAILABILITY)
    events.write("kafka-0", Event.DEFER, "orders-1", kind=DeferKind.AVAILABILITY)
    events.write("kafka-2", Event.DEFER, "voters", kind=DeferKind.QUORUM)
    events.write("kafka-2", Event.DEFER, "held in a batch")  # no kind: other
    events.write("kafka-3", Event.DEFER, "from a newer roller", kind="something-new")
    events.write("kafka-0", Event.RESTART, "restart")
    events.write("kafka-1", Event.RESTART, f"{FORCE}: not ready after 300s", forced=True)
    events.write("kafka-2", Event.RESTART, "batch 1", forced=False)
    seen = scrape(metrics)
    assert value(seen, "rollguard_roll_restarts_total") == 3
    assert value(seen, "rollguard_roll_forced_restarts_total") == 1
    assert named(seen, "rollguard_roll_deferrals_total") == {
        frozenset({("reason", "availability")}): 2,
        frozenset({("reason", "quorum")}): 1,
        frozenset({("reason", "admin-api")}): 0,
        frozenset({("reason", "gate")}): 0,
        frozenset({("reason", "recovering-peer")}): 0,
        frozenset({("reason", "other")}): 2,  # never a label value the roller does not know
    }


def test_every_forced_restart_reason_begins_with_force() -> None:
    node = Node(1, "kafka-1", frozenset({Role.BROKER}), "https://kafka-1")
    views = [
        PlatformView(exists=True, ready=False, up_to_date=False, stuck="CrashLoopBackOff"),
        PlatformView(exists=True, ready=False, up_to_date=False, process_gone=True),
        PlatformView(exists=True, ready=False, up_to_date=False),
    ]
    forced = [decide(node, v, None, waited=400, timeout=300, force_unknown=True) for v in views]
    assert all(isinstance(a, Restart) and a.force for a in forced)
    assert all(isinstance(a, Restart) and a.reason.startswith(FORCE) for a in forced)
    plain = decide(node, PlatformView(exists=True, ready=True, up_to_date=False), None)
    assert not (isinstance(plain, Restart) and plain.reason.startswith(FORCE))


@pytest.mark.parametrize(
    ("subjects", "kind"),
    [
        ((), DeferKind.OTHER),
        (("orders-3",), DeferKind.AVAILABILITY),
        (("quorum", "orders-3"), DeferKind.QUORUM),
        (("cluster",), DeferKind.ADMIN_API),
        (("gate",), DeferKind.GATE),
    ],
)
def test_a_deferrals_kind_is_its_first_blockers(subjects: tuple[str, ...], kind: DeferKind) -> None:
    assert Defer("why", tuple(Blocker("why", s) for s in subjects)).kind is kind


def test_a_recovery_after_a_restart_ends_back_in_the_restart_s_own_wait() -> None:
    """A node's record, moved by the roll's own step: restarted at 1000, in log recovery by its
    agent's word, then out of it: its wait is the restart's again, since the restart."""
    metrics, _, clock = fed()
    node = Node(1, "kafka-1", frozenset({Role.BROKER}), "https://kafka-1:8443")
    settings = RollSettings()
    roll = rolled(metrics, NodeRecord("kafka-1", Phase.PENDING))
    record = restarted(roll.nodes["kafka-1"], node, settings, clock.now, "old")
    roll.nodes["kafka-1"] = record
    assert (
        value(scrape(metrics), "rollguard_roll_wait_seconds", node="kafka-1", reason="restart") == 0
    )
    new = PlatformView(exists=True, ready=False, up_to_date=True, instance="new")

    def look(answer: AgentAnswer) -> None:
        outcome = step(roll.nodes["kafka-1"], Seen(node, clock.now, "", new, answer), settings)
        roll.nodes["kafka-1"] = outcome.record

    clock.now += 5
    look(
        AgentReport(
            node.agent_url or "", BrokerStateReport(BrokerState.RECOVERY, RecoveryProgress(3, 9))
        )
    )
    seen = scrape(metrics)
    assert value(seen, "rollguard_roll_waiting_nodes", reason="recovery") == 1
    assert value(seen, "rollguard_roll_recovery_remaining_logs", node="kafka-1") == 3
    clock.now += 5
    look(AgentReport(node.agent_url or "", BrokerStateReport(BrokerState.RUNNING, None)))
    seen = scrape(metrics)
    assert named(seen, "rollguard_roll_wait_seconds") == {
        frozenset({("node", "kafka-1"), ("reason", "restart")}): 10.0
    }


def test_node_states_come_from_the_journal_as_saved_a_resumed_rolls_too() -> None:
    metrics, _, _ = fed()
    metrics.follow([f"kafka-{i}" for i in range(5)], budget=lambda name: 600.0)
    record = RollRecord("r1", "2026-01-01T00:00:00.000Z")
    at = "2026-01-01T00:00:00.000Z"
    record.nodes.update(
        {
            "kafka-0": NodeRecord("kafka-0", Phase.DONE, at, how=How.RESTART),
            "kafka-1": NodeRecord("kafka-1", Phase.LEFT_OUT, at),
            "kafka-2": NodeRecord("kafka-2", Phase.RESTARTING, at, how=How.RESTART),
            "kafka-3": NodeRecord("kafka-3", Phase.HELD, at),
        }
    )
    metrics.saved(record)
    seen = scrape(metrics)
    states = {dict(k)["state"]: v for k, v in named(seen, "rollguard_roll_nodes").items()}
    assert states == {
        "total": 5,
        "done": 1,
        "configured": 0,
        "skipped": 1,
        "held": 1,
        "pending": 2,
        "restarting": 1,
        "waiting": 0,
    }


def test_the_recovery_budget_and_the_prediction_are_shown() -> None:
    metrics, events, clock = fed()
    metrics.follow(["kafka-1"], budget=lambda name: 450.0)
    events.write(None, Event.ROLL_PREDICTED, "3 restarts", seconds=420.5, upperSeconds=700.0)
    recovering = Waiting("recovery", "kafka-1 is performing log recovery", clock.now)
    rolled(metrics, NodeRecord("kafka-1", Phase.RECOVERING, waiting=recovering))
    seen = scrape(metrics)
    assert value(seen, "rollguard_roll_recovery_budget_seconds", node="kafka-1") == 450
    assert value(seen, "rollguard_roll_predicted_seconds") == 420.5
    assert value(seen, "rollguard_roll_predicted_upper_seconds") == 700
    assert value(seen, "rollguard_roll_elapsed_seconds") is None  # not started yet


def test_the_canary_s_figures_are_shown_by_window() -> None:
    metrics, events, _ = fed()
    assert named(scrape(metrics), "rollguard_roll_canary_sends") == {}  # no --canary
    events.write(None, Event.CANARY_TOPIC, "rollguard-canary: created", partitions=3)
    events.write(
        None,
        Event.CANARY_BASELINE,
        "",
        sent=50,
        failed=0,
        p50Ms=2.0,
        p99Ms=8.0,
        maxMs=9.0,
        e2eP50Ms=3.0,
        e2eP99Ms=9.0,
        e2eMaxMs=10.0,
        longestGapS=0.12,
    )
    events.write("kafka-0", Event.RESTART, "")
    events.write(
        "kafka-0",
        Event.CANARY_COST,
        "",
        sent=180,
        failed=2,
        p50Ms=6.0,
        p99Ms=700.0,
        maxMs=1500.0,
        e2eP50Ms=7.0,
        e2eP99Ms=710.0,
        e2eMaxMs=1510.0,
        longestGapS=0.9,
    )
    events.write("kafka-1", Event.CANARY_COST, "", sent=10, failed=10, longestGapS=1.0)
    seen = scrape(metrics)
    send = "rollguard_roll_canary_send_seconds"
    assert value(seen, send, window="baseline", quantile="0.99") == 0.008
    assert value(seen, send, window="kafka-0", quantile="0.5") == 0.006
    assert value(seen, send, window="kafka-0", quantile="1") == 1.5
    assert (
        value(seen, "rollguard_roll_canary_end_to_end_seconds", window="kafka-0", quantile="0.99")
        == 0.71
    )
    # Nothing acknowledged: no latency, only its failures.
    assert value(seen, send, window="kafka-1", quantile="0.5") is None
    assert named(seen, "rollguard_roll_canary_failed_sends") == {
        frozenset({("window", "baseline")}): 0,
        frozenset({("window", "kafka-0")}): 2,
        frozenset({("window", "kafka-1")}): 10,
    }
    assert value(seen, "rollguard_roll_canary_sends", window="kafka-0") == 180
    assert value(seen, "rollguard_roll_canary_consumer_gap_seconds", window="kafka-1") == 1.0
    assert value(seen, "rollguard_roll_restarts_total") == 1  # the roll's own, as before


def test_gates_are_closed_until_every_one_is_open_and_the_end_clears_the_waits() -> None:
    metrics, events, clock = fed()
    events.write(None, Event.ROLL_START)
    events.write(None, Event.GATE_CLOSED, "window", gate="window", name="Mon-Fri 22:00-05:00")
    events.write(None, Event.GATE_CLOSED, "paused", gate="pause", name="pause")
    unreadable = Waiting("agent-unreachable", "its agent cannot be read", clock.now)
    rolled(metrics, NodeRecord("kafka-1", Phase.WAITING, waiting=unreadable))
    seen = scrape(metrics)
    assert named(seen, "rollguard_roll_gate_closed") == {
        frozenset({("gate", "window"), ("name", "Mon-Fri 22:00-05:00")}): 1,
        frozenset({("gate", "pause"), ("name", "pause")}): 1,
    }
    assert value(seen, "rollguard_roll_waiting_nodes", reason="agent-unreachable") == 1
    events.write(None, Event.GATE_OPEN, "every gate is open")
    clock.now += 100
    events.write(None, Event.ROLL_COMPLETED, seconds=42.0)
    clock.now += 100
    seen = scrape(metrics)
    assert named(seen, "rollguard_roll_gate_closed") == {}
    assert named(seen, "rollguard_roll_wait_seconds") == {}
    assert value(seen, "rollguard_roll_elapsed_seconds") == 42  # the roll's own figure


class FakeLease:
    holder = "me:1"
    duration = 30.0
    paused = ""

    def __init__(self) -> None:
        self.lose = False

    def describe(self) -> str:
        return "a lease"

    async def read_paused(self) -> str:
        return ""

    async def acquire(self) -> None:
        pass

    async def renew(self) -> None:
        if self.lose:
            raise LeaseLost("taken over")

    async def release(self) -> None:
        pass


def test_the_lease_is_held_from_its_taking_while_renewed_until_lost_or_given_up() -> None:
    clock, inner = Clock(1000.0), FakeLease()
    lease = WatchedLease(inner, clock=clock)

    async def life() -> list[bool]:
        seen = [lease.held]
        await lease.acquire()
        seen.append(lease.held)
        clock.now += 31  # no renewal for its whole duration: another may hold it
        seen.append(lease.held)
        await lease.renew()
        seen.append(lease.held)
        inner.lose = True
        with pytest.raises(LeaseLost):
            await lease.renew()
        seen.append(lease.held)
        await lease.acquire()
        await lease.release()
        seen.append(lease.held)
        return seen

    assert asyncio.run(life()) == [False, True, False, True, False, False]
    metrics, events, _ = fed()
    _, watched = metrics.watch(events, journal=None, lease=inner)  # type: ignore[arg-type]
    asyncio.run(watched.acquire())
    assert value(scrape(metrics), "rollguard_roll_lease_held") == 1


def test_a_failing_listener_is_said_once_and_never_stops_the_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = EventLog(tmp_path / "events.jsonl", "r1")
    heard: list[object] = []

    def broken(entry: object) -> None:
        raise RuntimeError("a bug")

    events.listeners += [broken, heard.append]
    with caplog.at_level(logging.WARNING):
        events.write("kafka-0", Event.SKIP, "skipped")
        events.write("kafka-1", Event.SKIP, "skipped")
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 2
    assert len(heard) == 2
    assert sum("listener failed" in r.getMessage() for r in caplog.records) == 1


def test_a_wait_said_again_reaches_the_listeners_but_not_the_file(tmp_path: Path) -> None:
    events = EventLog(tmp_path / "events.jsonl", "r1")
    heard: list[dict[str, object]] = []
    events.listeners.append(heard.append)
    observer = Observer(None, None, events)  # type: ignore[arg-type]
    for _ in range(3):
        observer.events.say("kafka-0", "defer", Event.DEFER, "orders-0", kind="availability")
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 1
    assert [bool(e.get("repeated")) for e in heard] == [False, True, True]
    assert {e["kind"] for e in heard} == {"availability"}


# ---- the server -------------------------------------------------------------------------------


async def ask(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


def test_only_get_metrics_is_served() -> None:
    async def main() -> list[bytes]:
        server = MetricsServer(lambda: b"rollguard_roll_restarts_total 1.0\n")
        address = await server.start(HostPort("127.0.0.1", 0))
        try:
            async with httpx.AsyncClient(base_url=f"http://{address}") as client:
                ok = await client.get("/metrics")
                assert ok.status_code == 200 and ok.text == "rollguard_roll_restarts_total 1.0\n"
                assert ok.headers["content-type"].startswith("text/plain; version=0.0.4")
                assert (await client.get("/")).status_code == 404
                assert (await client.get("/metrics/../admin")).status_code == 404
                refused = await client.post("/metrics", content=b"x")
                assert refused.status_code == 405 and refused.headers["allow"] == "GET"
            return [
                await ask(address.port, b"nonsense\r\n\r\n"),
                await ask(address.port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000),
            ]
        finally:
            await server.stop()

    garbage, huge = asyncio.run(main())
    assert garbage.startswith(b"HTTP/1.1 400 ")
    assert huge.startswith(b"HTTP/1.1 431 ")


def test_connections_are_bounded_and_a_silent_one_is_closed_after_the_read_timeout() -> None:
    async def main() -> None:
        server = MetricsServer(lambda: b"", max_connections=2, read_timeout=0.5)
        address = await server.start(HostPort("127.0.0.1", 0))
        try:
            silent = [await asyncio.open_connection("127.0.0.1", address.port) for _ in range(2)]
            # both slots are taken once the server has seen both connections
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while server.connections < 2:
                assert loop.time() < deadline, "the server never saw both connections"
                await asyncio.sleep(0.01)
            turned_away = await ask(address.port, b"")  # nothing sent: nothing left unread
            assert turned_away.startswith(b"HTTP/1.1 503 ")
            for reader, writer in silent:  # each said 408 and closed after the read timeout
                answer = await asyncio.wait_for(reader.read(), 10)
                assert answer.startswith(b"HTTP/1.1 408 ")
                writer.close()
            served = await ask(address.port, b"GET /metrics HTTP/1.1\r\n\r\n")
            assert served.startswith(b"HTTP/1.1 200 ")
        finally:
            await server.stop()

    asyncio.run(main())


def test_stop_closes_open_connections_and_the_port() -> None:
    async def main() -> None:
        server = MetricsServer(lambda: b"", read_timeout=60)
        address = await server.start(HostPort("127.0.0.1", 0))
        reader, writer = await asyncio.open_connection("127.0.0.1", address.port)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not server.connections:
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        await server.stop()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed without an answer
        writer.close()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", address.port)

    asyncio.run(main())


def test_an_address_in_use_is_a_config_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def main() -> None:
            await MetricsServer(lambda: b"").start(HostPort("127.0.0.1", port))

        with pytest.raises(ConfigError, match=rf"--metrics-listen 127\.0\.0\.1:{port}: .*in use"):
            asyncio.run(main())


def test_a_roll_whose_metrics_address_is_in_use_exits_2_before_anything_is_done(
    pki: Pki, tmp_path: Path
) -> None:
    restart = f"touch {tmp_path}/restarted"
    path = inventory(tmp_path / "inventory.yaml", ["https://127.0.0.1:1"], cluster="prod",
                     restart=restart)  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(rollguard_args("roll", inventory=path, bootstrap="127.0.0.1:1", tls=pki,
                                  state_dir=tmp_path / "state",
                                  extra=["--metrics-listen", f"127.0.0.1:{port}"]))  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"rollguard: --metrics-listen 127.0.0.1:{port}: ") and "in use" in line
    state = tmp_path / "state"
    assert not (tmp_path / "restarted").exists()
    assert not list(state.glob("roll-*.json")) and not list(state.glob("lease*"))


# ---- a real roll, scraped while it runs ---------------------------------------------------------

LISTENING = re.compile(r"metrics on http://(127\.0\.0\.1:\d+)/metrics")


def test_a_roll_serves_its_metrics_while_it_waits_for_a_recovering_node(
    pki: Pki, tmp_path: Path
) -> None:
    plans = {1: NodePlan(recovery_ms=8000)}
    with (
        ProcessCluster(pki, tmp_path, plans=plans) as cluster,
        InventoryRoll(cluster, tmp_path).start("--metrics-listen", "127.0.0.1:0") as running,
        httpx.Client(timeout=5) as http,  # one client: each new one loads a CA bundle (60 ms)
    ):
        found = wait_until(lambda: LISTENING.search(running.output()), 60, what="the address")
        url = f"http://{found.group(1)}/metrics"
        scrapes: list[str] = []

        def scraped(check: Callable[[Sample], object]) -> bool:
            if running.poll() is not None:
                raise AssertionError(f"the roll ended first:\n{running.output()}")
            text = http.get(url).text
            scrapes.append(text)
            return bool(check(parse(text)))

        def recovering(seen: Sample) -> bool:
            return (
                value(seen, "rollguard_roll_wait_seconds", node="kafka-1", reason="recovery")
                is not None
                and value(seen, "rollguard_roll_recovery_remaining_segments", node="kafka-1")
                is not None
            )

        wait_until(lambda: scraped(recovering), timeout=90, what="kafka-1 waited for in recovery")
        waiting = parse(scrapes[-1])
        assert value(waiting, "rollguard_roll_waiting_nodes", reason="recovery") == 1
        assert value(waiting, "rollguard_roll_lease_held") == 1
        assert value(waiting, "rollguard_roll_nodes", state="restarting") == 1
        ((info, _),) = named(waiting, "rollguard_roll_info").items()
        assert dict(info)["roll_id"] == "t1"
        # once it has a rate, its ETA (8 s of recovery: a few polls)
        wait_until(
            lambda: scraped(
                lambda s: value(s, "rollguard_roll_recovery_eta_seconds", node="kafka-1")
            ),
            timeout=30,
            what="kafka-1's recovery ETA",
        )
        (tmp_path / "scrape.txt").write_text(scrapes[-1])
        wait_until(
            lambda: scraped(lambda s: value(s, "rollguard_roll_restarts_total") == 3),
            timeout=120,
            what="the third restart",
        )
        done = running.wait(120)
        assert done.returncode == 0, done.output
    counted = max(value(parse(t), "rollguard_roll_restarts_total") or 0 for t in scrapes)
    assert counted == len(done.restarted()) == 3
    assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]
    with pytest.raises(httpx.ConnectError):  # the server went with the roll
        httpx.get(url, timeout=5)


def test_a_live_configuration_step_counts_apart_from_restarts_and_as_done_once_back() -> None:
    metrics, events, clock = fed()
    metrics.follow(["kafka-0", "kafka-1"])
    events.write("kafka-0", Event.CONFIGURE, "num.io.threads", keys=["num.io.threads"])
    clock.now += 5
    catching = Waiting("catch-up", "catching up: 2 partitions not yet in sync", clock.now)
    roll = rolled(metrics, NodeRecord("kafka-0", Phase.CONFIGURING, how=How.LIVE, waiting=catching))
    seen = scrape(metrics)
    assert value(seen, "rollguard_roll_live_configurations_total") == 1
    assert value(seen, "rollguard_roll_restarts_total") == 0
    assert value(seen, "rollguard_roll_waiting_nodes", reason="catch-up") == 1
    events.write("kafka-0", Event.CONFIGURED, "configuration applied live: num.io.threads")
    roll.nodes["kafka-0"] = NodeRecord(
        "kafka-0", Phase.DONE, "2026-01-01T00:00:05.000Z", how=How.LIVE
    )
    seen = scrape(metrics)
    states = {dict(k)["state"]: v for k, v in named(seen, "rollguard_roll_nodes").items()}
    assert (states["done"], states["configured"], states["pending"]) == (1, 1, 1)
    assert value(seen, "rollguard_roll_waiting_nodes", reason="catch-up") == 0
