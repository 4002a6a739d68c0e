"""The fake Kafka Connect REST API (`connect_peer.ConnectSim`) driven by httpx on a real socket.

These tests pin down what rollguard's Connect client will be tested against: the status codes
and exact messages of a Connect worker (KIP-745 restarts, KIP-875 stop and offsets, rebalance
409s, timeouts, basic auth), version differences, percent-encoded MirrorMaker 2 names, TLS and
mutual TLS, and the controls and records tests use.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rollguard.peers.connect import (
    DEFAULT_TRACE,
    PROXY_PAGE,
    WORKER_VERSIONS,
    ConnectSim,
    Restart,
    SeenRequest,
    SilentServer,
    State,
    mirror_checkpoint_offset,
    mirror_heartbeat_offset,
    mirror_source_offset,
)

from helpers import Clock, Pki, wait_until

MM2 = "east->west.MirrorSourceConnector"
MM2_ENCODED = "east-%3Ewest.MirrorSourceConnector"
RESTART_FAILED = {"includeTasks": "true", "onlyFailed": "true"}
# Connect's own words (HerderRequestHandler, StandaloneHerder/DistributedHerder), spelled out here
# rather than imported, so that a change to the simulator's copy fails these tests.
STALE_CONFIG = (
    "Cannot complete request momentarily due to stale configuration (typically caused by a "
    "concurrent config change)"
)
NOT_STOPPED = (
    "Connectors must be in the STOPPED state before their offsets can be modified. This can be "
    "done for the specified connector by issuing a 'PUT' request to the "
    "'/connectors/{name}/stop' endpoint"
)


@pytest.fixture
def sim() -> Iterator[ConnectSim]:
    with ConnectSim(restart_delay=0.3) as sim:
        yield sim


@pytest.fixture
def client(sim: ConnectSim) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=5) as client:
        yield client


# The fake clock's delays: binary fractions, so that every due time the simulator computes is
# exact whatever the order of its additions.
RESTART_LAG, RESTART_DELAY, TASK_RESTART_AFTER = 0.5, 5.0, 8.0
STATE_LAG, STOP_DELAY, RESUME_DELAY = 0.25, 2.0, 1.0
JUST = 1e-6  # a moment before a due time


@pytest.fixture
def timed(clock: Clock) -> Iterator[tuple[ConnectSim, httpx.Client]]:
    """A simulator on a fake clock: transitions happen when the test moves the clock."""
    with (
        ConnectSim(
            restart_lag=RESTART_LAG,
            restart_delay=RESTART_DELAY,
            task_restart_after=TASK_RESTART_AFTER,
            state_lag=STATE_LAG,
            stop_delay=STOP_DELAY,
            resume_delay=RESUME_DELAY,
            clock=clock,
        ) as sim,
        httpx.Client(base_url=sim.url, timeout=5) as client,
    ):
        yield sim, client


def task_states(client: httpx.Client, name: str) -> list[str]:
    return [t["state"] for t in client.get(f"/connectors/{name}/status").json()["tasks"]]


def shape(client: httpx.Client, name: str) -> str:
    """ "CONNECTOR TASK0 TASK1 ..." as the status shows it now, e.g. "STOPPED RUNNING"."""
    status = client.get(f"/connectors/{name}/status").json()
    return " ".join([status["connector"]["state"], *(t["state"] for t in status["tasks"])])


def wait_for_shape(client: httpx.Client, name: str, expected: str) -> None:
    """Poll the status (real clock) until it shows `expected`; fail after 5 s, naming what it
    showed last."""
    seen: list[str] = []

    def shows() -> bool:
        seen.append(shape(client, name))
        return seen[-1] == expected

    try:
        wait_until(shows, timeout=5, interval=0.01, what=f"{name} to show {expected!r}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it showed {seen[-1]!r}") from None


def error(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "message": message}


# --- reading ---------------------------------------------------------------------------------


def test_root_reports_version_commit_and_kafka_cluster_id(
    sim: ConnectSim, client: httpx.Client
) -> None:
    answer = client.get("/")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "version": "3.6.1",
        "commit": "5e3c2b738d253ff5",
        "kafka_cluster_id": "oGYm2dQOQ5Ct8o0yHcyTPw",
    }
    sim.set_version("3.7.2", commit="79a8f3b2e3c4d5e6")
    assert client.get("/").json()["version"] == "3.7.2"
    assert client.get("/").json()["commit"] == "79a8f3b2e3c4d5e6"


def test_connectors_are_listed_by_name_or_expanded(sim: ConnectSim, client: httpx.Client) -> None:
    sim.add_connector("b-sink", tasks=2, connector_class="com.example.JdbcSinkConnector")
    sim.add_connector("a-source")
    assert client.get("/connectors").json() == ["a-source", "b-sink"]
    assert client.get("/connectors/").json() == ["a-source", "b-sink"]

    expanded = client.get("/connectors", params=[("expand", "status"), ("expand", "info")]).json()
    assert set(expanded) == {"a-source", "b-sink"}
    assert expanded["b-sink"]["status"]["type"] == "sink"
    assert [t["id"] for t in expanded["b-sink"]["status"]["tasks"]] == [0, 1]
    assert expanded["b-sink"]["info"]["tasks"] == [
        {"connector": "b-sink", "task": 0},
        {"connector": "b-sink", "task": 1},
    ]
    only_status = client.get("/connectors?expand=status").json()
    assert set(only_status["a-source"]) == {"status"}


def test_status_shows_each_instance_with_a_trace_only_when_failed(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=3)
    sim.fail_task("orders", 1, trace="java.io.IOException: disk full")
    status = client.get("/connectors/orders/status").json()
    assert status == {
        "name": "orders",
        "connector": {"state": "RUNNING", "worker_id": "connect-0.connect:8083"},
        "tasks": [
            {"id": 0, "state": "RUNNING", "worker_id": "connect-1.connect:8083"},
            {
                "id": 1,
                "state": "FAILED",
                "worker_id": "connect-0.connect:8083",
                "trace": "java.io.IOException: disk full",
            },
            {"id": 2, "state": "RUNNING", "worker_id": "connect-1.connect:8083"},
        ],
        "type": "source",
    }
    task = client.get("/connectors/orders/tasks/1/status").json()
    assert task["state"] == "FAILED" and task["trace"] == "java.io.IOException: disk full"
    sim.fail_connector("orders")
    assert client.get("/connectors/orders/status").json()["connector"]["trace"] == DEFAULT_TRACE


def test_connector_info_config_and_task_configs(sim: ConnectSim, client: httpx.Client) -> None:
    sim.add_connector("orders", tasks=2, config={"topic": "orders"})
    info = client.get("/connectors/orders").json()
    assert info["name"] == "orders" and info["type"] == "source"
    assert info["config"]["topic"] == "orders" and info["config"]["tasks.max"] == "2"
    assert info["tasks"] == [{"connector": "orders", "task": 0}, {"connector": "orders", "task": 1}]
    assert client.get("/connectors/orders/config").json() == info["config"]
    tasks = client.get("/connectors/orders/tasks").json()
    assert [t["id"] for t in tasks] == info["tasks"]


@pytest.mark.parametrize(
    ("method", "path", "message"),
    [
        ("GET", "/connectors/ghost", "Connector ghost not found"),
        ("GET", "/connectors/ghost/config", "Connector ghost not found"),
        ("GET", "/connectors/ghost/tasks", "Connector ghost not found"),
        ("GET", "/connectors/ghost/status", "No status found for connector ghost"),
        ("GET", "/connectors/ghost/tasks/0/status", "No status found for task ghost-0"),
        ("POST", "/connectors/ghost/restart", "Unknown connector: ghost"),
        ("POST", "/connectors/ghost/restart?includeTasks=true", "Unknown connector: ghost"),
        ("POST", "/connectors/ghost/tasks/0/restart", "Unknown connector: ghost"),
        ("PUT", "/connectors/ghost/stop", "Unknown connector ghost"),
        ("PUT", "/connectors/ghost/pause", "Unknown connector ghost"),
        ("PUT", "/connectors/ghost/resume", "Unknown connector ghost"),
        ("GET", "/connectors/ghost/offsets", "Connector ghost not found"),
        ("DELETE", "/connectors/ghost/offsets", "Connector ghost not found"),
    ],
)
def test_unknown_connectors_get_the_message_of_each_endpoint(
    client: httpx.Client, method: str, path: str, message: str
) -> None:
    answer = client.request(method, path)
    assert answer.status_code == 404
    assert answer.json() == error(404, message)


def test_unknown_paths_are_404_and_wrong_methods_405_in_connects_error_shape(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders")
    for path in ("/nope", "/connectors/orders/nope", "/connectors/orders/tasks/x/status"):
        assert client.get(path).json() == error(404, "HTTP 404 Not Found"), path
    for method, path in [
        ("POST", "/connectors/orders/status"),
        ("GET", "/connectors/orders/restart"),
        ("POST", "/connectors/orders/stop"),
        ("PUT", "/connectors/orders/offsets"),
        ("DELETE", "/"),
    ]:
        answer = client.request(method, path)
        assert answer.status_code == 405, (method, path)
        assert answer.json() == error(405, "HTTP 405 Method Not Allowed")


def test_endpoints_connect_has_but_the_simulator_does_not_answer_501(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders")
    assert client.post("/connectors", json={"name": "x", "config": {}}).status_code == 501
    assert client.delete("/connectors/orders").status_code == 501
    assert client.put("/connectors/orders/config", json={}).status_code == 501
    assert "orders" in client.get("/connectors").json()


# --- restarts (KIP-745) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [{}, {"includeTasks": "false", "onlyFailed": "false"}, {"includeTasks": "yes"}],
)
def test_a_plain_restart_restarts_only_the_connector_and_answers_204(
    sim: ConnectSim, client: httpx.Client, params: dict[str, str]
) -> None:
    sim.add_connector("orders", tasks=2, state=State.FAILED, task_states=["FAILED", "RUNNING"])
    answer = client.post("/connectors/orders/restart", params=params)
    assert answer.status_code == 204 and answer.content == b""
    # Synchronous: the connector is running again by the time of the answer; tasks untouched.
    status = client.get("/connectors/orders/status").json()
    assert status["connector"] == {"state": "RUNNING", "worker_id": "connect-0.connect:8083"}
    assert task_states(client, "orders") == ["FAILED", "RUNNING"]
    assert sim.restart_counts() == {("orders", None): 1}


def test_restarting_failed_tasks_answers_202_with_the_plan_then_they_run(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=3)
    sim.fail_task("orders", 1)
    sim.fail_task("orders", 2, trace="boom")
    started = time.monotonic()
    answer = client.post("/connectors/orders/restart", params=RESTART_FAILED)
    assert answer.status_code == 202
    plan = answer.json()
    assert plan["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in plan["tasks"]] == ["RUNNING", "RESTARTING", "RESTARTING"]
    # The plan keeps the trace the instance had.
    assert plan["tasks"][2]["trace"] == "boom"

    # The restart happens after the answer (the old state shows for restart_lag), then the
    # status store's RESTARTING record, which has no trace, for restart_delay (0.3 here).
    def restarting() -> dict[str, Any] | None:
        status: dict[str, Any] = client.get("/connectors/orders/status").json()
        states = [t["state"] for t in status["tasks"]]
        return status if states == ["RUNNING", "RESTARTING", "RESTARTING"] else None

    shown = wait_until(restarting, timeout=5, interval=0.01, what="the tasks to show RESTARTING")
    assert all("trace" not in t for t in shown["tasks"])

    wait_for_shape(client, "orders", "RUNNING RUNNING RUNNING RUNNING")
    # never before restart_lag + restart_delay
    assert time.monotonic() - started >= sim.restart_lag + sim.restart_delay
    assert sim.restart_counts() == {("orders", 1): 1, ("orders", 2): 1}


def test_restarting_everything_marks_the_connector_and_every_task(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=2)
    answer = client.post("/connectors/orders/restart?includeTasks=true&onlyFailed=false")
    assert answer.status_code == 202
    plan = answer.json()
    assert plan["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in plan["tasks"]] == ["RESTARTING", "RESTARTING"]
    assert sim.restarts("orders") == 1 and sim.restarts("orders", 0) == 1
    assert sim.restarts("orders", 1) == 1


def test_only_failed_without_tasks_restarts_a_failed_connector_alone(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=1, state=State.FAILED, task_states=["FAILED"])
    answer = client.post("/connectors/orders/restart?onlyFailed=true")
    assert answer.status_code == 202
    assert answer.json()["connector"]["state"] == "RESTARTING"
    assert answer.json()["tasks"][0]["state"] == "FAILED"
    assert sim.restart_counts() == {("orders", None): 1}


def test_only_failed_when_nothing_failed_is_accepted_and_restarts_nothing(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=2)
    answer = client.post("/connectors/orders/restart", params=RESTART_FAILED)
    assert answer.status_code == 202
    assert answer.json() == client.get("/connectors/orders/status").json()
    assert sim.restart_counts() == {}


def test_restarting_lasts_exactly_the_restart_delay_on_the_injected_clock(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("orders", tasks=1, task_states=["FAILED"])
    t0 = clock.now
    assert client.post("/connectors/orders/restart", params=RESTART_FAILED).status_code == 202
    # The old state, with its trace, until restart_lag ...
    clock.now = t0 + RESTART_LAG - JUST
    assert client.get("/connectors/orders/status").json()["tasks"][0]["trace"] == DEFAULT_TRACE
    assert task_states(client, "orders") == ["FAILED"]
    # ... then RESTARTING, without a trace, for exactly restart_delay ...
    clock.now = t0 + RESTART_LAG
    assert task_states(client, "orders") == ["RESTARTING"]
    assert "trace" not in client.get("/connectors/orders/status").json()["tasks"][0]
    clock.now = t0 + RESTART_LAG + RESTART_DELAY - JUST
    assert task_states(client, "orders") == ["RESTARTING"]
    assert sim.state("orders", 0) is State.RESTARTING
    # ... then RUNNING.
    clock.now = t0 + RESTART_LAG + RESTART_DELAY
    assert task_states(client, "orders") == ["RUNNING"]
    assert sim.restart_log == [Restart("orders", 0, t0)]


def test_tasks_armed_to_fail_again_fail_after_each_restart(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("orders", tasks=2, task_states=["FAILED", "RUNNING"])
    sim.fail_after_restart("orders", 0, times=2, trace="still broken")
    t0, each = clock.now, RESTART_LAG + RESTART_DELAY  # until the restart is over
    outcomes = []
    for _ in range(3):
        assert client.post("/connectors/orders/restart", params=RESTART_FAILED).status_code == 202
        clock.advance(each)
        outcomes.append(client.get("/connectors/orders/status").json()["tasks"][0])
    assert [t["state"] for t in outcomes] == ["FAILED", "FAILED", "RUNNING"]
    assert outcomes[0]["trace"] == "still broken"
    assert sim.restarts("orders", 0) == 3 and sim.restarts("orders", 1) == 0
    assert [r.at for r in sim.restart_log] == [t0, t0 + each, t0 + 2 * each]


def test_a_connector_armed_forever_fails_after_every_plain_restart(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", state=State.FAILED)
    sim.fail_after_restart("orders", times=None)
    for _ in range(4):
        assert client.post("/connectors/orders/restart").status_code == 204
        assert sim.state("orders") is State.FAILED
    sim.fail_after_restart("orders", times=0)
    assert client.post("/connectors/orders/restart").status_code == 204
    assert sim.state("orders") is State.RUNNING
    assert sim.restarts("orders") == 5


def test_restarting_one_task_answers_204(sim: ConnectSim, client: httpx.Client) -> None:
    sim.add_connector("orders", tasks=2, task_states=["RUNNING", "FAILED"])
    assert client.post("/connectors/orders/tasks/1/restart").status_code == 204
    assert task_states(client, "orders") == ["RUNNING", "RUNNING"]
    missing = client.post("/connectors/orders/tasks/7/restart")
    assert missing.status_code == 404
    assert missing.json() == error(404, "Unknown task: orders-7")
    assert sim.restart_counts() == {("orders", 1): 1}


# --- versions --------------------------------------------------------------------------------


def test_connect_before_3_0_ignores_the_restart_parameters_and_has_no_stop_or_offsets() -> None:
    with ConnectSim(version="2.8.2") as sim, httpx.Client(base_url=sim.url) as client:
        sim.add_connector("orders", tasks=2, state=State.FAILED, task_states=["FAILED"] * 2)
        assert client.get("/").json()["version"] == "2.8.2"
        answer = client.post("/connectors/orders/restart", params=RESTART_FAILED)
        assert answer.status_code == 204
        assert client.get("/connectors/orders/status").json()["connector"]["state"] == "RUNNING"
        assert task_states(client, "orders") == ["FAILED", "FAILED"]
        assert client.post("/connectors/orders/tasks/0/restart").status_code == 204
        assert task_states(client, "orders") == ["RUNNING", "FAILED"]
        for method, path in [("PUT", "stop"), ("GET", "offsets"), ("PATCH", "offsets")]:
            answer = client.request(method, f"/connectors/orders/{path}")
            assert answer.json() == error(404, "HTTP 404 Not Found")
        assert sim.restart_counts() == {("orders", None): 1, ("orders", 0): 1}


def test_connect_3_5_stops_and_reads_offsets_but_cannot_alter_them() -> None:
    with ConnectSim(version="3.5.2") as sim, httpx.Client(base_url=sim.url) as client:
        sim.add_connector("orders", offsets=[{"partition": {"f": "a"}, "offset": {"pos": 1}}])
        assert client.put("/connectors/orders/stop").status_code == 204
        assert client.get("/connectors/orders/offsets").json()["offsets"][0]["offset"] == {"pos": 1}
        for method in ("PATCH", "DELETE"):
            answer = client.request(method, "/connectors/orders/offsets", json={"offsets": []})
            assert answer.json() == error(405, "HTTP 405 Method Not Allowed")


# What each generation of worker answers, as (method, path suffix, params) -> status, for a
# RUNNING connector with one FAILED task. 204 for a restart with parameters is the old worker
# ignoring them; 404/405 are paths or methods the version does not have.
GENERATIONS = {
    "2.8": {"restart-failed": 204, "stop": 404, "get-offsets": 404, "patch-offsets": 404},
    "3.4": {"restart-failed": 202, "stop": 404, "get-offsets": 404, "patch-offsets": 404},
    "3.5": {"restart-failed": 202, "stop": 204, "get-offsets": 200, "patch-offsets": 405},
    "current": {"restart-failed": 202, "stop": 204, "get-offsets": 200, "patch-offsets": 400},
}


@pytest.mark.parametrize("generation", sorted(WORKER_VERSIONS))
def test_each_worker_generation_has_its_versions_endpoints(generation: str) -> None:
    version = WORKER_VERSIONS[generation]
    with ConnectSim(version=version) as sim, httpx.Client(base_url=sim.url) as client:
        sim.add_connector("orders", tasks=1, task_states=["FAILED"])
        assert client.get("/").json()["version"] == version
        seen = {
            "restart-failed": client.post(
                "/connectors/orders/restart", params=RESTART_FAILED
            ).status_code,
            "get-offsets": client.get("/connectors/orders/offsets").status_code,
            # not stopped yet: the current worker refuses with 400, the 3.5 one has no PATCH
            "patch-offsets": client.patch(
                "/connectors/orders/offsets",
                json={"offsets": [{"partition": {"a": 1}, "offset": None}]},
            ).status_code,
            "task-restart": client.post("/connectors/orders/tasks/0/restart").status_code,
            "stop": client.put("/connectors/orders/stop").status_code,
        }
        # restarting one task works on every generation
        assert seen == {**GENERATIONS[generation], "task-restart": 204}
        # every generation lists with ?expand=status and resumes
        expanded = client.get("/connectors", params={"expand": "status"}).json()
        assert set(expanded) == {"orders"}
        assert client.put("/connectors/orders/resume").status_code == 202


def test_a_stop_then_a_pause_brings_the_tasks_back_paused(sim: ConnectSim) -> None:
    sim.add_connector("orders", tasks=2)
    with httpx.Client(base_url=sim.url) as client:
        assert client.put("/connectors/orders/stop").status_code == 204
        assert client.get("/connectors/orders/tasks").json() == []  # the task configs go at once
        wait_for_shape(client, "orders", "STOPPED")  # the tasks unlisted after stop_delay
        assert client.put("/connectors/orders/pause").status_code == 202
        assert len(client.get("/connectors/orders/tasks").json()) == 2  # back at once
        wait_for_shape(client, "orders", "PAUSED PAUSED PAUSED")
        assert sim.state("orders") is State.PAUSED


def test_canned_answers_stand_in_for_a_proxy_then_connect_answers_again(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders")
    sim.answer_next(2)
    first = client.get("/connectors/orders/status")
    assert first.status_code == 502 and first.text == PROXY_PAGE
    assert first.headers["content-type"].startswith("text/html")
    assert client.put("/connectors/orders/stop").status_code == 502
    assert sim.state("orders") is State.RUNNING  # the proxy's answer changed nothing
    sim.answer_next(1, status=200, body="[]", content_type="application/json")
    assert client.get("/connectors/orders/status").json() == []
    assert client.get("/connectors/orders/status").json()["name"] == "orders"
    assert [r.status for r in sim.requests] == [502, 502, 200, 200]


def test_the_silent_server_reads_requests_and_never_answers() -> None:
    with SilentServer() as silent:
        with httpx.Client(timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
            client.get(f"{silent.url}/connectors")
        assert silent.received > 0


def test_setting_the_version_changes_the_api_at_once(sim: ConnectSim, client: httpx.Client) -> None:
    sim.add_connector("orders", tasks=1, task_states=["FAILED"])
    sim.set_version("2.8.2")
    assert client.post("/connectors/orders/restart", params=RESTART_FAILED).status_code == 204
    sim.set_version("3.0.0")
    assert client.post("/connectors/orders/restart", params=RESTART_FAILED).status_code == 202


# --- rebalances and timeouts -----------------------------------------------------------------


def test_a_rebalance_answers_409_to_the_next_requests_then_clears(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=1, task_states=["FAILED"])
    sim.start_rebalance(requests=2)
    # Status is read from the status store: never refused.
    assert client.get("/connectors/orders/status").status_code == 200
    for _ in range(2):
        refused = client.post("/connectors/orders/restart", params=RESTART_FAILED)
        assert refused.status_code == 409
        assert refused.json() == error(409, STALE_CONFIG)
    assert sim.restart_counts() == {}
    assert client.post("/connectors/orders/restart", params=RESTART_FAILED).status_code == 202


def test_a_rebalance_until_ended_refuses_only_what_connect_refuses(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", tasks=1)
    sim.start_rebalance()
    refused = [
        ("GET", "/connectors/orders"),
        ("GET", "/connectors/orders/config"),
        ("GET", "/connectors/orders/tasks"),
        ("POST", "/connectors/orders/restart"),
        ("POST", "/connectors/orders/tasks/0/restart"),
        ("DELETE", "/connectors/orders/offsets"),
        ("POST", "/connectors/ghost/restart"),  # the rebalance check comes first
    ]
    for method, path in refused:
        assert client.request(method, path).status_code == 409, (method, path)
    served = [
        ("GET", "/", 200),
        ("GET", "/connectors", 200),
        ("GET", "/connectors/orders/status", 200),
        ("GET", "/connectors/orders/offsets", 200),
        ("PUT", "/connectors/orders/pause", 202),
        ("PUT", "/connectors/orders/resume", 202),
        ("PUT", "/connectors/orders/stop", 204),
    ]
    for method, path, code in served:
        assert client.request(method, path).status_code == code, (method, path)
    # The body is checked before the herder is asked.
    empty = client.patch("/connectors/orders/offsets", json={"offsets": []})
    assert empty.status_code == 400
    sim.end_rebalance()
    assert client.delete("/connectors/orders/offsets").status_code == 200


def test_a_request_that_times_out_answers_500_late(sim: ConnectSim, client: httpx.Client) -> None:
    sim.add_connector("orders")
    sim.time_out_next(1, after=0.3)
    started = time.monotonic()
    answer = client.post("/connectors/orders/restart")
    assert time.monotonic() - started >= 0.3
    assert answer.status_code == 500
    assert answer.json() == error(500, "Request timed out")
    assert sim.restarts("orders") == 0
    assert client.get("/connectors/orders/status").status_code == 200  # not a herder request
    assert client.post("/connectors/orders/restart").status_code == 204


# --- stop, pause, resume and offsets (KIP-875) -----------------------------------------------


def test_offsets_can_be_altered_and_reset_only_while_stopped(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_mirror_maker("east", "west", topics=("orders", "refunds"))
    path = f"/connectors/{MM2_ENCODED}/offsets"
    change = {"offsets": [mirror_source_offset("east", "orders", 0, 100)]}

    running = client.patch(path, json=change)
    assert running.status_code == 400
    assert running.json() == error(400, NOT_STOPPED.format(name=MM2))
    assert "'/connectors/east->west.MirrorSourceConnector/stop'" in running.json()["message"]
    assert client.delete(path).status_code == 400

    assert client.put(f"/connectors/{MM2_ENCODED}/stop").status_code == 204
    wait_for_shape(client, MM2, "STOPPED")

    altered = client.patch(path, json=change)
    assert altered.status_code == 200
    assert altered.json() == {
        "message": "The offsets for this connector have been altered successfully"
    }
    assert client.get(path).json() == {
        "offsets": [
            mirror_source_offset("east", "orders", 0, 100),
            mirror_source_offset("east", "refunds", 0, 42),
        ]
    }
    tombstone = {
        "offsets": [
            {
                "partition": mirror_source_offset("east", "refunds", 0, 0)["partition"],
                "offset": None,
            }
        ]
    }
    assert client.patch(path, json=tombstone).status_code == 200
    assert sim.offsets(MM2) == [mirror_source_offset("east", "orders", 0, 100)]

    reset = client.delete(path)
    assert reset.status_code == 200
    assert reset.json() == {
        "message": "The offsets for this connector have been reset successfully"
    }
    assert client.get(path).json() == {"offsets": []}

    assert client.put(f"/connectors/{MM2_ENCODED}/resume").status_code == 202
    # Locked again as soon as the resume is answered (task configs back), before the tasks run.
    assert client.patch(path, json=change).status_code == 400
    wait_for_shape(client, MM2, "RUNNING RUNNING")
    assert client.patch(path, json=change).status_code == 400


@pytest.mark.parametrize(
    ("state", "tasks"), [(State.RUNNING, 0), (State.PAUSED, 0), (State.FAILED, 0)]
)
def test_a_connector_without_tasks_is_not_stopped_for_the_offsets_rule(
    sim: ConnectSim, client: httpx.Client, state: State, tasks: int
) -> None:
    # The rule is the target state STOPPED *and* no tasks: having no tasks is not enough.
    sim.add_connector("checkpoints", tasks=tasks, state=state)
    refused = client.delete("/connectors/checkpoints/offsets")
    assert refused.json() == error(400, NOT_STOPPED.format(name="checkpoints"))


def test_a_stop_unlocks_offsets_at_once_and_unlists_the_tasks_after_the_stop_delay(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("orders", tasks=2, offsets=[{"partition": {"f": "a"}, "offset": {"p": 1}}])
    assert client.delete("/connectors/orders/offsets").status_code == 400
    t0 = clock.now
    assert client.put("/connectors/orders/stop").status_code == 204
    # The task configs are gone and the target is STOPPED at once: the offsets rule holds while
    # the status still shows the connector and its tasks running.
    assert client.get("/connectors/orders/tasks").json() == []
    assert shape(client, "orders") == "RUNNING RUNNING RUNNING"
    assert client.delete("/connectors/orders/offsets").status_code == 200
    assert sim.offsets("orders") == []
    clock.now = t0 + STATE_LAG - JUST
    assert shape(client, "orders") == "RUNNING RUNNING RUNNING"
    clock.now = t0 + STATE_LAG  # the connector shows STOPPED, its tasks still listed
    assert shape(client, "orders") == "STOPPED RUNNING RUNNING"
    clock.now = t0 + STATE_LAG + STOP_DELAY - JUST
    assert shape(client, "orders") == "STOPPED RUNNING RUNNING"
    clock.now = t0 + STATE_LAG + STOP_DELAY
    status = client.get("/connectors/orders/status").json()
    assert status["connector"]["state"] == "STOPPED" and status["tasks"] == []
    assert client.delete("/connectors/orders/offsets").status_code == 200


def test_other_connectors_get_the_framework_managed_messages(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("files", state=State.STOPPED)
    change = {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 7}}]}
    assert client.patch("/connectors/files/offsets", json=change).json()["message"] == (
        "The Connect framework-managed offsets for this connector have been altered successfully. "
        "However, if this connector manages offsets externally, they will need to be manually "
        "altered in the system that the connector uses."
    )
    assert client.delete("/connectors/files/offsets").json()["message"] == (
        "The Connect framework-managed offsets for this connector have been reset successfully. "
        "However, if this connector manages offsets externally, they will need to be manually "
        "reset in the system that the connector uses."
    )


def test_alter_requests_are_checked_like_connect_checks_them(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("files", state=State.STOPPED)
    path = "/connectors/files/offsets"
    no_offsets = error(400, "Partitions / offsets need to be provided for an alter offsets request")
    bodies: list[dict[str, Any]] = [{}, {"offsets": []}, {"offsets": None}]
    for body in bodies:
        assert client.patch(path, json=body).json() == no_offsets
    null_partition = client.patch(path, json={"offsets": [{"partition": None, "offset": {"p": 1}}]})
    assert null_partition.json() == error(500, "Source partitions may not be null")
    malformed = client.patch(
        path, content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 500
    as_text = client.patch(path, content=b'{"offsets": []}', headers={"content-type": "text/plain"})
    assert as_text.json() == error(415, "HTTP 415 Unsupported Media Type")
    unlabelled = client.patch(path, content=b'{"offsets": []}')
    assert unlabelled.status_code == 415
    assert sim.offsets("files") == []


def test_pause_and_resume_answer_202(sim: ConnectSim, client: httpx.Client) -> None:
    sim.add_connector("orders", tasks=2, task_states=["RUNNING", "FAILED"])
    assert client.put("/connectors/orders/pause").status_code == 202
    wait_for_shape(client, "orders", "PAUSED PAUSED FAILED")  # a failed task stays failed
    assert client.put("/connectors/orders/resume").status_code == 202
    wait_for_shape(client, "orders", "RUNNING RUNNING FAILED")
    # A stopped connector comes back with its tasks generated again.
    assert client.put("/connectors/orders/stop").status_code == 204
    wait_for_shape(client, "orders", "STOPPED")
    assert client.put("/connectors/orders/resume").status_code == 202
    wait_for_shape(client, "orders", "RUNNING RUNNING RUNNING")


def test_mirror_maker_connectors_carry_the_offset_shapes_of_strimzi_083(
    sim: ConnectSim, client: httpx.Client
) -> None:
    names = sim.add_mirror_maker("east", "west", groups=("billing",))
    assert names == (
        "east->west.MirrorSourceConnector",
        "east->west.MirrorCheckpointConnector",
        "east->west.MirrorHeartbeatConnector",
    )
    offsets = [client.get(f"/connectors/{name}/offsets").json()["offsets"] for name in names]
    assert offsets[0] == [
        {
            "partition": {"cluster": "east", "partition": 0, "topic": "orders"},
            "offset": {"offset": 42},
        }
    ]
    assert offsets[1] == [mirror_checkpoint_offset("billing", "orders", 0)]
    assert offsets[1][0]["partition"] == {"partition": 0, "topic": "orders", "group": "billing"}
    assert offsets[2] == [mirror_heartbeat_offset("east", "west")]
    assert offsets[2][0]["partition"] == {
        "sourceClusterAlias": "east",
        "targetClusterAlias": "west",
    }
    info = client.get(f"/connectors/{names[0]}").json()
    assert (
        info["config"]["connector.class"] == "org.apache.kafka.connect.mirror.MirrorSourceConnector"
    )


# --- names, records, security ----------------------------------------------------------------


def test_mm2_names_work_percent_encoded_or_not_and_the_log_keeps_both(sim: ConnectSim) -> None:
    sim.add_mirror_maker()
    with httpx.Client(base_url=sim.url) as client:
        assert client.get(f"/connectors/{MM2}/status").json()["name"] == MM2
    port = int(sim.url.rsplit(":", 1)[1])
    raw = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        raw.request("GET", f"/connectors/{MM2}/status")  # "->" sent as is
        assert raw.getresponse().status == 200
    finally:
        raw.close()
    first, second = sim.requests
    assert first.path == second.path == f"/connectors/{MM2}/status"
    assert first.raw_path == f"/connectors/{MM2_ENCODED}/status"
    assert second.raw_path == f"/connectors/{MM2}/status"


def test_the_request_log_records_method_path_query_body_and_status(
    sim: ConnectSim, client: httpx.Client
) -> None:
    sim.add_connector("orders", state=State.STOPPED)
    client.post("/connectors/orders/restart", params=RESTART_FAILED)
    client.patch(
        "/connectors/orders/offsets",
        json={"offsets": [{"partition": {"a": 1}, "offset": {"b": 2}}]},
    )
    client.get("/connectors/ghost")
    assert sim.requests == [
        SeenRequest(
            "POST",
            "/connectors/orders/restart",
            "/connectors/orders/restart",
            RESTART_FAILED,
            None,
            202,
        ),
        SeenRequest(
            "PATCH",
            "/connectors/orders/offsets",
            "/connectors/orders/offsets",
            {},
            {"offsets": [{"partition": {"a": 1}, "offset": {"b": 2}}]},
            200,
        ),
        SeenRequest("GET", "/connectors/ghost", "/connectors/ghost", {}, None, 404),
    ]
    assert [r.status for r in sim.calls(method="PATCH")] == [200]
    sim.clear_requests()
    assert sim.requests == []


def test_direct_controls_show_through_the_api(
    timed: tuple[ConnectSim, httpx.Client], clock: Clock
) -> None:
    sim, client = timed
    sim.add_connector("orders", tasks=1)
    sim.set_offsets("orders", [{"partition": {"f": "a"}, "offset": {"pos": 9}}])
    assert client.get("/connectors/orders/offsets").json()["offsets"] == [
        {"partition": {"f": "a"}, "offset": {"pos": 9}}
    ]
    # No lag, no stop or resume delay: only the restart takes time.
    sim.set_delays(
        restart=1.0, stop=0.0, restart_lag=0.0, task_restart_after=0.0, state_lag=0.0, resume=0.0
    )
    t0 = clock.now
    assert client.post("/connectors/orders/restart?includeTasks=true").status_code == 202
    status = sim.status("orders")
    assert status == client.get("/connectors/orders/status").json()
    assert status["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in status["tasks"]] == ["RESTARTING"]
    clock.now = t0 + 1.0 - JUST
    assert sim.state("orders") is State.RESTARTING
    clock.now = t0 + 1.0
    assert sim.status("orders")["connector"]["state"] == "RUNNING"
    assert sim.state("orders", 0) is State.RUNNING
    assert client.put("/connectors/orders/stop").status_code == 204
    assert sim.state("orders") is State.STOPPED
    assert sim.status("orders")["tasks"] == []
    assert client.put("/connectors/orders/resume").status_code == 202
    assert shape(client, "orders") == "RUNNING RUNNING"
    sim.remove_connector("orders")
    assert client.get("/connectors").json() == []
    assert client.get("/connectors/orders/status").status_code == 404


def test_controls_and_requests_from_many_threads_are_counted_exactly(
    sim: ConnectSim,
) -> None:
    sim.add_connector("orders", tasks=2)

    def hammer() -> None:
        with httpx.Client(base_url=sim.url) as client:
            for _ in range(20):
                assert client.post("/connectors/orders/tasks/1/restart").status_code == 204
                sim.fail_task("orders", 0)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sim.restarts("orders", 1) == 80
    assert len(sim.calls("POST")) == 80


def test_basic_auth_refuses_missing_or_wrong_credentials_with_connects_401() -> None:
    with ConnectSim(basic_auth=("connect", "s3cret")) as sim:
        sim.add_connector("orders")
        with httpx.Client(base_url=sim.url) as anonymous:
            refused = anonymous.get("/connectors/orders/status")
            assert refused.status_code == 401
            # JaasBasicAuthFilter aborts with a bare string, not Connect's JSON error shape.
            assert refused.text == "User cannot access the resource."
            # Unknown paths never reach the filter, which runs after resource matching.
            assert anonymous.get("/nope").status_code == 404
            # Internal task-config requests between workers are not authenticated.
            assert anonymous.post("/connectors/orders/tasks", json=[]).status_code == 501
        with httpx.Client(base_url=sim.url, auth=("connect", "wrong")) as wrong:
            assert wrong.get("/").status_code == 401
        with httpx.Client(base_url=sim.url, auth=("connect", "s3cret")) as right:
            assert right.get("/connectors/orders/status").status_code == 200
            assert right.post("/connectors/orders/restart").status_code == 204
        assert [r.status for r in sim.requests] == [401, 404, 501, 401, 200, 204]


def test_mutual_tls_serves_a_client_with_a_certificate_and_cuts_off_one_without(
    pki: Pki,
) -> None:
    with ConnectSim(tls=pki) as sim:
        sim.add_connector("orders")
        assert sim.url.startswith("https://127.0.0.1:")
        with httpx.Client(base_url=sim.url, verify=sim.client_context()) as client:
            assert client.get("/connectors/orders/status").json()["name"] == "orders"
        with (
            httpx.Client(base_url=sim.url, verify=sim.client_context(with_cert=False)) as bare,
            pytest.raises(httpx.TransportError),
        ):
            bare.get("/connectors/orders/status")
        assert len(sim.requests) == 1


def test_server_tls_alone_serves_a_client_without_a_certificate(pki: Pki) -> None:
    with ConnectSim(tls=pki, require_client_cert=False, basic_auth=("u", "p")) as sim:
        verify = sim.client_context(with_cert=False)
        with httpx.Client(base_url=sim.url, verify=verify, auth=("u", "p")) as client:
            assert client.get("/").json()["version"] == "3.6.1"
        with httpx.Client(base_url=sim.url, verify=verify) as client:
            assert client.get("/").status_code == 401
