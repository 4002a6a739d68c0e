"""Kafka Connect operations against the Connect test peer (a real socket): the auto-restart
policy on an injected clock, the watcher, one-off restarts, offsets. Their state in ConfigMaps
of a real Kubernetes API server is tests/real/test_connect_configmaps.py."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rollguard.peers.connect import ConnectSim, State
from rollguard.roller.connect.autorestart import AutoRestarter, FileStateStore, Metrics
from rollguard.roller.connect.client import ConnectClient
from rollguard.roller.connect.offsets import connector_of_key, mm2_key
from rollguard.roller.connect.policy import (
    ConnectorSettings,
    RestartAction,
    Tracker,
    apply,
    backoff_minutes,
    load_overrides,
    next_action,
)
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryPolicy

from helpers import BIN, Clock, Pki, free_port, rollguard, signalled

MM2 = "east->west.MirrorSourceConnector"
FAST = RetryPolicy(max_retries=2, initial_backoff_ms=10, max_backoff_ms=20)


# ---- the policy, on an injected clock -----------------------------------------------------


def test_the_backoff_schedule() -> None:
    assert [backoff_minutes(n) for n in range(11)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60, 60]


def simulate(minutes: int, settings: ConnectorSettings) -> tuple[list[int], list[RestartAction]]:
    """A connector failing for good, checked every minute: when is it restarted?"""
    tracker, restarts, actions = Tracker(), [], []
    for minute in range(minutes):
        action = next_action(True, tracker, minute * 60.0, settings)
        actions.append(action)
        if action is RestartAction.RESTART:
            restarts.append(minute)
        tracker = apply(action, tracker, True, minute * 60.0)
    return restarts, actions


def test_a_failing_connector_is_restarted_on_the_backoff_schedule_without_limit() -> None:
    restarts, _ = simulate(400, ConnectorSettings())
    gaps = [b - a for a, b in itertools.pairwise(restarts)]
    assert restarts[0] == 0
    assert gaps[:9] == [2, 6, 12, 20, 30, 42, 56, 60, 60]
    assert set(gaps[8:]) == {60}


def test_max_restarts_gives_up_once_and_says_so() -> None:
    restarts, actions = simulate(200, ConnectorSettings(max_restarts=3))
    assert restarts == [0, 2, 8]
    assert actions.count(RestartAction.GIVE_UP) == 1
    assert actions[actions.index(RestartAction.GIVE_UP) + 1 :] == [RestartAction.GAVE_UP] * (
        len(actions) - actions.index(RestartAction.GIVE_UP) - 1
    )
    restarts, actions = simulate(10, ConnectorSettings(max_restarts=0))
    assert restarts == [] and actions[0] is RestartAction.GIVE_UP


def test_the_count_resets_strictly_after_running_clean_for_the_backoff_interval() -> None:
    tracker = Tracker(count=2, last_restart=0.0)  # backoff now 6 minutes
    settings = ConnectorSettings()
    tracker = apply(next_action(False, tracker, 100.0, settings), tracker, False, 100.0)
    assert tracker.healthy_since == 100.0 and tracker.count == 2
    at_limit = 100.0 + 6 * 60
    assert next_action(False, tracker, at_limit, settings) is RestartAction.HEALTHY
    assert next_action(False, tracker, at_limit + 1, settings) is RestartAction.RESET
    assert apply(RestartAction.RESET, tracker, False, at_limit + 1) == Tracker()
    # a failure in between starts the clean run again
    failed = apply(next_action(True, tracker, 200.0, settings), tracker, True, 200.0)
    assert failed.healthy_since is None


def test_per_connector_overrides(tmp_path: Path) -> None:
    path = tmp_path / "auto-restart.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "defaults": {"maxRestarts": 10},
                "connectors": {"a": {"maxRestarts": None}, "b": {"enabled": False}},
            }
        )
    )
    overrides = load_overrides(path, max_restarts=5)
    assert overrides("a") == ConnectorSettings(True, None)
    assert overrides("b") == ConnectorSettings(False, 10)
    assert overrides("other") == ConnectorSettings(True, 10)
    path.write_text("connectors: {a: {maxRestarts: -1}}")
    with pytest.raises(ConfigError, match=r"connectors\.a: maxRestarts"):
        load_overrides(path, None)


# ---- the watcher against the Connect peer -------------------------------------------------


@pytest.fixture
def connect() -> Iterator[ConnectSim]:
    with ConnectSim(restart_delay=0.0, restart_lag=0.0) as sim:
        yield sim


def watcher(
    sim: ConnectSim, state: Path, clock: Clock, metrics: Metrics | None = None
) -> AutoRestarter:
    client = ConnectClient(sim.url, FAST)
    return AutoRestarter(
        client, FileStateStore(state), load_overrides(None, None), metrics=metrics, clock=clock
    )


def restart_calls(sim: ConnectSim) -> list[str]:
    calls = []
    for r in sim.requests:
        if "restart" in r.path:
            query = "&".join(f"{k}={v}" for k, v in r.query.items())
            calls.append(f"{r.method} {r.path}?{query}".rstrip("?"))
    return calls


def test_the_watcher_restarts_on_schedule_and_a_restarted_watcher_keeps_its_counts(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.add_connector("sink", tasks=2)
    connect.add_connector("healthy", tasks=1)
    connect.fail_task("sink", 1)
    connect.fail_after_restart("sink", task=1, times=None)  # it keeps failing
    clock, state, metrics = Clock(1_000_000.0), tmp_path / "state.json", Metrics()

    async def scenario() -> None:
        first = watcher(connect, state, clock, metrics)
        events = await first.check()
        assert [(e.connector, e.action) for e in events] == [("sink", RestartAction.RESTART)]
        assert restart_calls(connect) == [
            "POST /connectors/sink/restart?includeTasks=true&onlyFailed=true"
        ]
        assert "restart 1, next backoff 2 min" in events[0].detail
        clock.now += 119  # inside the 2-minute backoff
        assert [e.action for e in await first.check()] == [RestartAction.WAIT]
        await first.client.aclose()

        # a new watcher process: the count (1) and the time come from the state file
        second = watcher(connect, state, clock, metrics)
        assert second.trackers["sink"].count == 1
        clock.now += 1
        assert [e.action for e in await second.check()] == [RestartAction.RESTART]
        clock.now += 5 * 60  # backoff after the 2nd restart is 6 minutes
        assert [e.action for e in await second.check()] == [RestartAction.WAIT]
        await second.client.aclose()

    asyncio.run(scenario())
    assert connect.restarts("sink", 1) == 2 and connect.restarts("sink") == 0  # only the task
    assert connect.restarts("healthy") == 0
    assert json.loads(state.read_text())["connectors"]["sink"]["count"] == 2
    sample = metrics.registry.get_sample_value
    assert sample("rollguard_connector_restarts_total", {"connector": "sink"}) == 2


def test_a_recovered_connector_has_its_count_reset(connect: ConnectSim, tmp_path: Path) -> None:
    connect.add_connector("sink", tasks=1)
    connect.fail_connector("sink")  # a restart brings it back (the peer's RESTARTING -> RUNNING)
    clock = Clock(1_000_000.0)

    async def scenario() -> list[RestartAction]:
        w = watcher(connect, tmp_path / "s.json", clock)
        actions = [e.action for e in await w.check()]  # restart 1
        # seen clean at +60 s, then 120 s later (= the 2-minute backoff), then 121 s later
        for step in (60, 120, 1):
            clock.now += step
            actions += [e.action for e in await w.check()]
        await w.client.aclose()
        return actions

    assert asyncio.run(scenario()) == [RestartAction.RESTART, RestartAction.RESET]
    assert json.loads((tmp_path / "s.json").read_text())["connectors"] == {}


def test_workers_older_than_kip_745_get_one_restart_per_failed_part(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.set_version("2.8.2")
    connect.add_connector("sink", tasks=3)
    connect.fail_connector("sink")
    connect.fail_task("sink", 0)
    connect.fail_task("sink", 2)

    async def scenario() -> None:
        w = watcher(connect, tmp_path / "s.json", Clock(1_000_000.0))
        events = await w.check()
        assert "one by one" in events[0].detail
        await w.client.aclose()

    asyncio.run(scenario())
    assert sorted(restart_calls(connect)) == [
        "POST /connectors/sink/restart?includeTasks=false&onlyFailed=false",
        "POST /connectors/sink/tasks/0/restart",
        "POST /connectors/sink/tasks/2/restart",
    ]
    assert connect.state("sink") is State.RUNNING and connect.state("sink", 2) is State.RUNNING


def test_auto_restart_once_from_the_command_line_keeps_state_between_runs(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.add_connector("sink", tasks=1)
    connect.fail_task("sink", 0)
    connect.fail_after_restart("sink", task=0, times=None)
    args = ["connect", "auto-restart", "--once", "--connect-url", connect.url]
    args += ["--state-file", str(tmp_path / "state.json")]
    first = rollguard(*args)
    assert first.returncode == 0, first.stderr
    assert "restarted connector sink" in first.stderr and "restart 1" in first.stderr
    second = rollguard(*args)
    assert second.returncode == 0, second.stderr
    assert "restarted" not in second.stderr  # inside the backoff: the count was kept
    assert connect.restarts("sink", 0) == 1


# ---- one restart --------------------------------------------------------------------------


def test_connect_restart_prints_states_or_says_restarted(connect: ConnectSim) -> None:
    connect.add_connector("sink", tasks=2)
    connect.fail_task("sink", 1)
    base = ["connect", "restart", "--connect-url", connect.url]
    done = rollguard(*base, "sink", "--include-tasks", "--only-failed")
    assert done.returncode == 0, done.stderr
    assert "restart accepted (HTTP 202)" in done.stdout
    assert "task 1     RESTARTING" in done.stdout and "task 0     RUNNING" in done.stdout
    plain = rollguard(*base, "sink")
    assert plain.returncode == 0 and "connector sink: restarted (HTTP 204" in plain.stdout


def test_connect_restart_404_and_409_have_their_own_exit_codes(connect: ConnectSim) -> None:
    base = ["connect", "restart", "--connect-url", connect.url, "--retry-max-retries", "2"]
    missing = rollguard(*base, "nope")
    assert missing.returncode == 4
    assert "connector nope" in missing.stderr and "HTTP 404" in missing.stderr
    connect.add_connector("sink")
    connect.start_rebalance()  # until ended: every retry sees 409
    busy = rollguard(*base, "--retry-initial-backoff-ms", "10", "sink")
    assert (
        busy.returncode == 5 and "HTTP 409" in busy.stderr and "stale configuration" in busy.stderr
    )
    connect.end_rebalance()
    connect.start_rebalance(requests=2)  # a short rebalance is ridden out by retries
    assert rollguard(*base, "--retry-initial-backoff-ms", "10", "sink").returncode == 0


def test_mutual_tls_and_basic_auth(pki: Pki, tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    with ConnectSim(tls=pki, basic_auth=("ops", "s3cret")) as sim:
        sim.add_connector("sink")
        base = ["connect", "restart", "sink", "--connect-url", sim.url, "--cacert", str(pki.ca)]
        tls = ["--cert", str(pki.client_cert), "--key", str(pki.client_key)]
        ok = rollguard(*base, *tls, "--user", "ops", "--password-file", str(password))
        assert ok.returncode == 0, ok.stderr
        password.write_text("wrong")
        denied = rollguard(*base, *tls, "--user", "ops", "--password-file", str(password))
        assert denied.returncode == 1 and "HTTP 401" in denied.stderr
        assert "wrong" not in denied.stderr and "s3cret" not in denied.stderr
        no_cert = rollguard(*base, "--user", "ops", "--password-file", str(password))
        assert no_cert.returncode == 1 and "unreachable" in no_cert.stderr


# ---- offsets ------------------------------------------------------------------------------


def test_the_mm2_name_maps_to_its_key_and_back() -> None:
    assert mm2_key(MM2) == "east--west.MirrorSourceConnector.json"
    assert mm2_key("a-kafka->b-kafka.MirrorCheckpointConnector") == (
        "a-kafka--b-kafka.MirrorCheckpointConnector.json"
    )
    for name in (MM2, "a-kafka->b-kafka.MirrorHeartbeatConnector"):
        assert connector_of_key(mm2_key(name)) == name
    with pytest.raises(ValueError):
        connector_of_key("offsets.yaml")


def test_list_edit_alter_round_trip_with_the_stopped_rule(
    connect: ConnectSim, tmp_path: Path
) -> None:
    source, _, _ = connect.add_mirror_maker("east", "west", topics=("orders",))
    assert source == MM2
    base = ["--connect-url", connect.url, "--connector", MM2]
    listed = rollguard("mm2", "offsets", "list", *base, "--to", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    key = tmp_path / "east--west.MirrorSourceConnector.json"
    body = json.loads(key.read_text())
    assert body["offsets"] and key.read_text().startswith("{\n")  # pretty-printed
    for entry in body["offsets"]:
        entry["offset"]["offset"] = 7
    key.write_text(json.dumps(body, indent=2))

    refused = rollguard("mm2", "offsets", "alter", *base, "--from", str(tmp_path))
    assert refused.returncode == 1
    assert f"connector {MM2} is RUNNING, not STOPPED" in refused.stderr
    assert not connect.calls("PATCH")  # nothing half done

    altered = rollguard("mm2", "offsets", "alter", *base, "--from", str(tmp_path), "--stop")
    assert altered.returncode == 0, altered.stderr
    assert "altered successfully" in altered.stdout
    assert connect.state(MM2) is State.STOPPED
    assert {e["offset"]["offset"] for e in connect.offsets(MM2)} == {7}

    reset = rollguard("mm2", "offsets", "reset", *base)
    assert reset.returncode == 0 and "reset successfully" in reset.stdout
    assert connect.offsets(MM2) == []


def test_alter_refuses_invalid_json_with_line_and_column_and_changes_nothing(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.add_mirror_maker("east", "west")
    (tmp_path / "east--west.MirrorSourceConnector.json").write_text(
        '{"offsets": [\n  {"partition": }\n]}'
    )
    done = rollguard(
        "mm2",
        "offsets",
        "alter",
        "--connect-url",
        connect.url,
        "--connector",
        MM2,
        "--from",
        str(tmp_path),
        "--stop",
    )
    assert done.returncode == 2
    assert "not valid JSON" in done.stderr and "line 2 column 17" in done.stderr
    assert connect.state(MM2) is State.RUNNING  # not even stopped
    missing = rollguard(
        "mm2",
        "offsets",
        "alter",
        "--connect-url",
        connect.url,
        "--connector",
        "west->east.MirrorSourceConnector",
        "--from",
        str(tmp_path),
    )
    assert missing.returncode == 2 and "west--east.MirrorSourceConnector.json" in missing.stderr


def test_offsets_of_any_connector_use_the_key_offsets_json(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.add_connector(
        "jdbc-sink",
        state=State.STOPPED,
        tasks=0,
        offsets=[
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}
        ],
    )
    done = rollguard(
        "connect",
        "offsets",
        "list",
        "--connect-url",
        connect.url,
        "--connector",
        "jdbc-sink",
        "--to",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "offsets.json").read_text())["offsets"][0]["offset"] == {
        "kafka_offset": 5
    }


def test_the_watcher_runs_until_sigterm_and_serves_its_restart_counter(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.add_connector("sink", tasks=1)
    connect.fail_task("sink", 0)
    port = free_port()
    command = [str(BIN / "rollguard"), "connect", "auto-restart", "--connect-url", connect.url]
    command += ["--interval", "0.2", "--state-file", str(tmp_path / "s.json")]
    command += ["--metrics-listen", f"127.0.0.1:{port}"]

    counted = 'rollguard_connector_restarts_total{connector="sink"} 1.0'

    def scraped() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                return counted in r.read().decode()
        except OSError:
            return False

    done = signalled(command, signal.SIGTERM, scraped, what="the restart counter", timeout=20,
                     ends_within=10)  # fmt: skip
    assert done.returncode == 0
    assert "restarted connector sink" in done.stderr and "stopped; counts are kept" in done.stderr


def test_a_password_in_the_connect_url_never_reaches_a_message() -> None:
    from rollguard.roller.connect.client import ConnectError, redact

    assert redact("https://admin:s3cret@connect:8083/") == "https://admin:***@connect:8083/"
    assert redact("http://connect:8083") == "http://connect:8083"
    port = free_port()  # nothing listens there

    async def go() -> str:
        url = f"http://admin:s3cret@127.0.0.1:{port}"
        async with ConnectClient(url, RetryPolicy(max_retries=0), timeout=2) as client:
            try:
                await client.status("anything")
            except ConnectError as exc:
                return str(exc)
        return ""

    message = asyncio.run(go())
    assert "unreachable" in message and "s3cret" not in message and "admin:***@" in message
    with pytest.raises(ValueError, match=r"\*\*\*") as caught:
        ConnectClient("ftp://admin:s3cret@host", RetryPolicy())
    assert "s3cret" not in str(caught.value)
