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
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from rollguard.peers.harness import Done, InventoryRoll, Running
from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.roller.roll.gates.windows import DAY_NAMES

from helpers import Pki, wait_until
from real_kafka import as_operator, watched

pytestmark = pytest.mark.timeout(600)

QUICK = ["--poll-interval", "0.5"]
ZONE = ZoneInfo("Asia/Kolkata")


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("pause-hold")
    with real_cluster(folder, pki, data_mb=5, combined=3) as real:
        yield real


JSON = ("--output", "json")


def renewed_at(target: InventoryRoll) -> object:
    lease = target.lease()
    assert lease is not None, "no roll holds the lease"
    return lease["renewedAt"]


def test_a_paused_roll_starts_no_restart_keeps_its_lease_and_goes_on_when_resumed(
    cluster: RealCluster, tmp_path: Path
) -> None:
    target = as_operator(cluster, tmp_path, "p1")
    first = len(cluster.restarts.log)
    with watched(cluster) as watch, target.start("--only", "kafka-0,kafka-1", *QUICK) as roll:
        done, paused_at, resumed_at = paused_mid_roll(cluster, target, roll, first)
    print(f"\n{watch.summary()}")
    err = done.stderr
    assert done.returncode == 0, err
    # By the control server's own log, not the roller's events: one restart before the pause
    # (the scenario: paused mid-roll), none while paused, the other after the resume.
    ours = cluster.restarts.log[first:]
    assert sorted(r.node_id for r in ours) == [0, 1], ours
    assert ours[0].at < paused_at < resumed_at < ours[1].at, (ours, paused_at, resumed_at)
    assert cluster.restarts.between(paused_at, resumed_at) == []
    assert resumed_at - paused_at > 10  # held through two lease renewals, not a blink
    watch.assert_safe()
    assert "paused" in err  # said on stderr while it waited
    assert target.lease() is None  # released at the end
    # A roll that is not running cannot be resumed.
    late = target.resume(*JSON)
    assert late.returncode == 1 and "roll p1 is not running" in late.stderr


def paused_mid_roll(
    cluster: RealCluster, target: InventoryRoll, roll: Running, first: int
) -> tuple[Done, float, float]:
    """Pause the roll once the control server saw its first restart, hold it through two lease
    renewals, resume it; how it ended and the moments (monotonic) of the pause and the resume."""
    wait_until(lambda: len(cluster.restarts.log) > first, 120, what="the roll's first restart")
    paused = target.pause(*JSON)
    paused_at = time.monotonic()
    assert paused.returncode == 0, paused.stderr
    said = json.loads(paused.stdout)
    assert said["state"] == "paused" and said["rollId"] == "p1", said
    assert said["paused"].startswith("by ") and "@" in said["paused"]
    # The restart under way is waited for; then the gate holds the roll.
    closed = wait_until(
        lambda: [e for e in roll.events().of("gate-closed") if e.get("gate") == "pause"],
        120,
        what="the roll held by its pause",
    )
    assert "rollguard roll resume --roll-id p1" in closed[0]["reason"]
    # Paused for two renewals of the lease: still held by the roller, still paused.
    renewed = renewed_at(target)
    wait_until(lambda: renewed_at(target) != renewed, 30, what="a lease renewal")
    renewed = renewed_at(target)
    wait_until(lambda: renewed_at(target) != renewed, 30, what="a second renewal")
    assert roll.poll() is None  # a paused roll does not fail
    assert (target.lease() or {})["paused"] == said["paused"]
    assert len(cluster.restarts.log) == first + 1  # the control server's own count
    # Another roll id is not the one running: refused, naming the one that is.
    other = target.pause(*JSON, roll_id="p9")
    assert other.returncode == 1 and "roll p9 is not running" in other.stderr
    assert "(roll p1)" in other.stderr
    resumed_at = time.monotonic()
    resumed = target.resume(*JSON)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["state"] == "running"
    return roll.wait(240), paused_at, resumed_at


def test_held_nodes_are_left_for_later_and_a_resume_without_hold_takes_them(
    cluster: RealCluster, tmp_path: Path
) -> None:
    target = as_operator(cluster, tmp_path, "h1")
    opened = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    within = ["--window", window(opened)]  # open: it changes nothing
    seen = len(cluster.restarts.log)
    with watched(cluster) as watch:
        first = target.roll("--hold", "kafka-1,kafka-2", *within, *QUICK, timeout=300)
    assert first.returncode == 0, first.stderr
    # the control server's own log: kafka-0 alone
    assert [r.node_id for r in cluster.restarts.log[seen:]] == [0]
    watch.assert_safe()
    assert first.restarted() == ["kafka-0"]
    assert sorted(e["node"] for e in first.of("hold")) == ["kafka-1", "kafka-2"]
    assert not first.of("gate-closed")
    assert "held kafka-1, kafka-2" in first.stdout + first.stderr
    journal = first.journal
    assert journal is not None
    assert journal["state"] == "completed" and "held for later" in journal["reason"]
    assert journal["nodes"]["kafka-1"]["phase"] == "held"
    before = cluster.restarts.of(1), cluster.restarts.of(2)

    seen = len(cluster.restarts.log)
    with watched(cluster) as watch:  # --roll-id h1 is the resume's
        resumed = target.roll("--resume", "h1", "--hold", "kafka-2", *QUICK, roll_id=None,
                              timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert [r.node_id for r in cluster.restarts.log[seen:]] == [1]
    watch.assert_safe()
    assert resumed.restarted() == ["kafka-0", "kafka-1"]
    assert (cluster.restarts.of(1), cluster.restarts.of(2)) == (before[0] + 1, before[1])
    journal = resumed.journal
    assert journal is not None
    assert (journal["nodes"]["kafka-1"]["phase"], journal["nodes"]["kafka-1"]["how"]) == (
        "done",
        "restart",
    )
    assert journal["nodes"]["kafka-2"]["phase"] == "held"
    # The resumed roll's outcome is the whole roll's: kafka-0, restarted by the first run, too.
    assert "restarted 2 (kafka-0, kafka-1), skipped 0, held kafka-2" in resumed.stdout, (
        resumed.stdout
    )


def test_a_hold_naming_no_node_is_exit_2_before_anything(
    cluster: RealCluster, tmp_path: Path
) -> None:
    done = as_operator(cluster, tmp_path, "h2").roll("--hold", "kafka-7", timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--hold kafka-7: no such node" in done.stderr
    assert not done.of("restart")


def window(opening: datetime, minutes: int = 30) -> str:
    """A window opening at `opening` (whole seconds) for `minutes`, on Kolkata's clock."""
    start = opening.astimezone(ZONE)
    end = start + timedelta(minutes=minutes)  # before START past midnight: the next day's
    return f"{DAY_NAMES[start.weekday()]} {start:%H:%M:%S}-{end:%H:%M:%S} {ZONE.key}"


def test_a_roll_outside_its_window_restarts_nothing_until_it_opens(
    cluster: RealCluster, tmp_path: Path
) -> None:
    target = as_operator(cluster, tmp_path, "w1")
    before = cluster.restarts.of(2)
    # far enough for a roll started under load to be held first for longer than --safety-wait
    opening = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    given = window(opening)
    # --safety-wait 3s: were the window's wait budgeted as a health gate's, it would fail there
    flags = ["--only", "kafka-2", "--window", given, "--safety-wait", "3s", *QUICK]
    with watched(cluster) as watch, target.start(*flags) as roll:
        held = wait_until(lambda: roll.events().of("gate-closed"), 30, what="held by its window")
        # the scenario: the roll running, held, before its window opens
        assert datetime.now(UTC) < opening, "the roll took too long to start for this test"
        assert roll.poll() is None and cluster.restarts.of(2) == before
        done = roll.wait(240)
    err = done.stderr
    assert done.returncode == 0, err
    assert cluster.restarts.of(2) == before + 1
    # the control server's own clock: its one restart at or after the opening
    assert cluster.restarts.log[-1].node_id == 2
    assert cluster.restarts.log[-1].wall >= opening.timestamp(), cluster.restarts.log[-1]
    watch.assert_safe()
    (closed,) = held  # held once, by the window, saying when it opens; then open
    assert (closed["gate"], closed["name"], closed["opensAt"]) == ("window", given,
                                                                   opening.isoformat())  # fmt: skip
    assert opening - datetime.fromisoformat(closed["ts"]) > timedelta(seconds=3)  # never failed
    assert len(done.of("gate-open")) == 1
    local = opening.astimezone(ZONE)
    said = f"the next opens {DAY_NAMES[local.weekday()]} {local:%H:%M:%S} Asia/Kolkata (in "
    assert f"window gate: outside every restart window ({given}); {said}" in err
    (restart,) = done.of("restart")
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
    target = as_operator(cluster, tmp_path, "w2")
    done = target.roll("--window", given, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rollguard: --window: ") and message in line, line
    assert cluster.restarts.log == before and not target.state.exists()
