"""Operating a roll on a real Kafka cluster: restart windows, pausing a running roll, nodes
held for later (the gates on alerts and consumer lag: test_gates_real.py).

One real KRaft cluster of 3 combined nodes for the module (tests/kafka's jars, an agent beside
each node, restarts through the inventory's commands: `rollguard.peers.realcluster`). The
roller and `rollguard roll pause|resume` are the installed commands, each its own process, as
an operator runs them side by side; the pause lives on the roll's lease file in --state-dir.
Windows are computed from the clock now, in a zone without daylight saving (Asia/Kolkata,
UTC+05:30), so that one opens seconds after the roll starts.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.roller.roll.gates.windows import DAY_NAMES
from rollguard.shared.wire import parse_time

from helpers import BIN, Pki, wait_until
from real_kafka import watched

pytestmark = pytest.mark.timeout(600)

QUICK = ["--poll-interval", "0.5"]
ZONE = ZoneInfo("Asia/Kolkata")


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("pause-hold")
    with real_cluster(folder, pki, data_mb=5, combined=3) as real:
        yield real


def events(state: Path, roll_id: str) -> list[dict[str, Any]]:
    path = state / f"events-{roll_id}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def of(state: Path, roll_id: str, action: str) -> list[dict[str, Any]]:
    return [e for e in events(state, roll_id) if e["action"] == action]


def pause(action: str, roll_id: str, state: Path) -> subprocess.CompletedProcess[str]:
    args = [str(BIN / "rollguard"), "roll", action, "--roll-id", roll_id, "--state-dir", str(state)]
    args += ["--output", "json"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def lease(state: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((state / "lease.json").read_text())
    return record


def at(event: dict[str, Any]) -> float:
    return parse_time(event["ts"]).timestamp()


def test_a_paused_roll_starts_no_restart_keeps_its_lease_and_goes_on_when_resumed(
    cluster: RealCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = len(cluster.restarts.log)
    command = cluster.roll_command(state, "p1", "--only", "kafka-0,kafka-1", *QUICK)
    with watched(cluster) as watch:
        roll = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            err, paused_at, resumed_at = paused_mid_roll(cluster, roll, state, first)
        finally:
            if roll.poll() is None:
                roll.kill()
                roll.communicate()
    print(f"\n{watch.summary()}")
    assert roll.returncode == 0, err
    # By the control server's own log, not the roller's events: one restart before the pause
    # (the scenario: paused mid-roll), none while paused, the other after the resume.
    ours = cluster.restarts.log[first:]
    assert sorted(r.node_id for r in ours) == [0, 1], ours
    assert ours[0].at < paused_at < resumed_at < ours[1].at, (ours, paused_at, resumed_at)
    assert cluster.restarts.between(paused_at, resumed_at) == []
    assert resumed_at - paused_at > 10  # held through two lease renewals, not a blink
    watch.assert_safe()
    assert "paused" in err  # said on stderr while it waited
    assert not (state / "lease.json").exists()  # released at the end
    # A roll that is not running cannot be resumed.
    late = pause("resume", "p1", state)
    assert late.returncode == 1 and "roll p1 is not running" in late.stderr


def paused_mid_roll(
    cluster: RealCluster, roll: subprocess.Popen[str], state: Path, first: int
) -> tuple[str, float, float]:
    """Pause the roll once the control server saw its first restart, hold it through two lease
    renewals, resume it; its stderr and the moments (monotonic) of the pause and the resume."""
    wait_until(lambda: len(cluster.restarts.log) > first, 120, what="the roll's first restart")
    paused = pause("pause", "p1", state)
    paused_at = time.monotonic()
    assert paused.returncode == 0, paused.stderr
    said = json.loads(paused.stdout)
    assert said["state"] == "paused" and said["rollId"] == "p1", said
    assert said["paused"].startswith("by ") and "@" in said["paused"]
    # The restart under way is waited for; then the gate holds the roll.
    closed = wait_until(
        lambda: [e for e in of(state, "p1", "gate-closed") if e.get("gate") == "pause"],
        120,
        what="the roll held by its pause",
    )
    assert "rollguard roll resume --roll-id p1" in closed[0]["reason"]
    # Paused for two renewals of the lease: still held by the roller, still paused.
    renewed = lease(state)["renewedAt"]
    wait_until(lambda: lease(state)["renewedAt"] != renewed, 30, what="a lease renewal")
    renewed = lease(state)["renewedAt"]
    wait_until(lambda: lease(state)["renewedAt"] != renewed, 30, what="a second renewal")
    assert roll.poll() is None  # a paused roll does not fail
    assert lease(state)["paused"] == said["paused"]
    assert len(cluster.restarts.log) == first + 1  # the control server's own count
    # Another roll id is not the one running: refused, naming the one that is.
    other = pause("pause", "p9", state)
    assert other.returncode == 1 and "roll p9 is not running" in other.stderr
    assert "(roll p1)" in other.stderr
    resumed_at = time.monotonic()
    resumed = pause("resume", "p1", state)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["state"] == "running"
    _, err = roll.communicate(timeout=240)
    return err, paused_at, resumed_at


def test_held_nodes_are_left_for_later_and_a_resume_without_hold_takes_them(
    cluster: RealCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    opened = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    within = ["--window", window(opened)]  # open: it changes nothing
    seen = len(cluster.restarts.log)
    with watched(cluster) as watch:
        first = subprocess.run(
            cluster.roll_command(state, "h1", "--hold", "kafka-1,kafka-2", *within, *QUICK),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert first.returncode == 0, first.stderr
    # the control server's own log: kafka-0 alone
    assert [r.node_id for r in cluster.restarts.log[seen:]] == [0]
    watch.assert_safe()
    assert [e["node"] for e in of(state, "h1", "restart")] == ["kafka-0"]
    assert sorted(e["node"] for e in of(state, "h1", "hold")) == ["kafka-1", "kafka-2"]
    assert not of(state, "h1", "gate-closed")
    assert "held kafka-1, kafka-2" in first.stdout + first.stderr
    journal = json.loads((state / "roll-h1.json").read_text())
    assert journal["state"] == "completed" and "held for later" in journal["reason"]
    assert journal["nodes"]["kafka-1"]["status"] == "held"
    before = cluster.restarts.of(1), cluster.restarts.of(2)

    without_id = cluster.roll_command(state, "h1")[:-2]  # --roll-id h1 is the resume's
    seen = len(cluster.restarts.log)
    with watched(cluster) as watch:
        resumed = subprocess.run(
            [*without_id, "--resume", "h1", "--hold", "kafka-2", *QUICK],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert [r.node_id for r in cluster.restarts.log[seen:]] == [1]
    watch.assert_safe()
    assert [e["node"] for e in of(state, "h1", "restart")] == ["kafka-0", "kafka-1"]
    assert (cluster.restarts.of(1), cluster.restarts.of(2)) == (before[0] + 1, before[1])
    journal = json.loads((state / "roll-h1.json").read_text())
    assert journal["nodes"]["kafka-1"]["status"] == "restarted"
    assert journal["nodes"]["kafka-2"]["status"] == "held"


def test_a_hold_naming_no_node_is_exit_2_before_anything(
    cluster: RealCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    done = subprocess.run(
        cluster.roll_command(state, "h2", "--hold", "kafka-7"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--hold kafka-7: no such node" in done.stderr
    assert not of(state, "h2", "restart")


def window(opening: datetime, minutes: int = 30) -> str:
    """A window opening at `opening` (whole seconds) for `minutes`, on Kolkata's clock."""
    start = opening.astimezone(ZONE)
    end = start + timedelta(minutes=minutes)  # before START past midnight: the next day's
    return f"{DAY_NAMES[start.weekday()]} {start:%H:%M:%S}-{end:%H:%M:%S} {ZONE.key}"


def test_a_roll_outside_its_window_restarts_nothing_until_it_opens(
    cluster: RealCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    before = cluster.restarts.of(2)
    # far enough for a roll started under load to be held first for longer than --safety-wait
    opening = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    given = window(opening)
    # --safety-wait 3s: were the window's wait budgeted as a health gate's, it would fail there
    flags = ["--only", "kafka-2", "--window", given, "--safety-wait", "3s", *QUICK]
    command = cluster.roll_command(state, "w1", *flags)
    with watched(cluster) as watch:
        roll = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            held = wait_until(lambda: of(state, "w1", "gate-closed"), 30, what="held by its window")
            # the scenario: the roll running, held, before its window opens
            assert datetime.now(UTC) < opening, "the roll took too long to start for this test"
            assert roll.poll() is None and cluster.restarts.of(2) == before
            _, err = roll.communicate(timeout=240)
        finally:
            if roll.poll() is None:
                roll.kill()
                roll.communicate()
    assert roll.returncode == 0, err
    assert cluster.restarts.of(2) == before + 1
    # the control server's own clock: its one restart at or after the opening
    assert cluster.restarts.log[-1].node_id == 2
    assert cluster.restarts.log[-1].wall >= opening.timestamp(), cluster.restarts.log[-1]
    watch.assert_safe()
    (closed,) = held  # held once, by the window, saying when it opens; then open
    assert (closed["gate"], closed["name"], closed["opensAt"]) == ("window", given,
                                                                   opening.isoformat())  # fmt: skip
    assert opening - datetime.fromisoformat(closed["ts"]) > timedelta(seconds=3)  # never failed
    assert len(of(state, "w1", "gate-open")) == 1
    local = opening.astimezone(ZONE)
    said = f"the next opens {DAY_NAMES[local.weekday()]} {local:%H:%M:%S} Asia/Kolkata (in "
    assert f"window gate: outside every restart window ({given}); {said}" in err
    (restart,) = of(state, "w1", "restart")
    assert datetime.fromisoformat(restart["ts"]) >= opening


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("Tues 22:00-05:00 UTC", "'Tues' is not a day; give Mon, Tue,"),
        ("Mon-Fri 22:00-22:00 UTC", "22:00-22:00 is an empty window"),
        ("Mon-Fri 22:00-05:00 Europe/Berln", "'Europe/Berln' is not a time zone"),
        ("22:00-05:00 UTC", "'22:00-05:00 UTC' is not a window: give DAYS START-END ZONE"),
    ],
)
def test_a_bad_window_is_exit_2_with_one_line_and_nothing_done(
    cluster: RealCluster, tmp_path: Path, given: str, message: str
) -> None:
    before = list(cluster.restarts.log)
    state = tmp_path / "state"
    command = cluster.roll_command(state, "w2", "--window", given)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rollguard: --window: ") and message in line, line
    assert cluster.restarts.log == before and not state.exists()
