"""The roll's canary cut into windows by the roll's own events (`canary.watch.RollCanary`): the
baseline until the first restart, each node's window from `restart` to `ready`, a node never
back said at the end, a canary that cannot produce said once; on a canary whose samples and
clock the test gives."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rollguard.peers.harness import read_events
from rollguard.roller.kafka_admin import AdminApiError, KafkaObserver
from rollguard.roller.model import CanaryArrival, CanarySample
from rollguard.roller.roll.canary.client import Canary, CanaryRefused
from rollguard.roller.roll.canary.gate import CanaryGate
from rollguard.roller.roll.canary.topic import CanaryTopic
from rollguard.roller.roll.canary.watch import RollCanary
from rollguard.roller.roll.gates.keeper import Closed
from rollguard.roller.roll.node.record import How, NodeRecord, Phase
from rollguard.roller.roll.stores.journal import (
    FileJournalStore,
    RollRecord,
    RollState,
)
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError

TOPIC = "rollguard-canary"


class Given:
    """A canary whose samples and clock are the test's."""

    def __init__(self, samples: list[CanarySample], arrivals: list[CanaryArrival]) -> None:
        self.topic = "rollguard-canary"
        self.delivery_timeout = 10.0
        self.now = 0.0
        self.warm = threading.Event()
        self.warm.set()
        self.acked: float | None = None  # the latest acknowledgement; None: from the samples
        self.last_error: str | None = None
        self.started_at: float | None = 0.0
        self.refused: CanaryRefused | None = None
        self.led: list[list[int]] = []  # the preferred leader elections asked for
        self.stopped = self.waited = False
        self._samples, self._arrivals = samples, arrivals

    @property
    def last_ack(self) -> float | None:
        if self.acked is not None:
            return self.acked
        answered = [s.at + s.latency for s in self._samples if s.latency is not None]
        return max((at for at in answered if at <= self.now), default=None)

    def clock(self) -> float:
        return self.now

    def prepare(self) -> CanaryTopic:
        return CanaryTopic(self.topic, 3, 3, True, None)

    def start(self) -> None:
        pass

    async def lead(self, partitions: list[int]) -> None:
        self.led.append(list(partitions))

    def stop(self, *, wait: bool = True) -> None:
        self.stopped = True
        self.waited = wait

    def samples(self) -> tuple[list[CanarySample], list[CanaryArrival], list[float]]:
        return self._samples, self._arrivals, []


def steady(start: float, end: float, *, slow: tuple[float, float] = (0.0, 0.0)) -> Given:
    """A send every 100 ms from `start` to `end`, acknowledged in 5 ms and read back 10 ms
    later; within `slow`, acknowledged in 500 ms, the one at its middle failed, nothing read."""
    samples, arrivals = [], []
    for k in range(round((end - start) * 10) + 1):
        at = round(start + k / 10, 1)
        if slow[0] <= at <= slow[1]:
            middle = at == round((slow[0] + slow[1]) / 2, 1)
            samples.append(CanarySample(at, None if middle else 0.5))
        else:
            samples.append(CanarySample(at, 0.005))
            arrivals.append(CanaryArrival(at + 0.01, 0.01))
    return Given(samples, arrivals)


async def led(canary: Given, within: float = 10.0) -> None:
    """Until the roll's canary has asked for an election (its watch runs every 0.5 s)."""
    deadline = asyncio.get_running_loop().time() + within
    while not canary.led and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


def restarted(canary: Given, events: EventLog, node: str, down: float, back: float) -> None:
    """The roll's `restart` of `node` at `down`, its `ready` at `back` (the canary's clock)."""
    canary.now = down
    events.write(node, Event.RESTART, "")
    canary.now = back
    events.write(node, Event.READY, "")


def test_each_restart_is_measured_from_its_restart_to_its_being_back(tmp_path: Path) -> None:
    canary = steady(0.0, 30.0, slow=(10.0, 12.0))
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)

    async def rolled() -> None:
        canary.now = 5.0
        await roll.start()  # the baseline from 5 s, when every partition was answered
        restarted(canary, events, "kafka-0", 9.0, 13.0)
        canary.now = 14.0
        events.write("kafka-1", Event.RESTART, "")  # never back
        canary.now = 20.0
        await roll.stop()

    asyncio.run(rolled())
    assert canary.stopped
    found = read_events(tmp_path / "events.jsonl")
    actions = [(e["action"], e["node"]) for e in found]
    assert actions == [
        ("canary-topic", None),
        ("restart", "kafka-0"),
        ("canary-baseline", None),  # at the first restart: until then
        ("ready", "kafka-0"),
        ("restart", "kafka-1"),
        ("canary-cost", "kafka-0"),
        ("canary-cost", "kafka-1"),
    ]
    baseline = found[2]
    assert (baseline["seconds"], baseline["sent"], baseline["failed"]) == (4.0, 41, 0)
    assert (baseline["p50Ms"], baseline["maxMs"], baseline["longestGapS"]) == (5.0, 5.0, 0.1)
    zero = found[5]
    assert (zero["seconds"], zero["sent"], zero["failed"]) == (4.0, 41, 1)
    assert (zero["p50Ms"], zero["p99Ms"], zero["maxMs"]) == (5.0, 500.0, 500.0)  # half slow
    assert zero["longestGapS"] == 2.2  # 9.91 read, then nothing until 12.11
    assert (zero["baselineP50Ms"], zero["baselineSent"]) == (5.0, 41)
    one = found[6]
    assert one["reason"].endswith("(not back by the roll's end)")
    assert (one["seconds"], one["sent"], one["failed"], one["p50Ms"]) == (6.0, 61, 0, 5.0)
    assert roll.lines() == [
        "canary rollguard-canary: baseline send p50 5.0ms p99 5.0ms max 5.0ms, 0 failed of 41, "
        "end to end p99 10ms, longest consumer gap 0.1s",
        "canary rollguard-canary: kafka-0: send p50 5.0ms p99 500ms max 500ms, 1 failed of 41, "
        "end to end p99 10ms, longest consumer gap 2.2s",
        "canary rollguard-canary: kafka-1: send p50 5.0ms p99 5.0ms max 5.0ms, 0 failed of 61, "
        "end to end p99 10ms, longest consumer gap 0.1s",
    ]


def test_a_live_step_is_a_window_and_a_batch_s_members_overlap(tmp_path: Path) -> None:
    canary = steady(0.0, 30.0)
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)

    async def rolled() -> None:
        await roll.start()
        canary.now = 2.0
        events.write("kafka-0", Event.CONFIGURE, "")
        events.write("kafka-0", Event.RESTART, "")  # its live keys, then its restart: one window
        canary.now = 5.0
        events.write("kafka-0", Event.READY, "")
        events.write("kafka-1", Event.RESTART, "")
        events.write("kafka-2", Event.RESTART, "")
        canary.now = 8.0
        events.write("kafka-2", Event.READY, "")
        canary.now = 9.0
        events.write("kafka-1", Event.READY, "")
        await roll.stop()

    asyncio.run(rolled())
    costs = {e["node"]: e for e in read_events(tmp_path / "events.jsonl").of("canary-cost")}
    assert {n: c["seconds"] for n, c in costs.items()} == {
        "kafka-0": 3.0,
        "kafka-1": 4.0,
        "kafka-2": 3.0,
    }


def test_a_roll_without_a_restart_still_says_its_baseline(tmp_path: Path) -> None:
    canary = steady(0.0, 30.0)
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)

    async def rolled() -> None:
        await roll.start()
        canary.now = 3.0
        await roll.stop()

    asyncio.run(rolled())
    found = read_events(tmp_path / "events.jsonl")
    assert [e["action"] for e in found] == ["canary-topic", "canary-baseline"]
    assert (found[1]["seconds"], found[1]["sent"]) == (3.0, 31)


def test_a_canary_that_cannot_produce_is_said_once_until_it_produces_again(
    tmp_path: Path,
) -> None:
    canary = Given([], [])
    canary.last_error = "KafkaTimeoutError: Failed to update metadata after 10.0 secs."
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)
    for now, acked in ((5.0, None), (10.0, None), (11.0, None), (12.0, 11.5), (22.0, 11.5)):
        canary.now, canary.acked = now, acked
        roll._stalled()
    failing = read_events(tmp_path / "events.jsonl").of("canary-failing")
    assert len(failing) == 2  # at 10 s, then again at 22 s after it produced at 11.5 s
    assert failing[0]["reason"] == (
        "no send acknowledged for 10s: KafkaTimeoutError: Failed to update metadata after 10.0 "
        "secs."
    )
    assert failing[0]["topic"] == "rollguard-canary"


def test_an_interrupted_roll_says_what_is_in_and_stops_the_canary_at_once(tmp_path: Path) -> None:
    canary = steady(0.0, 30.0)
    events = EventLog(tmp_path / "events.jsonl", "r1")

    async def interrupted() -> None:
        async with RollCanary(canary, events, baseline=0.0):
            canary.now = 2.0
            events.write("kafka-0", Event.RESTART, "")
            canary.now = 4.0
            raise asyncio.CancelledError  # SIGINT, SIGTERM: the roll's task cancelled

    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(interrupted())
    assert (canary.stopped, canary.waited) == (True, False)
    [cost] = read_events(tmp_path / "events.jsonl").of("canary-cost")
    assert cost["node"] == "kafka-0" and cost["seconds"] == 2.0


def test_a_topic_that_can_be_neither_found_nor_made_stops_the_roll_before_it_begins(
    tmp_path: Path,
) -> None:
    canary = steady(0.0, 30.0)

    def refused() -> CanaryTopic:
        raise AdminApiError("the canary topic rollguard-canary: TopicAuthorizationFailedError")

    canary.prepare = refused  # type: ignore[method-assign]
    events = EventLog(tmp_path / "events.jsonl", "r1")

    async def roll() -> None:
        async with RollCanary(canary, events, baseline=0.0):
            raise AssertionError("the roll began")

    with pytest.raises(AdminApiError, match="TopicAuthorizationFailedError"):
        asyncio.run(roll())
    assert (canary.stopped, canary.waited) == (True, False)
    assert not (tmp_path / "events.jsonl").exists()


def test_the_gate_judges_the_last_window_and_is_closed_until_the_canary_runs(
    tmp_path: Path,
) -> None:
    canary = steady(0.0, 60.0, slow=(20.0, 22.0))  # 20-22 s: sends of 500 ms, one failed
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0, window=5.0, max_p99=0.25)
    gate = CanaryGate(roll)
    seen: list[tuple[float, Closed | None]] = []

    async def rolled() -> None:
        seen.append((0.0, await gate.check()))  # not started yet: closed
        canary.now = 10.0
        await roll.start()
        for now in (15.0, 21.0, 24.0, 26.5, 28.0):
            canary.now = now
            seen.append((now, await gate.check()))
        await roll.stop()
        seen.append((30.0, await gate.check()))  # stopped: closed again

    asyncio.run(rolled())
    reasons = {now: (c.reason if c is not None else None) for now, c in seen}
    assert reasons == {
        0.0: "canary rollguard-canary: not running",
        15.0: None,
        21.0: "canary rollguard-canary: 1 of 51 sends failed in the last 5.0s",
        # 24 s: the failure (21 s) is still within the last 5 s.
        24.0: "canary rollguard-canary: 1 of 51 sends failed in the last 5.0s",
        # 26.5 s: the failure has left the window, the slow sends of 21.5-22 s not yet.
        26.5: "canary rollguard-canary: send p99 500ms over the last 5.0s (more than 250ms)",
        28.0: None,
        30.0: "canary rollguard-canary: not running",
    }
    assert all(
        c is None or (c.kind, c.name, c.budgeted) == ("canary", TOPIC, True) for _, c in seen
    )
    # Without a bound, slow sends hold nothing; a failed one still does.
    unbounded = RollCanary(steady(0.0, 60.0, slow=(20.0, 22.0)), events, baseline=0.0, window=5.0)

    async def judged() -> list[str | None]:
        unbounded.canary.now = 10.0  # type: ignore[attr-defined]
        await unbounded.start()
        found = []
        for now in (21.0, 26.5):
            unbounded.canary.now = now  # type: ignore[attr-defined]
            breach = unbounded.breach()
            found.append(breach.reason if breach is not None else None)
        await unbounded.stop()
        return found

    assert asyncio.run(judged()) == ["1 of 51 sends failed in the last 5.0s", None]


def test_a_canary_that_cannot_produce_closes_the_gate_naming_its_last_error(
    tmp_path: Path,
) -> None:
    canary = Given([], [])
    canary.last_error = "KafkaTimeoutError: Failed to update metadata after 5.0 secs."
    roll = RollCanary(canary, EventLog(tmp_path / "events.jsonl", "r1"), baseline=0.0)

    async def judged() -> str | None:
        await roll.start()
        canary.now = 12.0
        breach = roll.breach()
        await roll.stop(wait=False)
        return breach.reason if breach is not None else None

    assert asyncio.run(judged()) == (
        "no send acknowledged in the last 10s (KafkaTimeoutError: Failed to update metadata "
        "after 5.0 secs.)"
    )


def test_each_node_s_figures_are_in_its_journal_record_and_read_back(tmp_path: Path) -> None:
    canary = steady(0.0, 30.0)
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)
    store = FileJournalStore(tmp_path)
    journal = roll.journaled(store)
    record = RollRecord("r1", "2026-11-29T00:00:00Z")

    async def rolled() -> None:
        canary.now = 5.0
        await roll.start()
        record.nodes["kafka-0"] = NodeRecord("kafka-0", Phase.RESTARTING, "t0", how=How.RESTART)
        journal.save(record)
        restarted(canary, events, "kafka-0", 9.0, 13.0)
        record.nodes["kafka-0"] = replace(record.nodes["kafka-0"], phase=Phase.DONE)
        record.state = RollState.COMPLETED
        journal.save(record)  # the roll's last save: kafka-0's figures are not said yet
        canary.now = 14.0
        await roll.stop()  # said now, and saved with the roll's last record

    asyncio.run(rolled())
    [cost] = read_events(tmp_path / "events.jsonl").of("canary-cost")
    kept = store.load("r1")
    assert kept is not None and kept.state is RollState.COMPLETED
    figures = kept.nodes["kafka-0"].canary
    assert figures is not None and figures["sent"] == cost["sent"] == 41
    assert figures == {k: v for k, v in cost.items() if k in figures}
    assert figures["baselineP50Ms"] == 5.0
    # Read back as it was written, and a record without figures says none.
    again = RollRecord.from_json(kept.to_json())
    assert again.nodes["kafka-0"].canary == figures
    assert "canary" not in RollRecord.from_json(record.to_json() | {"nodes": {}}).to_json()
    with pytest.raises(ConfigError, match="canary figures are not numbers"):
        broken = kept.to_json()
        broken["nodes"]["kafka-0"]["canary"] = {"sent": "41"}
        RollRecord.from_json(broken)


class Admin:
    """kafka-python's admin client as the canary's topic sees it: its answers, or a refusal."""

    def __init__(self, *, describe: list[dict[str, Any]], create: Exception | None = None) -> None:
        self.describe, self.create = describe, create

    def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [{"node_id": 0}, {"node_id": 1}, {"node_id": 2}]}

    def describe_topics(self, topics: list[str]) -> list[dict[str, Any]]:
        return self.describe

    def describe_configs(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}

    def create_topics(self, *args: Any, **kwargs: Any) -> None:
        if self.create is not None:
            raise self.create

    def close(self) -> None:
        pass


def prepared(admin: Admin) -> CanaryTopic:
    observer = KafkaObserver("127.0.0.1:9")
    observer._admin = admin  # the library's client, given
    return Canary(observer, "rollguard-canary").prepare()


def test_an_acl_missing_for_the_topic_is_a_configuration_error_naming_the_operation() -> None:
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    denied = [{"topic": "rollguard-canary", "error_code": 29, "partitions": []}]
    with pytest.raises(CanaryRefused, match="refuses the roller's client DESCRIBE on topic") as got:
        prepared(Admin(describe=denied))
    assert got.value.operation == "DESCRIBE" and isinstance(got.value, ConfigError)
    absent = [{"topic": "rollguard-canary", "error_code": 3, "partitions": []}]
    for error in (TopicAuthorizationFailedError(), ClusterAuthorizationFailedError()):
        with pytest.raises(CanaryRefused, match="client CREATE on topic rollguard-canary"):
            prepared(Admin(describe=absent, create=error))
    # Another error is not a refusal: the roll fails as for any topic it cannot make (exit 1).
    with pytest.raises(AdminApiError, match="the canary topic rollguard-canary"):
        prepared(Admin(describe=absent, create=OSError("connection reset")))


def test_a_refused_producer_or_consumer_stops_the_roll_before_its_first_action(
    tmp_path: Path,
) -> None:
    from kafka.errors import TopicAuthorizationFailedError

    canary = Given([], [])
    canary.refused = CanaryRefused("rollguard-canary", "WRITE", TopicAuthorizationFailedError())
    roll = RollCanary(canary, EventLog(tmp_path / "events.jsonl", "r1"), baseline=5.0)

    async def started() -> None:
        async with roll:
            raise AssertionError("the roll went on")

    with pytest.raises(CanaryRefused, match="client WRITE on topic rollguard-canary") as got:
        asyncio.run(started())
    assert "grant them, or roll without --canary" in str(got.value)
    assert canary.stopped and not canary.waited  # stopped at once


def test_each_restart_and_the_whole_roll_are_said_by_broker(tmp_path: Path) -> None:
    # Sends every 100 ms to partitions 0, 1, 2 in turn (led by brokers 0, 1, 2); broker 1's
    # partition slow (500 ms) within its restart, 10-12 s.
    samples, arrivals = [], []
    for k in range(301):
        at, partition = round(k / 10, 1), k % 3
        slow = partition == 1 and 10.0 <= at <= 12.0
        samples.append(CanarySample(at, 0.5 if slow else 0.005, partition))
        arrivals.append(CanaryArrival(at + (0.5 if slow else 0.01), 0.01, partition))
    arrivals.sort(key=lambda a: a.at)
    canary = Given(samples, arrivals)
    canary.prepare = lambda: CanaryTopic(TOPIC, 3, 3, True, None, {0: 0, 1: 1, 2: 2})  # type: ignore[method-assign]
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)

    async def rolled() -> None:
        await roll.start()
        restarted(canary, events, "kafka-1", 9.0, 13.0)
        # kafka-1 is back: its partition led by it again (an election of the topic's own)
        await led(canary)
        canary.now = 30.0
        await roll.stop()

    asyncio.run(rolled())
    assert canary.led == [[0, 1, 2]]
    found = read_events(tmp_path / "events.jsonl")
    [cost] = found.of("canary-cost")
    assert sorted(cost["brokers"]) == ["0", "1", "2"]
    assert cost["brokers"]["1"]["maxMs"] == 500.0 and cost["brokers"]["0"]["maxMs"] == 5.0
    assert (
        cost["brokers"]["1"]["sent"] + cost["brokers"]["0"]["sent"] + cost["brokers"]["2"]["sent"]
        == cost["sent"]
    )
    [whole] = found.of("canary-brokers")
    assert found[-1] is whole and whole["node"] is None
    assert whole["brokers"]["1"]["sent"] == 100 and whole["brokers"]["1"]["maxMs"] == 500.0
    assert whole["brokers"]["2"]["maxMs"] == 5.0
    lines = roll.lines()
    assert lines[-3:] == [
        f"canary {TOPIC}: broker {b}'s partitions over the roll: {roll.brokers[b].text()}"
        for b in (0, 1, 2)
    ]


def test_a_node_back_has_only_its_own_partitions_led_by_it_again(tmp_path: Path) -> None:
    canary = steady(0.0, 30.0)
    leaders = {0: 0, 1: 1, 2: 2, 3: 1}
    canary.prepare = lambda: CanaryTopic(TOPIC, 4, 3, True, None, leaders)  # type: ignore[method-assign]
    events = EventLog(tmp_path / "events.jsonl", "r1")
    roll = RollCanary(canary, events, baseline=0.0)
    roll.node_ids = {"kafka-0": 0, "kafka-1": 1, "kafka-2": 2}

    async def rolled() -> None:
        await roll.start()
        restarted(canary, events, "kafka-1", 9.0, 13.0)
        events.write("kafka-2", Event.RESTART, "")  # down now: its partition is not asked for
        await led(canary)
        canary.now = 20.0
        events.write("kafka-2", Event.READY, "")  # the roll's last: led again at its end
        await roll.stop()

    asyncio.run(rolled())
    assert canary.led == [[1, 3], [2]]  # kafka-1's two partitions, then kafka-2's at the end
