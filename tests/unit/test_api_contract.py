"""The agent's HTTP contract, in process through httpx's ASGI transport, against the real apps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from test_sampler import SETTINGS, Scripted, broker

from rollguard.agent.api import create_api_app, create_probe_app
from rollguard.agent.metrics import AgentMetrics
from rollguard.agent.readings import (
    REMAINING_LOGS,
    REMAINING_SEGMENTS,
    FailureReason,
    MBeanValue,
    SampleError,
)
from rollguard.agent.sampler import Sampler
from rollguard.agent.timeline_store import TimelineStore
from rollguard.shared.retry import RetryPolicy

from helpers import Clock


def recovering() -> list[MBeanValue]:
    return broker(
        "2",
        MBeanValue(REMAINING_LOGS + ",dir=/a", "Value", 4),
        MBeanValue(REMAINING_LOGS + ",dir=/b", "Value", 5),
        MBeanValue(REMAINING_SEGMENTS + ",dir=/a,threadNum=0", "Value", 40),
        MBeanValue(REMAINING_SEGMENTS + ",dir=/b,threadNum=0", "Value", 2),
    )


def call(sampler: Sampler, method: str, path: str, *, probe: bool = False) -> httpx.Response:
    app = create_probe_app(sampler, METRICS[sampler]) if probe else create_api_app(sampler)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://agent") as client:
            return await client.request(method, path)

    return asyncio.run(go())


METRICS: dict[Sampler, AgentMetrics] = {}


def sampled(*results: list[MBeanValue] | SampleError) -> Sampler:
    """A sampler (and its metrics, counting from the start) that has run through `results`."""
    sampler = Sampler(Scripted(*results), SETTINGS, retry=RetryPolicy(max_retries=0))
    METRICS[sampler] = AgentMetrics(sampler, Clock(1000.0))
    for _ in results:
        asyncio.run(sampler.sample_once())
    return sampler


def test_broker_state_in_recovery_sums_and_has_the_sample_time() -> None:
    response = call(sampled(recovering()), "GET", "/v1/broker-state")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["brokerState"] == 2
    assert body["recovery"] == {
        "remainingLogsToRecover": 9,
        "remainingSegmentsToRecover": 42,
        "phase": "recovering",
    }
    assert body["sampledAt"].endswith("Z")


@pytest.mark.parametrize("path", ["/v5/broker-state", "/v1/nope", "/", "/v1/broker-state/x"])
def test_unknown_paths_are_404_json(path: str) -> None:
    response = call(sampled(broker("3")), "GET", path)
    assert response.status_code == 404
    assert response.json()["error"] == "not-found"
    assert "/v1/broker-state" in response.json()["message"]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_other_methods_are_405_json_with_allow(method: str) -> None:
    response = call(sampled(broker("3")), method, "/v1/broker-state")
    assert response.status_code == 405
    assert response.json()["error"] == "method-not-allowed"
    assert "GET" in response.headers["allow"]


@pytest.mark.parametrize(
    "reason", [r for r in FailureReason if r is not FailureReason.STALE_SAMPLE]
)
def test_every_failure_reason_is_a_503_with_that_reason(reason: FailureReason) -> None:
    results = [] if reason is FailureReason.NO_SAMPLE_YET else [SampleError(reason, "why")]
    response = call(sampled(*results), "GET", "/v1/broker-state")
    assert response.status_code == 503
    assert response.json()["error"] == reason.value
    assert response.headers["retry-after"] == "1"


@pytest.mark.parametrize(
    ("state", "status"), [("0", 503), ("1", 503), ("2", 503), ("3", 204), ("6", 204), ("127", 503)]
)
def test_ready_follows_strimzis_rule(state: str, status: int) -> None:
    response = call(sampled(broker(state)), "GET", "/v1/ready", probe=True)
    assert response.status_code == status
    if status == 503:
        assert response.json()["error"] == "not-ready"


def test_ready_is_503_with_the_reason_when_jmx_fails() -> None:
    failing = sampled(SampleError(FailureReason.JMX_TIMEOUT, "hung"))
    response = call(failing, "GET", "/v1/ready", probe=True)
    assert response.status_code == 503 and response.json()["error"] == "jmx-timeout"


def test_metrics_show_state_progress_and_errors_by_reason() -> None:
    sampler = sampled(SampleError(FailureReason.JMX_TIMEOUT, "hung"), recovering())
    text = call(sampler, "GET", "/metrics", probe=True).text
    assert "rollguard_agent_broker_state 2.0" in text
    assert "rollguard_agent_remaining_logs_to_recover 9.0" in text
    assert "rollguard_agent_remaining_segments_to_recover 42.0" in text
    assert 'rollguard_agent_sampler_errors_total{reason="jmx-timeout"} 1.0' in text
    assert "rollguard_agent_samples_total 1.0" in text
    assert "rollguard_agent_ready 0.0" in text
    assert "rollguard_agent_sample_age_seconds" in text
    assert "_created" not in text
    # the shared retry policy's counters, by operation
    assert 'rollguard_operation_successes_total{operation="jmx-sample"} 1.0' in text
    assert 'rollguard_operation_failures_total{operation="jmx-sample"} 1.0' in text
    assert 'rollguard_operation_retries_total{operation="jmx-sample"} 0.0' in text


def test_error_bodies_are_json_objects() -> None:
    for path in ("/v5/broker-state", "/v1/broker-state"):
        body = call(sampled(), "GET", path).content
        assert set(json.loads(body)) == {"error", "message"}


# The wire contract (docs/architecture.md, rollguard.shared.wire): the keys a report may carry,
# and the headers every answer of `/v1/broker-state` has.
REPORT_KEYS = {"brokerState", "recovery", "sampledAt", "brokerStartedAt", "agentBootId"}
HEADERS = {"content-type": "application/json", "cache-control": "no-store"}


def request(app: object, method: str, path: str = "/v1/broker-state") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="https://agent") as client:
            return await client.request(method, path)

    return asyncio.run(go())


def entries(sampler: Sampler) -> dict[str, object]:
    """The API app, and the router behind it (which routes the path to the same endpoint)."""
    app = create_api_app(sampler)
    return {"api": app, "router": app.router}


@pytest.mark.parametrize("entry", ["api", "router"])
@pytest.mark.parametrize(
    ("results", "state"), [([broker("3")], 3), ([recovering()], 2)], ids=["running", "recovery"]
)
def test_a_sample_is_200_with_the_contracts_keys_and_headers(
    results: list[list[MBeanValue]], state: int, entry: str
) -> None:
    response = request(entries(sampled(*results))[entry], "GET")
    assert response.status_code == 200
    assert dict(response.headers) == {**HEADERS, "content-length": str(len(response.content))}
    body = response.json()
    assert body["brokerState"] == state and set(body) <= REPORT_KEYS
    assert ("recovery" in body) == (state == 2)
    if state == 2:
        assert set(body["recovery"]) == {
            "remainingLogsToRecover",
            "remainingSegmentsToRecover",
            "phase",
        }


@pytest.mark.parametrize("entry", ["api", "router"])
def test_no_usable_sample_is_503_with_a_reason_and_retry_after(entry: str) -> None:
    failing = sampled(SampleError(FailureReason.JMX_UNREACHABLE, "refused"))
    response = request(entries(failing)[entry], "GET")
    assert response.status_code == 503
    assert dict(response.headers) == {
        **HEADERS,
        "content-length": str(len(response.content)),
        "retry-after": "1",
    }
    assert response.json() == {"error": "jmx-unreachable", "message": "refused"}


@pytest.mark.parametrize("entry", ["api", "router"])
@pytest.mark.parametrize(
    "results", [[broker("3")], [SampleError(FailureReason.JMX_TIMEOUT, "hung")]], ids=["200", "503"]
)
def test_head_has_the_status_and_headers_of_get_and_no_body(
    results: list[list[MBeanValue] | SampleError], entry: str
) -> None:
    app = entries(sampled(*results))[entry]
    get, head = request(app, "GET"), request(app, "HEAD")
    assert head.status_code == get.status_code
    assert dict(head.headers) == dict(get.headers)  # content-length: the GET body's
    assert head.content == b"" and get.content != b""
    # httpx (like uvicorn) drops a HEAD body itself: the app must not send one either
    assert [m.get("body") for m in asgi_messages(app, "HEAD")] == [None, b""]


def asgi_messages(app: object, method: str) -> list[dict[str, object]]:
    """What `app` sends for `method /v1/broker-state`, message by message."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "scheme": "https",
        "method": method,
        "path": "/v1/broker-state",
        "root_path": "",
        "query_string": b"",
        "headers": [],
    }
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    return sent


def test_each_request_gets_the_latest_sample_and_a_stale_one_is_refused() -> None:
    clock = Clock(1000.0)
    sampler = Sampler(
        Scripted(broker("3"), recovering()), SETTINGS, retry=RetryPolicy(max_retries=0), clock=clock
    )
    app = create_api_app(sampler)
    asyncio.run(sampler.sample_once())
    assert request(app, "GET").json()["brokerState"] == 3
    asyncio.run(sampler.sample_once())
    assert request(app, "GET").json()["brokerState"] == 2
    clock.now += SETTINGS.max_age + 1
    stale = request(app, "GET")
    assert stale.status_code == 503 and stale.json()["error"] == "stale-sample"
    assert stale.headers["content-length"] == str(len(stale.content))


def timeline_call(store: TimelineStore, query: str) -> httpx.Response:
    app = create_api_app(sampled(broker("3")), store)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://agent") as client:
            return await client.get("/v1/recovery-timeline?" + query)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("after=" + "9" * 5000, "after"),  # int() would answer "Exceeds the limit (4300 digits)"
        ("after=" + "1" * 20, "after"),  # past 2**63-1
        ("after=%D9%A3", "after"),  # Arabic-Indic three: str.isdigit() says yes
        ("after=%EF%BC%95", "after"),  # a fullwidth five
        ("after=-1", "after"),
        ("after=+1", "after"),
        ("after=1.0", "after"),
        ("after=", "after"),
        ("after=%201", "after"),
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("limit=%D9%A1%D9%A0", "limit"),
    ],
)
def test_timeline_parameters_are_ascii_digits_in_range_or_400_naming_them(
    tmp_path: Path, query: str, name: str
) -> None:
    response = timeline_call(TimelineStore(tmp_path), query)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "bad-parameter"
    assert body["message"].startswith(f"'{name}' must be a whole number from")
    assert "4300" not in body["message"] and len(body["message"]) < 200


def test_timeline_parameters_in_range_are_served(tmp_path: Path) -> None:
    store = TimelineStore(tmp_path)
    for ts in (1, 2, 3):
        store.append("n", "b", ts, 3, None, None)
    response = timeline_call(store, f"after={2**63 - 1}&limit=10000")
    assert response.status_code == 200 and response.json()["records"] == []
    response = timeline_call(store, "after=0000000000000000001&limit=1")  # 19 characters
    assert [r["seq"] for r in response.json()["records"]] == [2]
