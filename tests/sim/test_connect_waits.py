"""The rules every Connect `--wait` decides by (`rollguard.roller.connect.operations`), as
tables of what a worker's status shows over time, then the same waits ten cycles each on the
Connect peer at the real worker's timings (the real worker's own cycles are in
tests/real/test_real_connect.py)."""

from __future__ import annotations

import time

import pytest
from test_connect_support import Cli, cli  # noqa: F401

from rollguard.peers.connect import ConnectSim
from rollguard.roller.connect.client import ConnectorStatus, TaskState
from rollguard.roller.connect.operations import RestartWatch, is_running, is_stopped

JSON = ["--output", "json"]


def status(connector: str, *tasks: str) -> ConnectorStatus:
    return ConnectorStatus(
        "sink", connector, tasks=tuple(TaskState(i, s) for i, s in enumerate(tasks))
    )


@pytest.mark.parametrize(
    ("before", "seen", "settled_after"),
    [
        # a FAILED task healed: it changes, whether or not RESTARTING was seen
        ({"task 0": "FAILED"}, [("RUNNING", "FAILED"), ("RUNNING", "RUNNING")], 1),
        (
            {"task 0": "FAILED"},
            [("RUNNING", "FAILED"), ("RUNNING", "RESTARTING"), ("RUNNING", "RUNNING")],
            2,
        ),
        # failed again: settled only if the RESTARTING in between was seen
        (
            {"task 0": "FAILED"},
            [("RUNNING", "FAILED"), ("RUNNING", "RESTARTING"), ("RUNNING", "FAILED")],
            2,
        ),
        ({"task 0": "FAILED"}, [("RUNNING", "FAILED"), ("RUNNING", "FAILED")], None),
        # a running connector and task restarted: each must be seen out of RUNNING
        (
            {"connector": "RUNNING", "task 0": "RUNNING"},
            [
                ("RUNNING", "RUNNING"),
                ("RESTARTING", "RUNNING"),
                ("RUNNING", "RESTARTING"),
                ("RUNNING", "RUNNING"),
            ],
            3,
        ),
        (
            {"connector": "RUNNING", "task 0": "RUNNING"},
            [("RUNNING", "RUNNING"), ("RESTARTING", "RUNNING"), ("RUNNING", "RUNNING")],
            None,
        ),
        # a task moved by a rebalance: UNASSIGNED then RUNNING elsewhere
        ({"task 0": "RUNNING"}, [("RUNNING", "UNASSIGNED"), ("RUNNING", "RUNNING")], 1),
    ],
)
def test_a_restart_is_settled_once_each_restarted_instance_left_its_old_state(
    before: dict[str, str], seen: list[tuple[str, ...]], settled_after: int | None
) -> None:
    watch = RestartWatch(dict(before))
    settled = None
    for i, (connector, *tasks) in enumerate(seen):
        shown = status(connector, *tasks)
        watch.see(shown)
        if watch.settled(shown):
            settled = i
            break
    assert settled == settled_after


def test_after_the_fast_reads_a_running_task_counts_as_restarted_but_a_failed_one_does_not() -> (
    None
):
    watch = RestartWatch({"task 0": "RUNNING", "task 1": "FAILED"})
    shown = status("RUNNING", "RUNNING", "FAILED")
    watch.see(shown)
    watch.stop_looking()
    assert watch.unseen == {"task 0"} and watch.pending == {"task 1": "FAILED"}
    assert not watch.settled(shown)


def test_a_synchronous_restart_is_judged_on_what_shows_after_the_fast_reads() -> None:
    watch = RestartWatch({"task 0": "FAILED"}, synchronous=True)
    shown = status("RUNNING", "FAILED")
    watch.see(shown)
    assert not watch.settled(shown)
    watch.stop_looking()
    assert watch.settled(shown) and shown.failed  # failed again: the command says so


@pytest.mark.parametrize(
    ("shown", "stopped"),
    [
        (status("STOPPED"), True),
        (status("STOPPED", "RUNNING"), False),  # STOPPED shows 0.1-0.4 s before the tasks go
        (status("RUNNING", "RUNNING"), False),
        (status("PAUSED", "PAUSED"), False),
    ],
)
def test_stopped_means_no_task_listed(shown: ConnectorStatus, stopped: bool) -> None:
    assert is_stopped(shown) is stopped


@pytest.mark.parametrize(
    ("shown", "task_ids", "running"),
    [
        (status("RUNNING", "RUNNING", "RUNNING"), [0, 1], True),
        (status("RUNNING"), [0, 1], False),  # resumed, tasks not listed yet (60-100 ms)
        (status("RUNNING"), [], False),  # no task configs yet
        (status("RUNNING", "RUNNING"), [0, 1], False),  # one of two listed
        (status("RUNNING", "RUNNING", "UNASSIGNED"), [0, 1], False),
        (status("STOPPED"), [], False),
    ],
)
def test_running_means_every_task_of_the_task_configs_listed_running(
    shown: ConnectorStatus, task_ids: list[int], running: bool
) -> None:
    assert is_running(shown, task_ids) is running


def test_ten_cycles_of_each_wait_on_the_peer_at_the_real_workers_timings(
    cli: Cli,  # noqa: F811
) -> None:
    with ConnectSim() as sim:  # the real worker's timings are the peer's defaults
        sim.add_connector("sink", tasks=2)
        url = ["--connect-url", sim.url]
        # The tasks' restart is over this long after the 202, not before.
        takes = sim.task_restart_after + sim.restart_lag + sim.restart_delay
        for cycle in range(10):
            restarts = len(sim.restart_log)
            started = time.monotonic()
            done = cli("connect", "restart", "sink", "--include-tasks", "--wait", *url, *JSON)
            assert done.code == 0, (cycle, done.err)
            assert time.monotonic() - started >= takes, cycle
            assert len(sim.restart_log) == restarts + 3  # the connector and both tasks
            assert sim.status("sink")["tasks"] == done.json[-1]["states"]["tasks"]
            assert [t["state"] for t in sim.status("sink")["tasks"]] == ["RUNNING", "RUNNING"]
            done = cli("connect", "stop", "sink", "--wait", *url, *JSON)
            assert done.code == 0 and sim.status("sink")["tasks"] == [], done.err
            done = cli("connect", "resume", "sink", "--wait", *url, *JSON)
            assert done.code == 0, done.err
            states = [t["state"] for t in sim.status("sink")["tasks"]]
            assert states == ["RUNNING", "RUNNING"], cycle
