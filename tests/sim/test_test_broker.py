"""The Java test broker follows a real Kafka 4.x broker (tests/broker/TestBroker.java's class
comment): log loading in STARTING by default, quoted dirs, per-thread segment gauges that are
null until the thread starts and count per log, and the gauges of a clean start's loading."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rollguard.agent.jmx import service_url
from rollguard.agent.jmx_persistent import PersistentJmxBackend
from rollguard.agent.readings import QUERIES, MBeanValue, SampleError, interpret
from rollguard.shared.wire import BrokerStateReport, RecoveryPhase, RecoveryProgress

from helpers import Agent, Broker, Pki, free_port, until_running, wait_until

LOGS = "kafka.log:type=LogManager,name=remainingLogsToRecover"
DIR = re.compile(r'[:,]dir=("[^"]*")')
THREAD = re.compile(r"[:,]threadNum=(\d+)")


@dataclass
class Round:
    """One JMX round: the raw gauges by (dir, thread) and the agent's reading of them."""

    logs: dict[str, int]  # remainingLogsToRecover by dir, as written in the ObjectName
    segments: dict[tuple[str, int], int | None]  # remainingSegmentsToRecover by dir and thread
    report: BrokerStateReport


def round_of(values: list[MBeanValue]) -> Round:
    logs: dict[str, int] = {}
    segments: dict[tuple[str, int], int | None] = {}
    for value in values:
        if "type=LogManager" not in value.object_name:
            continue
        match = DIR.search(value.object_name)
        assert match, f"no dir key in {value.object_name}"
        if "name=remainingLogsToRecover" in value.object_name:
            assert isinstance(value.value, int)
            logs[match.group(1)] = value.value
        else:
            thread = THREAD.search(value.object_name)
            assert thread, f"no threadNum key in {value.object_name}"
            assert value.value is None or isinstance(value.value, int)
            segments[(match.group(1), int(thread.group(1)))] = value.value  # type: ignore[assignment]
    return Round(logs, segments, interpret(values, datetime.now(UTC)))


def follow(broker: Broker, classpath: Path, seconds: float, every: float = 0.03) -> list[Round]:
    """JMX rounds through the agent's persistent reader, every `every` s, until RUNNING (3).

    The reader JVM is started (and warmed up on the STARTING broker) before the rounds count, so
    the first moments of the loading are not lost to its start."""

    async def scenario() -> list[Round]:
        jmx = PersistentJmxBackend(
            service_url(broker.address), classpath=classpath, queries=QUERIES
        )
        rounds: list[Round] = []
        try:
            await jmx.read(10)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    values = await jmx.read(10)
                except SampleError as exc:
                    # a gauge unregistered between the reader's query and its read: the round
                    # at the end of the loading can fail so (as on a real broker); the next not
                    if "InstanceNotFoundException" not in exc.message:
                        raise
                    continue
                rounds.append(round_of(values))
                if int(rounds[-1].report.broker_state) == 3:
                    return rounds
                await asyncio.sleep(every)
        finally:
            await jmx.close()
        raise AssertionError(f"not RUNNING after {seconds}s: {rounds[-1:]}")

    return asyncio.run(scenario())


def test_a_recovery_runs_in_starting_with_null_then_counting_thread_gauges(
    classpath: Path,
) -> None:
    # 2 dirs x 2 threads, 6 logs a dir: 3 logs a thread of 1.2 s each (0.12 s to open), and
    # 90 segments a thread: 30 in each of its logs
    with Broker(
        "--starting-ms", "3000", "--recovery-ms", "3600", "--dirs", "2", "--threads", "2",
        "--logs", "6", "--segments", "90",
    ) as broker:  # fmt: skip
        rounds = follow(broker, classpath, seconds=60)
        lines = broker.output.text().splitlines()
    assert [line for line in lines if not line.startswith("JMX_PORT")] == [
        "STATE 1", "LOADING recovery", "LOADED", "STATE 2", "STATE 3",
    ]  # fmt: skip
    # (the rounds are as many as a loaded machine allows: what is asserted holds for any number)
    seen = [r for r in rounds if r.logs or r.segments]
    # the whole recovery in STARTING, reported by the agent as a recovery with its figures
    assert {int(r.report.broker_state) for r in seen} == {1}
    assert all(r.report.recovery is not None for r in seen if r.logs)
    assert all(r.report.recovery is None for r in rounds if not r.logs)
    # the dir key is quoted, as a real broker's, and every gauge of every dir and thread is there
    # (but in a round that caught the gauges being registered or unregistered, one by one, as
    # Kafka does: at the very start or end of the loading)
    dirs = {'"/var/lib/kafka/data-0/kafka-log0"', '"/var/lib/kafka/data-1/kafka-log0"'}
    threads = {(d, t) for d in dirs for t in (0, 1)}
    loading = [r for r in seen if set(r.logs) == dirs and set(r.segments) == threads]
    partial = [i for i, r in enumerate(seen) if r not in loading]
    assert set(partial) <= {0, len(seen) - 1}, [seen[i] for i in partial]
    assert len(loading) >= 3
    # remainingLogsToRecover: the logs left, per dir, only going down
    totals = [sum(r.logs.values()) for r in loading]
    assert totals[0] <= 12 and totals == sorted(totals, reverse=True) and totals[-1] < totals[0]
    assert [r.report.recovery.remaining_logs for r in loading] == totals  # type: ignore[union-attr]
    # each thread: null until it starts its first log, then the segments left in the log it
    # is on, restarting high at each new log
    rises = 0
    for key in loading[0].segments:
        values = [r.segments[key] for r in loading]
        counted = [v for v in values if v is not None]
        assert values == [None] * (len(values) - len(counted)) + counted, key
        assert counted and max(counted) <= 30, key
        rises += sum(b > a for a, b in itertools.pairwise(counted))
    assert rises, "no thread was seen starting a new log"
    phases = [r.report.recovery.phase for r in loading]  # type: ignore[union-attr]
    assert phases[-1] is RecoveryPhase.RECOVERING
    assert all(
        (phase is RecoveryPhase.LOADING) == (set(r.segments.values()) == {None})
        for phase, r in zip(phases, loading, strict=True)
    )  # the agent says `loading` exactly while no thread has started
    # the states only move forward: STARTING, then (briefly) RECOVERY, then RUNNING
    states = [int(r.report.broker_state) for r in rounds]
    assert states == sorted(states) and states[-1] == 3


def read_once(broker: Broker, classpath: Path) -> Round:
    async def read() -> Round:
        jmx = PersistentJmxBackend(
            service_url(broker.address), classpath=classpath, queries=QUERIES
        )
        try:
            return round_of(await jmx.read(10))
        finally:
            await jmx.close()

    return asyncio.run(read())


def test_a_thread_is_null_until_it_starts_its_first_log(classpath: Path) -> None:
    # stalled while the threads open their first log (0.06 of it), and a broker with more
    # threads than logs, stalled half way through: the threads without a log stay null
    with (
        Broker(
            "--starting-ms", "0", "--recovery-ms", "1000", "--stall-at", "0.02", "--dirs", "2",
            "--threads", "2", "--logs", "6", "--segments", "90",
        ) as opening,
        Broker(
            "--starting-ms", "0", "--recovery-ms", "1000", "--stall-at", "0.5", "--threads", "4",
            "--logs", "2", "--segments", "10",
        ) as idle,
    ):  # fmt: skip
        opening.output.wait_for("^LOADING recovery$")
        idle.output.wait_for("^LOADING recovery$")
        time.sleep(0.6)  # both stalled by now
        first = read_once(opening, classpath)
        partly = read_once(idle, classpath)
    assert len(first.segments) == 4 and set(first.segments.values()) == {None}
    assert sum(first.logs.values()) == 12
    assert int(first.report.broker_state) == 1
    assert first.report.recovery == RecoveryProgress(12, 0, RecoveryPhase.LOADING)
    by_thread = {thread: value for (_, thread), value in partly.segments.items()}
    assert by_thread == {0: 6, 1: 6, 2: None, 3: None}  # 10 segments, 0.44 of them done
    assert partly.report.recovery == RecoveryProgress(2, 12, RecoveryPhase.RECOVERING)


def test_recovery_state_2_runs_the_recovery_in_recovery(classpath: Path) -> None:
    # stalled at 0.8: each thread is 0.56 of the way through its 2nd of 2 logs (23 of 50 left)
    with Broker(
        "--starting-ms", "0", "--recovery-ms", "1000", "--stall-at", "0.8",
        "--recovery-state", "2", "--dirs", "1", "--threads", "3", "--logs", "6",
        "--segments", "100",
    ) as broker:  # fmt: skip
        broker.output.wait_for("^LOADING recovery$")
        time.sleep(1.2)  # stalled by now
        stalled = read_once(broker, classpath)
        assert broker.output.text().splitlines()[1:] == ["STATE 1", "STATE 2", "LOADING recovery"]
    assert int(stalled.report.broker_state) == 2
    assert stalled.logs == {'"/var/lib/kafka/data-0/kafka-log0"': 3}
    assert sorted(stalled.segments.values()) == [23, 23, 23]  # type: ignore[type-var]
    recovery = stalled.report.recovery
    assert recovery is not None and recovery.phase is RecoveryPhase.RECOVERING
    assert (recovery.remaining_logs, recovery.remaining_segments) == (3, 69)


def test_an_unknown_recovery_state_is_refused() -> None:
    with Broker("--recovery-state", "3") as broker:
        assert broker.process.wait(10) == 2
        broker.output.wait_for("--recovery-state must be 1 \\(STARTING\\) or 2")


def test_a_clean_start_loads_its_logs_with_null_segment_gauges(pki: Pki, classpath: Path) -> None:
    # STARTING 2 s, then 3 s of loading 14 logs (gauges, nothing recovered), then STARTING for
    # 1.5 s more until the registration is acknowledged, 0.1 s of RECOVERY and RUNNING
    flags = ("--starting-ms", "2000", "--loading-ms", "3000", "--registration-ms", "1500",
             "--dirs", "1", "--threads", "2", "--logs", "14")  # fmt: skip
    with Broker(*flags) as broker:
        rounds = follow(broker, classpath, seconds=30)
        lines = broker.output.text().splitlines()[1:]
    assert lines == ["STATE 1", "LOADING clean", "LOADED", "STATE 2", "STATE 3"]
    seen = [r for r in rounds if r.logs or r.segments]
    loading = [r for r in seen if len(r.logs) == 1 and len(r.segments) == 2]
    partial = [i for i, r in enumerate(seen) if r not in loading]  # gauges (un)registering
    assert set(partial) <= {0, len(seen) - 1}, [seen[i] for i in partial]
    assert len(loading) >= 3
    totals = [sum(r.logs.values()) for r in loading]
    assert totals[0] <= 14 and totals == sorted(totals, reverse=True) and totals[-1] < totals[0]
    assert all(set(r.segments.values()) <= {None} for r in seen)  # partial reads: none yet
    assert {int(r.report.broker_state) for r in loading} == {1}
    assert {r.report.recovery.phase for r in loading} == {RecoveryPhase.LOADING}  # type: ignore[union-attr]
    # after the loading: STARTING without gauges (registration not yet acknowledged), then on
    after = rounds[rounds.index(seen[-1]) + 1 :]
    waiting = [r for r in after if int(r.report.broker_state) == 1]
    assert len(waiting) >= 2 and all(r.report.recovery is None for r in after)

    # and through a running agent, as a roller sees it: state 1 and the phase `loading`. The
    # agent first, reading the port the broker will open (its start, seconds of CPU on a loaded
    # machine, could otherwise outlast the broker's 5 s before its loading ends)
    port = free_port()
    with Agent(pki, f"127.0.0.1:{port}") as agent:
        wait_until(
            lambda: "jmx-unreachable" in agent.state().body,
            timeout=60,
            interval=0.2,
            what="the agent reading the broker's port (refused: not started yet)",
        )
        with Broker(*flags, port=port):
            bodies = until_running(agent)
    reported = [body for body in bodies if "recovery" in body]
    assert reported and {body["brokerState"] for body in reported} == {1}
    assert {body["recovery"]["phase"] for body in reported} == {"loading"}  # type: ignore[index]
    assert {body["recovery"]["remainingSegmentsToRecover"] for body in reported} == {0}  # type: ignore[index]
