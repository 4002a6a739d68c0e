"""Every Connect command against a worker of each API generation (issue 17 items 1 and 6): 2.8
ignores the restart parameters, 3.4 has no stop or offsets, 3.5 reads offsets but cannot change
them, the current one has everything. Too old is exit 2 naming the version, with nothing sent."""
# ruff: noqa: F811 (pytest fixtures imported from test_connect_support, taken as arguments)

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_connect_support import MM2, Cli, changes, cli, generation, worker  # noqa: F401

from rollguard.peers.connect import ConnectSim, State, mirror_source_offset


def test_restarting_failed_tasks_restarts_them_on_every_version(
    worker: ConnectSim, cli: Cli
) -> None:
    worker.add_connector("sink", tasks=3, task_states=["FAILED", "RUNNING", "FAILED"])
    done = cli("connect", "restart", "sink", "--include-tasks", "--only-failed", "--wait",
               "--connect-url", worker.url)  # fmt: skip
    assert done.code == 0, done.err
    assert [worker.state("sink", t) for t in range(3)] == [State.RUNNING] * 3
    assert "settled, nothing FAILED" in done.out
    if generation(worker) == "2.8":
        # one call per failed task, each reported; the running connector is left alone
        assert changes(worker) == [
            "POST /connectors/sink/tasks/0/restart",
            "POST /connectors/sink/tasks/2/restart",
        ]
        assert "older than Kafka 3.0" in done.out
        assert "task 0     restarted (was FAILED)" in done.out
        assert "task 2     restarted (was FAILED)" in done.out
    else:
        assert changes(worker) == ["POST /connectors/sink/restart"]
        assert worker.calls("POST")[0].query == {"includeTasks": "true", "onlyFailed": "true"}


def test_include_tasks_on_an_old_worker_restarts_the_connector_and_every_task(cli: Cli) -> None:
    with ConnectSim(version="2.8.2") as sim:
        sim.add_connector("sink", tasks=2, state=State.FAILED, task_states=["RUNNING", "FAILED"])
        done = cli("connect", "restart", "sink", "--include-tasks", "--connect-url", sim.url)
        assert done.code == 0, done.err
        assert changes(sim) == [
            "POST /connectors/sink/restart",
            "POST /connectors/sink/tasks/0/restart",
            "POST /connectors/sink/tasks/1/restart",
        ]
        assert "connector  restarted (was FAILED)" in done.out
        nothing = cli("connect", "restart", "sink", "--only-failed", "--connect-url", sim.url)
        assert nothing.code == 0 and "nothing is FAILED: nothing restarted" in nothing.out


def test_restart_wait_fails_when_a_task_fails_again(worker: ConnectSim, cli: Cli) -> None:
    worker.add_connector("sink", tasks=1, task_states=["FAILED"])
    worker.fail_after_restart("sink", task=0, times=None)
    # A task whose start takes 0.5 s before it fails (one that connects somewhere first): its
    # RESTARTING is seen on any machine. At the measured 15 ms, back-to-back reads on a machine
    # compiling Kubernetes beside the tests missed it, and the wait rightly said it could not
    # tell a task that failed again at once from one never restarted, 2 min later (F5).
    worker.set_delays(restart=0.5)
    done = cli("connect", "restart", "sink", "--include-tasks", "--only-failed", "--wait",
               "--connect-url", worker.url)  # fmt: skip
    assert done.code == 1
    assert "connector sink was restarted but task 0 FAILED (org.apache.kafka" in done.err


def test_stop_needs_3_5_and_waits_for_stopped(worker: ConnectSim, cli: Cli) -> None:
    worker.add_connector("sink", tasks=2)
    worker.set_delays(stop=0.3)
    done = cli("connect", "stop", "sink", "--wait", "--connect-url", worker.url)
    if generation(worker) in ("2.8", "3.4"):
        assert done.code == 2
        assert "stopping a connector (PUT .../stop) needs Kafka Connect 3.5 or later" in done.err
        assert f"this worker is {worker.version}. Nothing was sent" in done.err
        assert changes(worker) == [] and worker.state("sink") is State.RUNNING
        return
    assert done.code == 0, done.err
    assert "connector sink stopped (waited): now sink: connector STOPPED, no tasks" in done.out
    resumed = cli("connect", "resume", "sink", "--wait", "--connect-url", worker.url)
    assert resumed.code == 0, resumed.err
    assert "connector RUNNING, task 0 RUNNING, task 1 RUNNING" in resumed.out


@pytest.mark.parametrize("verb", ["list", "alter", "reset"])
def test_offsets_need_3_5_to_read_and_3_6_to_change(
    worker: ConnectSim, cli: Cli, tmp_path: Path, verb: str
) -> None:
    source, _, _ = worker.add_mirror_maker("east", "west")
    before = worker.offsets(source)
    body = {"offsets": [mirror_source_offset("east", "orders", 0, 7)]}
    (tmp_path / "east--west.MirrorSourceConnector.json").write_text(json.dumps(body))
    where = {"list": ["--to", str(tmp_path / "out")], "alter": ["--from", str(tmp_path)]}
    extra = [*where.get(verb, []), *([] if verb == "list" else ["--stop"])]
    done = cli("mm2", "offsets", verb, "--connector", MM2, *extra, "--connect-url", worker.url)
    needed = "3.5" if verb == "list" else "3.6"
    if worker.version < needed:
        assert done.code == 2, done.err
        assert f"needs Kafka Connect {needed} or later" in done.err
        assert "Nothing was sent" in done.err
        assert changes(worker) == []
        assert worker.state(MM2) is State.RUNNING and worker.offsets(source) == before
        return
    assert done.code == 0, done.err
    if verb == "alter":
        assert worker.offsets(source)[0]["offset"] == {"offset": 7}
    elif verb == "reset":
        assert worker.offsets(source) == []


def test_status_and_restart_all_failed_work_on_every_version(worker: ConnectSim, cli: Cli) -> None:
    worker.add_connector("a", tasks=2, task_states=["RUNNING", "FAILED"])
    worker.add_connector("b", tasks=1, state=State.FAILED)
    worker.add_connector("c", tasks=1)
    status = cli("connect", "status", "--connect-url", worker.url)
    assert status.code == 1, status.err
    assert "3 connectors, 2 with something FAILED: a, b" in status.err
    restarted = cli("connect", "restart", "--all-failed", "--wait", "--connect-url", worker.url)
    assert restarted.code == 0, restarted.err
    assert "connector a: settled" in restarted.out and "connector b: settled" in restarted.out
    assert worker.restarts("c") == 0 and worker.restarts("a") == 0  # only what had FAILED
    assert worker.restarts("a", 1) == 1 and worker.restarts("b") == 1
    assert cli("connect", "status", "--connect-url", worker.url).code == 0
