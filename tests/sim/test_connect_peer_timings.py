"""The Connect peer (`ConnectSim`) follows a real Kafka Connect 4.3.1 worker's timings.

Measured on a real distributed worker by polling `GET /connectors/X/status` every ~5 ms: a KIP-745
restart answers 202 before anything happens, the old state shows for a while, then RESTARTING
briefly (the connector before its tasks), then the new state; a stop shows STOPPED with the tasks
still listed, then without; a resumed STOPPED connector shows RUNNING with no task, then its
tasks. The first tests poll the peer the same way, on the real clock with the default delays, and
check each sequence in order, and that no change comes before its delays; the last ones check, on
a fake clock, that each transition happens exactly at the configured time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import httpx
import pytest

from rollguard.peers.connect import DEFAULT_TRACE, ConnectSim, Restart, State

from helpers import Clock

RESTART_FAILED = {"includeTasks": "true", "onlyFailed": "true"}
RESTART_ALL = {"includeTasks": "true"}
POLL = 0.005  # seconds between two status reads, as in the measurements
DEADLINE = 1.5  # seconds a sequence may take, at most, on the real clock
QUIET = 0.1  # seconds the last state must hold


def shape(status: dict[str, object]) -> str:
    """ "CONNECTOR TASK0 TASK1 ..." from a status body, e.g. "STOPPED RUNNING" or "STOPPED"."""
    connector = status["connector"]
    tasks = status["tasks"]
    assert isinstance(connector, dict) and isinstance(tasks, list)
    return " ".join([connector["state"], *(t["state"] for t in tasks)])


class Read(NamedTuple):
    """One status read: when it was asked and answered (seconds after the REST call was sent)
    and what it showed."""

    asked: float
    answered: float
    shape: str


def watch(
    client: httpx.Client, name: str, sent: float, expected: Sequence[tuple[str, float]]
) -> list[float | None]:
    """Poll the status every `POLL` seconds until it has gone through the `expected` shapes and
    the last has held for `QUIET` (or `DEADLINE`). Each shape comes with how long the peer shows
    it (the first counted from `sent`; the last holds). Asserts the shapes came in that order,
    each first seen no sooner than the delays before it allow, and any shape never seen fell
    between two reads further apart than it shows (a poller that slow can miss it, as a real
    one can). Returns when each was first seen: when the read showing it was answered, seconds
    after `sent`, or None."""
    reads: list[Read] = []
    first: list[float | None] = [None] * len(expected)
    at = -1  # the index in `expected` of what the last read showed
    while True:
        asked = time.monotonic()
        now = shape(client.get(f"/connectors/{name}/status").json())
        reads.append(Read(asked - sent, time.monotonic() - sent, now))
        read = reads[-1]
        history = [(round(r.answered, 3), r.shape) for r in reads]
        if at < 0 or now != expected[at][0]:
            later = [i for i in range(at + 1, len(expected)) if expected[i][0] == now]
            assert later, f"{now!r} out of order: {history}"
            skipped = expected[at + 1 : later[0]]
            gap = read.answered - (reads[-2].asked if len(reads) > 1 else 0.0)
            assert gap > sum(d for _, d in skipped), f"{skipped} not seen: {history}"
            at = later[0]
            first[at] = read.answered
            earliest = sum(d for _, d in expected[:at])
            assert read.answered >= earliest, f"{now!r} before {earliest}s: {history}"
        held = read.answered - (first[at] or 0.0)
        if (at == len(expected) - 1 and held >= QUIET) or read.answered > DEADLINE:
            break
        time.sleep(max(0.0, asked + POLL - time.monotonic()))
    assert at == len(expected) - 1 and held >= QUIET, f"not {expected[-1][0]!r}: {history}"
    return first


@pytest.fixture
def real() -> Iterator[tuple[ConnectSim, httpx.Client]]:
    """The peer with its default (measured) delays on the real clock."""
    with ConnectSim() as sim, httpx.Client(base_url=sim.url, timeout=5) as client:
        yield sim, client


# --- the real clock, the default delays ----------------------------------------------------------


def test_the_default_delays_are_the_measured_ones() -> None:
    sim = ConnectSim()
    assert (sim.restart_lag, sim.restart_delay, sim.task_restart_after) == (0.03, 0.015, 0.19)
    assert (sim.state_lag, sim.stop_delay, sim.resume_delay) == (0.015, 0.3, 0.08)


def test_a_failed_task_that_fails_again_shows_failed_restarting_failed(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=1, task_states=["FAILED"])
    sim.fail_after_restart("sink", 0, times=None, trace="still broken")
    sent = time.monotonic()
    answer = client.post("/connectors/sink/restart", params=RESTART_FAILED)
    assert answer.status_code == 202
    # The plan, before anything happened: the task RESTARTING with the trace it had.
    assert answer.json()["tasks"] == [
        {
            "id": 0,
            "state": "RESTARTING",
            "worker_id": "connect-1.connect:8083",
            "trace": DEFAULT_TRACE,
        }
    ]
    watch(
        client,
        "sink",
        sent,
        [
            ("RUNNING FAILED", sim.restart_lag),
            ("RUNNING RESTARTING", sim.restart_delay),
            ("RUNNING FAILED", 0),
        ],
    )
    assert sim.status("sink")["tasks"][0]["trace"] == "still broken"


def test_a_failed_task_restarted_healthy_shows_failed_restarting_running(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=2, task_states=["RUNNING", "FAILED"])
    sent = time.monotonic()
    assert client.post("/connectors/sink/restart", params=RESTART_FAILED).status_code == 202
    watch(
        client,
        "sink",
        sent,
        [
            ("RUNNING RUNNING FAILED", sim.restart_lag),
            ("RUNNING RUNNING RESTARTING", sim.restart_delay),
            ("RUNNING RUNNING RUNNING", 0),
        ],
    )
    assert sim.restart_counts() == {("sink", 1): 1}


def test_restarting_a_healthy_connector_with_its_tasks_restarts_the_connector_first(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=1)
    sent = time.monotonic()
    answer = client.post("/connectors/sink/restart", params=RESTART_ALL)
    assert answer.status_code == 202
    assert shape(answer.json()) == "RESTARTING RESTARTING"  # the plan
    watch(
        client,
        "sink",
        sent,
        [
            ("RUNNING RUNNING", sim.restart_lag),
            ("RESTARTING RUNNING", sim.task_restart_after),
            ("RUNNING RESTARTING", sim.restart_delay),
            ("RUNNING RUNNING", 0),
        ],
    )


def test_a_stopped_connector_lists_its_tasks_for_a_while_then_none(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=1)
    sent = time.monotonic()
    assert client.put("/connectors/sink/stop").status_code == 204
    assert client.get("/connectors/sink/tasks").json() == []  # the task configs go at once
    watch(
        client,
        "sink",
        sent,
        [("RUNNING RUNNING", sim.state_lag), ("STOPPED RUNNING", sim.stop_delay), ("STOPPED", 0)],
    )
    assert client.get("/connectors/sink/status").json()["tasks"] == []


def test_a_resumed_stopped_connector_runs_with_no_task_listed_then_lists_them(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=2, state=State.STOPPED)
    sent = time.monotonic()
    assert client.put("/connectors/sink/resume").status_code == 202
    # The task configs are back before the status lists the tasks.
    assert [t["id"]["task"] for t in client.get("/connectors/sink/tasks").json()] == [0, 1]
    assert client.get("/connectors/sink/status").json()["tasks"] == []
    watch(
        client,
        "sink",
        sent,
        [("STOPPED", sim.state_lag), ("RUNNING", sim.resume_delay), ("RUNNING RUNNING RUNNING", 0)],
    )


def test_pause_then_resume_of_a_running_connector(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=1)
    sent = time.monotonic()
    assert client.put("/connectors/sink/pause").status_code == 202
    watch(client, "sink", sent, [("RUNNING RUNNING", sim.state_lag), ("PAUSED PAUSED", 0)])
    sent = time.monotonic()
    assert client.put("/connectors/sink/resume").status_code == 202
    watch(client, "sink", sent, [("PAUSED PAUSED", sim.state_lag), ("RUNNING RUNNING", 0)])


def test_plain_and_single_task_restarts_are_done_when_answered(
    real: tuple[ConnectSim, httpx.Client],
) -> None:
    sim, client = real
    sim.add_connector("sink", tasks=2, state=State.FAILED, task_states=["FAILED", "RUNNING"])
    assert client.post("/connectors/sink/restart").status_code == 204
    assert shape(client.get("/connectors/sink/status").json()) == "RUNNING FAILED RUNNING"
    assert client.post("/connectors/sink/tasks/0/restart").status_code == 204
    assert shape(client.get("/connectors/sink/status").json()) == "RUNNING RUNNING RUNNING"


# --- a fake clock: each transition at its configured time ---------------------------------------


# Binary fractions, so that each due time is exact.
LAG, DELAY, TASKS_AFTER = 0.5, 0.25, 2.0
STATE_LAG, STOP, RESUME = 0.125, 1.0, 0.75
JUST = 1e-6  # a moment before a due time


@pytest.fixture
def timed(clock: Clock) -> Iterator[tuple[ConnectSim, httpx.Client]]:
    sim = ConnectSim(
        restart_lag=LAG,
        restart_delay=DELAY,
        task_restart_after=TASKS_AFTER,
        state_lag=STATE_LAG,
        stop_delay=STOP,
        resume_delay=RESUME,
        clock=clock,
    )
    with sim, httpx.Client(base_url=sim.url, timeout=5) as client:
        yield sim, client


def at(client: httpx.Client, clock: Clock, when: float, name: str = "sink") -> str:
    clock.now = when
    return shape(client.get(f"/connectors/{name}/status").json())


def test_a_restarted_failed_task_changes_exactly_at_its_times(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("sink", tasks=1, task_states=["FAILED"])
    t0 = clock.now
    assert client.post("/connectors/sink/restart", params=RESTART_FAILED).status_code == 202
    assert at(client, clock, t0 + LAG - JUST) == "RUNNING FAILED"
    assert client.get("/connectors/sink/status").json()["tasks"][0]["trace"] == DEFAULT_TRACE
    assert at(client, clock, t0 + LAG) == "RUNNING RESTARTING"
    assert "trace" not in client.get("/connectors/sink/status").json()["tasks"][0]
    assert at(client, clock, t0 + LAG + DELAY - JUST) == "RUNNING RESTARTING"
    assert at(client, clock, t0 + LAG + DELAY) == "RUNNING RUNNING"
    assert sim.restart_log == [Restart("sink", 0, t0)]


def test_a_restarted_connector_and_tasks_change_exactly_at_their_times(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("sink", tasks=2)
    t0 = clock.now
    assert client.post("/connectors/sink/restart", params=RESTART_ALL).status_code == 202
    assert at(client, clock, t0 + LAG - JUST) == "RUNNING RUNNING RUNNING"
    assert at(client, clock, t0 + LAG) == "RESTARTING RUNNING RUNNING"
    assert at(client, clock, t0 + LAG + TASKS_AFTER - JUST) == "RESTARTING RUNNING RUNNING"
    assert at(client, clock, t0 + LAG + TASKS_AFTER) == "RUNNING RESTARTING RESTARTING"
    assert at(client, clock, t0 + LAG + TASKS_AFTER + DELAY - JUST) == (
        "RUNNING RESTARTING RESTARTING"
    )
    assert at(client, clock, t0 + LAG + TASKS_AFTER + DELAY) == "RUNNING RUNNING RUNNING"


def test_a_slow_restart_shows_the_connector_restarting_for_the_restart_delay_at_least(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.set_delays(restart=3.0)  # longer than TASKS_AFTER
    sim.add_connector("sink", tasks=1)
    t0 = clock.now
    assert client.post("/connectors/sink/restart", params=RESTART_ALL).status_code == 202
    assert at(client, clock, t0 + LAG) == "RESTARTING RUNNING"
    assert at(client, clock, t0 + LAG + TASKS_AFTER) == "RESTARTING RESTARTING"
    assert at(client, clock, t0 + LAG + 3.0 - JUST) == "RESTARTING RESTARTING"
    assert at(client, clock, t0 + LAG + 3.0) == "RUNNING RESTARTING"
    assert at(client, clock, t0 + LAG + TASKS_AFTER + 3.0 - JUST) == "RUNNING RESTARTING"
    assert at(client, clock, t0 + LAG + TASKS_AFTER + 3.0) == "RUNNING RUNNING"


def test_a_connector_restarted_alone_shows_restarting_for_the_restart_delay(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("sink", tasks=1, state=State.FAILED, task_states=["RUNNING"])
    t0 = clock.now
    assert client.post("/connectors/sink/restart", params=RESTART_FAILED).status_code == 202
    assert at(client, clock, t0 + LAG - JUST) == "FAILED RUNNING"
    assert at(client, clock, t0 + LAG) == "RESTARTING RUNNING"
    assert at(client, clock, t0 + LAG + DELAY - JUST) == "RESTARTING RUNNING"
    assert at(client, clock, t0 + LAG + DELAY) == "RUNNING RUNNING"


def test_a_stop_changes_exactly_at_its_times_and_unlocks_offsets_at_once(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("sink", tasks=2)
    assert client.delete("/connectors/sink/offsets").status_code == 400
    t0 = clock.now
    assert client.put("/connectors/sink/stop").status_code == 204
    assert client.get("/connectors/sink/tasks").json() == []
    assert client.get("/connectors/sink").json()["tasks"] == []
    # Target STOPPED and no task configs: the offsets rule is met before the status shows it.
    assert client.delete("/connectors/sink/offsets").status_code == 200
    assert at(client, clock, t0 + STATE_LAG - JUST) == "RUNNING RUNNING RUNNING"
    assert at(client, clock, t0 + STATE_LAG) == "STOPPED RUNNING RUNNING"
    assert sim.state("sink") is State.STOPPED
    assert at(client, clock, t0 + STATE_LAG + STOP - JUST) == "STOPPED RUNNING RUNNING"
    assert at(client, clock, t0 + STATE_LAG + STOP) == "STOPPED"


def test_a_resume_of_a_stopped_connector_changes_exactly_at_its_times(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("sink", tasks=2, state=State.STOPPED)
    t0 = clock.now
    assert client.put("/connectors/sink/resume").status_code == 202
    assert len(client.get("/connectors/sink/tasks").json()) == 2
    assert client.delete("/connectors/sink/offsets").status_code == 400
    assert at(client, clock, t0 + STATE_LAG - JUST) == "STOPPED"
    assert at(client, clock, t0 + STATE_LAG) == "RUNNING"
    assert at(client, clock, t0 + STATE_LAG + RESUME - JUST) == "RUNNING"
    assert at(client, clock, t0 + STATE_LAG + RESUME) == "RUNNING RUNNING RUNNING"


def test_pause_and_resume_change_exactly_at_the_state_lag(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    _, client = timed
    timed[0].add_connector("sink", tasks=1)
    t0 = clock.now
    assert client.put("/connectors/sink/pause").status_code == 202
    assert at(client, clock, t0 + STATE_LAG - JUST) == "RUNNING RUNNING"
    assert at(client, clock, t0 + STATE_LAG) == "PAUSED PAUSED"
    t1 = clock.now
    assert client.put("/connectors/sink/resume").status_code == 202
    assert at(client, clock, t1 + STATE_LAG - JUST) == "PAUSED PAUSED"
    assert at(client, clock, t1 + STATE_LAG) == "RUNNING RUNNING"


def test_set_delays_changes_each_delay_and_zero_is_immediate(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.set_delays(restart=0, stop=0, restart_lag=0, task_restart_after=0, state_lag=0, resume=0)
    assert (sim.restart_lag, sim.restart_delay, sim.task_restart_after) == (0, 0, 0)
    assert (sim.state_lag, sim.stop_delay, sim.resume_delay) == (0, 0, 0)
    sim.add_connector("sink", tasks=1, task_states=["FAILED"])
    assert client.post("/connectors/sink/restart", params=RESTART_ALL).status_code == 202
    assert shape(client.get("/connectors/sink/status").json()) == "RUNNING RUNNING"
    assert client.put("/connectors/sink/stop").status_code == 204
    assert shape(client.get("/connectors/sink/status").json()) == "STOPPED"
    assert client.put("/connectors/sink/resume").status_code == 202
    assert shape(client.get("/connectors/sink/status").json()) == "RUNNING RUNNING"
