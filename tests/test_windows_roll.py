"""`rollguard roll --window` as operators run it: the installed command in its own process,
against the simulated cluster of tests/test_roll_end_to_end.py (broker JVMs, real agents over
mutual TLS, the Kafka-protocol peer, restarts through the inventory's commands).

Each window is computed from the clock now, in a zone without daylight saving (Asia/Kolkata,
UTC+05:30), so that it opens a few seconds after the roll starts. When each node restarted is
read from the cluster (its broker JVM's launch), independently of the roller's events.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from test_roll_end_to_end import events, restarts, roll_command, run, started

from rollguard.peers.cluster import ProcessCluster
from rollguard.roller.roll.windows import DAY_NAMES

from helpers import Pki, wait_until

ZONE = ZoneInfo("Asia/Kolkata")
PIPES = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    """One cluster for the module: each roll has its own state directory and counts restarts
    from where the last left them."""
    with ProcessCluster(pki, tmp_path_factory.mktemp("cluster")) as made:
        yield made


def window(opening: datetime, minutes: int = 30) -> str:
    """A window opening at `opening` (whole seconds) for `minutes`, on Kolkata's clock."""
    start = opening.astimezone(ZONE)
    end = start + timedelta(minutes=minutes)  # before START past midnight: the next day's
    return f"{DAY_NAMES[start.weekday()]} {start:%H:%M:%S}-{end:%H:%M:%S} {ZONE.key}"


def launches(cluster: ProcessCluster) -> dict[int, float]:
    """When each node's broker JVM was last launched (wall clock, seconds)."""
    return {node_id: node.broker.launched_at for node_id, node in cluster.nodes.items()}


def counts(cluster: ProcessCluster) -> list[int]:
    return [node.restarts for node in cluster.nodes.values()]


def at(event: dict[str, object]) -> datetime:
    return datetime.fromisoformat(str(event["ts"]))


def test_a_roll_outside_its_window_restarts_nothing_until_it_opens(
    cluster: ProcessCluster, pki: Pki, tmp_path: Path
) -> None:
    before = counts(cluster)
    opening = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=8)
    given = window(opening)
    # --safety-wait 3s: were the window's wait budgeted as a health gate's, it would fail there
    command = roll_command(cluster, pki, tmp_path, "--window", given, "--safety-wait", "3s")
    with started(command, **PIPES) as process:
        held = wait_until(
            lambda: [e for e in events(tmp_path) if e["action"] == "gate-closed"],
            timeout=30,
            what="the roll held by its window",
        )
        assert datetime.now(UTC) < opening, "the roll took too long to start for this test"
        assert restarts(tmp_path) == [] and counts(cluster) == before
        _, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    assert [c + 1 for c in before] == counts(cluster)
    # held once, by the window, saying when it opens; then open
    (closed,) = held
    assert (closed["gate"], closed["name"], closed["opensAt"]) == (
        "window",
        given,
        opening.isoformat(),
    )
    wait = opening - at(closed)
    assert wait > timedelta(seconds=3)  # held longer than --safety-wait, and never failed
    assert sum(e["action"] == "gate-closed" for e in events(tmp_path)) == 1
    assert [e["action"] for e in events(tmp_path)].count("gate-open") == 1
    local = opening.astimezone(ZONE)
    said = f"the next opens {DAY_NAMES[local.weekday()]} {local:%H:%M:%S} Asia/Kolkata (in "
    assert f"window gate: outside every restart window ({given}); {said}" in err
    # every restart at or after the opening, by the roller's events and by the cluster's JVMs
    assert all(at(e) >= opening for e in events(tmp_path) if e["action"] == "restart")
    assert min(launches(cluster).values()) >= opening.timestamp()
    assert "roll t1 completed: restarted 3, skipped 0" in err


def test_a_roll_inside_its_window_rolls_at_once(
    cluster: ProcessCluster, pki: Pki, tmp_path: Path
) -> None:
    before = counts(cluster)
    opened = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    done = run(roll_command(cluster, pki, tmp_path, "--window", window(opened)))
    assert done.returncode == 0, done.stderr
    assert [c + 1 for c in before] == counts(cluster)
    actions = [e["action"] for e in events(tmp_path)]
    assert "gate-closed" not in actions and "gate-open" not in actions
    assert sorted(restarts(tmp_path)) == ["kafka-0", "kafka-1", "kafka-2"]


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
    cluster: ProcessCluster, pki: Pki, tmp_path: Path, given: str, message: str
) -> None:
    before = counts(cluster)
    done = run(roll_command(cluster, pki, tmp_path, "--window", given), timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rollguard: --window: ") and message in line, line
    assert counts(cluster) == before
    assert not (tmp_path / "state").exists()
