"""A platform API that does not answer for a while is waited out by the lease's rule
(`Observer.through_outage`), and a 403 on a call allowed before is taken for an API server that
has just started (`kubernetes.AllowedCalls`). The real API server stopped for 20 s in the middle
of a roll is tests/real/test_kube_roll.py; these pin the rule's edges."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from rollguard.roller.kubernetes import AllowedCalls, KubernetesRefused, KubernetesUnavailable
from rollguard.roller.model import PlatformView
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.voice import EventLog

from helpers import Clock


def observer(clock: Clock, events: EventLog) -> Observer:
    return Observer(
        None,  # type: ignore[arg-type]
        None,
        events,
        sleep=clock.sleep,
        clock=clock,
        outage_limit=30,
        outage_retry=2,
    )


def failing(times: int) -> tuple[list[float], object]:
    calls: list[float] = []

    async def call() -> PlatformView:
        calls.append(0)
        if len(calls) <= times:
            raise KubernetesUnavailable("Kubernetes API: get pod kafka-0: ConnectError: refused")
        return PlatformView(exists=True, ready=True, up_to_date=True)

    return calls, call


def test_an_api_answering_again_within_the_lease_duration_costs_nothing(tmp_path: Path) -> None:
    clock, events = Clock(), EventLog(tmp_path / "events.jsonl", "r1")
    calls, call = failing(12)  # 24 s without an answer
    view = asyncio.run(observer(clock, events).through_outage(call))  # type: ignore[arg-type]
    assert view.ready and len(calls) == 13 and clock.now == 24
    said = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["action"] for e in said] == ["platform-unavailable"] * 2  # once, and once back
    assert "ConnectError" in said[0]["reason"] and "answers again, after 24s" in said[1]["reason"]


def test_an_api_silent_for_the_lease_duration_fails_naming_the_call(tmp_path: Path) -> None:
    clock = Clock()
    _calls, call = failing(100)
    with pytest.raises(KubernetesUnavailable, match="get pod kafka-0"):
        asyncio.run(observer(clock, EventLog(None, "r1")).through_outage(call))  # type: ignore[arg-type]
    assert clock.now == 28  # the next try, at 30 s, would come when the lease could be gone


def forbidden() -> ApiError:
    status = Status(code=403, reason="Forbidden", message='pods "kafka-0" is forbidden')
    error = ApiError.__new__(ApiError)
    error.status = status
    return error


def test_a_403_is_an_outage_only_for_a_call_allowed_before() -> None:
    allowed = AllowedCalls()
    first = allowed.error("get pods", "get pod kafka-0", forbidden())
    assert type(first) is KubernetesRefused and "403 Forbidden" in str(first)
    allowed.allowed("get pods")
    again = allowed.error("get pods", "get pod kafka-0", forbidden())
    assert isinstance(again, KubernetesUnavailable) and "allowed before" in str(again)
    other = allowed.error("delete pods", "delete pod kafka-0", forbidden())
    assert type(other) is KubernetesRefused
