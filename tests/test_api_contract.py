"""The agent's HTTP contract, in process through httpx's ASGI transport, against the real apps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from test_sampler import SETTINGS, Clock, Scripted, broker

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
    METRICS[sampler] = AgentMetrics(sampler, Clock())
    for _ in results:
        asyncio.run(sampler.sample_once())
    return sampler


def test_broker_state_in_recovery_sums_and_has_the_sample_time() -> None:
    response = call(sampled(recovering()), "GET", "/v1/broker-state")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["brokerState"] == 2
    assert body["recovery"] == {"remainingLogsToRecover": 9, "remainingSegmentsToRecover": 42}
    assert body["sampledAt"].endswith("Z")


def test_head_is_answered_like_get_without_a_body() -> None:
    response = call(sampled(broker("3")), "HEAD", "/v1/broker-state")
    assert response.status_code == 200 and response.content == b""


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


@pytest.mark.parametrize(
    "results",
    [
        [broker("3")],
        [recovering()],
        [SampleError(FailureReason.JMX_TIMEOUT, "hung")],
    ],
    ids=["running", "recovery", "unavailable"],
)
def test_the_fast_path_answers_exactly_as_the_starlette_route(results: list) -> None:  # type: ignore[type-arg]
    from rollguard.agent.api import BrokerStateFastPath

    sampler = sampled(*results)
    app = create_api_app(sampler)
    assert isinstance(app, BrokerStateFastPath)

    async def get(asgi: object) -> httpx.Response:
        transport = httpx.ASGITransport(app=asgi)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="https://agent") as client:
            return await client.get("/v1/broker-state")

    fast, routed = asyncio.run(get(app)), asyncio.run(get(app.app))
    assert fast.status_code == routed.status_code
    assert sorted(fast.headers.items()) == sorted(routed.headers.items())
    assert fast.content == routed.content
    assert fast.status_code == (503 if isinstance(results[0], SampleError) else 200)


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
