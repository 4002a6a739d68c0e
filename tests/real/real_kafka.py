"""What the real-Kafka test modules share: a started cluster with agents, topics and data, the
agent read through curl, and `rollguard roll` run as operators run it (defaults, no tuning)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.peers.realclients import Canary, IsrSampler
from rollguard.peers.realcluster import RealCluster

from helpers import wait_until

ROLL_ID = "real-1"


@dataclass
class Seen:
    """One look at a node through its agent."""

    at: float
    status: int
    body: dict[str, Any]

    @property
    def state(self) -> int | None:
        value = self.body.get("brokerState")
        return value if isinstance(value, int) else None

    @property
    def recovery(self) -> dict[str, Any] | None:
        value = self.body.get("recovery")
        return value if isinstance(value, dict) else None


def kafka_build_logged(log: str) -> tuple[str, str]:
    """The version and commit id Kafka logged at its latest start ("Kafka version: 4.4.0",
    "Kafka commitId: ..."; AppInfoParser): the node's own word, not its agent's."""
    versions = re.findall(r"Kafka version: (\S+)", log)
    commits = re.findall(r"Kafka commitId: (\S+)", log)
    assert versions and commits, "the node's log does not say its Kafka version and commit"
    return versions[-1], commits[-1]


def look(cluster: RealCluster, node_id: int) -> Seen:
    answer = cluster.agents[node_id].state()
    try:
        body = answer.json()
    except ValueError:
        body = {}
    return Seen(time.monotonic(), answer.status, body if isinstance(body, dict) else {})


def follow(cluster: RealCluster, node_id: int, until: float, every: float = 0.2) -> Iterator[Seen]:
    """The node's agent read every `every` seconds until `until` (monotonic)."""
    while time.monotonic() < until:
        yield look(cluster, node_id)
        time.sleep(every)


def roll(cluster: RealCluster, folder: Path, *extra: str, timeout: float = 900) -> Any:
    """`rollguard roll` with the inventory, as an operator runs it: no timing flag."""
    command = cluster.roll_command(folder / "state", ROLL_ID, *extra)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def closed_after(
    events: list[dict[str, Any]], gate: str, after: str = ""
) -> list[tuple[int, dict[str, Any]]]:
    """The gate-closed events of `gate` (index, event), after the first event whose action is
    `after` (none: from the start; an `after` not seen yet: none)."""
    actions = [e["action"] for e in events]
    if after and after not in actions:
        return []
    start = actions.index(after) if after else -1
    return [
        (i, e)
        for i, e in enumerate(events)
        if i > start and e["action"] == "gate-closed" and e["gate"] == gate
    ]


class Roll:
    """`rollguard roll` in the background, its output in files, its events read as it runs."""

    def __init__(self, cluster: RealCluster, folder: Path, roll_id: str, *flags: str) -> None:
        self.folder, self.roll_id = folder, roll_id
        command = cluster.roll_command(folder / "state", roll_id, *flags)
        with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err:
            self.started = time.monotonic()
            self.process = subprocess.Popen(command, stdout=out, stderr=err)

    def events(self) -> list[dict[str, Any]]:
        path = self.folder / "state" / f"events-{self.roll_id}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.endswith("}")]

    def actions(self) -> list[str]:
        return [e["action"] for e in self.events()]

    def output(self) -> str:
        return (self.folder / "stdout").read_text() + (self.folder / "stderr").read_text()

    def stderr(self) -> str:
        return (self.folder / "stderr").read_text()

    def gate_closed(self, gate: str, timeout: float = 90, *, after: str = "") -> dict[str, Any]:
        """The first gate-closed event of `gate` (with `after`, the first after the roll's first
        event of that action), waited for while the roll runs."""

        def seen() -> dict[str, Any] | None:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the roll ended ({self.process.returncode}):\n{self.output()}"
                )
            found = closed_after(self.events(), gate, after)
            return found[0][1] if found else None

        return wait_until(seen, timeout, interval=0.2, what=f"a gate-closed event of {gate}")

    def wait(self, timeout: float = 180) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the roll outlasted {timeout} s:\n{self.output()}") from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Roll:
        return self

    def __exit__(self, *exc: object) -> None:
        """A test that fails mid-roll stops it: a roll left running restarts nodes under the
        module's next test."""
        self.stop()


def until_running_again(
    cluster: RealCluster, node_id: int, before: str, since: float
) -> list[Seen]:
    """The node's agent read until it reports RUNNING for a JVM other than `before` (its
    `brokerStartedAt`), within 240 s of `since`; every answer, in order."""
    seen: list[Seen] = []
    for answer in follow(cluster, node_id, until=since + 240):
        seen.append(answer)
        if answer.state == 3 and answer.body.get("brokerStartedAt") != before:
            return seen
    raise AssertionError(f"node {node_id} not RUNNING again: last answers {seen[-5:]}")


def events(folder: Path) -> list[dict[str, Any]]:
    path = folder / "state" / f"events-{ROLL_ID}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_one_stretch_of_recovering(phases: list[str]) -> None:
    """A real recovery's phases, read by the agent: `loading` until a thread has a log's segments
    to recover (the first reads, on a slow start), then `recovering` in one stretch, then
    possibly `loading` again for the last reads (Kafka removes the replay's segment gauges before
    the logs gauge). Never `recovering` again after that: the phase does not flap."""
    assert "recovering" in phases, phases
    first = phases.index("recovering")
    last = len(phases) - phases[::-1].index("recovering")
    assert set(phases[:first]) <= {"loading"} and set(phases[last:]) <= {"loading"}, phases
    assert set(phases[first:last]) == {"recovering"}, phases


@dataclass
class Watch:
    """The test's own eyes on a real cluster during a roll: the control server's restart log
    (each restart's time, and every node's phase then from its own log), an ISR and quorum
    sampler and a canary. Never the product's agent, events or metrics."""

    cluster: RealCluster
    isr: IsrSampler
    canary: Canary
    began: float = 0.0
    ended: float = 0.0

    def assert_safe(self, *, max_gap: float = 2.0, together: float = 0.0) -> None:
        """No restart while the node itself loaded or recovered its logs nor while another
        was not back (but a batch's, restarted within `together` seconds of each other), never
        below min ISR nor leaderless, never blind for more than `max_gap` seconds, every canary
        send acknowledged and read back. Missing data fails."""
        unsafe = self.cluster.restarts.unsafe(together=together)
        assert unsafe == [], unsafe
        self.isr.assert_watched(max_gap=max_gap, elections=self.elections())
        self.canary.report().assert_no_harm()

    def elections(self) -> list[tuple[float, float]]:
        """After each restart of the quorum's leader (by the sampler's own answers), the
        seconds the quorum may take to elect another."""
        restarts = [(r.at, r.node_id) for r in self.cluster.restarts.log]
        return self.isr.elections(restarts) if self.isr.quorum else []

    def summary(self) -> str:
        report = self.canary.report()
        return (
            f"{self.ended - self.began:.0f} s watched; ISR sampler {self.isr.samples} samples, "
            f"longest gap {self.isr.longest_gap():.2f} s, {len(self.isr.errors)} errors, "
            f"{self.isr.retried} attempts retried; {len(self.elections())} elections; "
            f"canary {report.row()}"
        )


@contextlib.contextmanager
def watched(cluster: RealCluster, *, quorum: bool = False) -> Iterator[Watch]:
    """Watch `cluster` for the `with` block (its `canary` topic, min ISR 2 everywhere)."""
    kafka = cluster.kafka
    with (
        IsrSampler(kafka.bootstrap, {"*": 2}, quorum=quorum) as isr,
        Canary(kafka.bootstrap, "canary") as canary,
    ):
        watch = Watch(cluster, isr, canary, began=time.monotonic())
        yield watch
    watch.ended = time.monotonic()
