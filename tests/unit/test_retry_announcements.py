"""Retries said as they happen, and answers that say "not ready" counted apart from failures
(`rollguard.shared.retry`), with injected sleep and randomness: no test here waits."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rollguard.shared.retry import (
    NotReady,
    Retrying,
    RetryPolicy,
    RetryStats,
    announce,
    retry_async,
    retry_sync,
)


class Script:
    """Raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_each_retry_is_announced_before_its_wait_with_its_number_target_and_reason() -> None:
    said: list[Retrying] = []
    waits: list[float] = []
    result = retry_sync(
        Script(ConnectionRefusedError("refused"), TimeoutError("slow")),
        RetryPolicy(jitter_factor=0),
        operation="agent-broker-state",
        retriable=(OSError,),
        sleep=lambda delay: waits.append(delay),
        target="https://kafka-0:8443/v1/broker-state",
        on_retry=said.append,
    )
    assert result == "ok" and waits == [0.3, 0.6]
    assert [str(r) for r in said] == [
        "retrying 2/6 in 0.3s: agent-broker-state https://kafka-0:8443/v1/broker-state: "
        "ConnectionRefusedError: refused",
        "retrying 3/6 in 0.6s: agent-broker-state https://kafka-0:8443/v1/broker-state: "
        "TimeoutError: slow",
    ]


def test_announce_is_a_warning_and_the_default_a_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = RetryPolicy(max_retries=1, initial_backoff_ms=10, max_backoff_ms=10, jitter_factor=0)
    with caplog.at_level(logging.DEBUG, logger="rollguard.shared.retry"):
        retry_sync(Script(OSError("a")), policy, operation="op", retriable=(OSError,),
                   sleep=lambda _: None, on_retry=announce)  # fmt: skip
        retry_sync(Script(OSError("b")), policy, operation="op", retriable=(OSError,),
                   sleep=lambda _: None)  # fmt: skip
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "retrying 2/2 in 10ms: op: OSError: a"),
        ("DEBUG", "retrying 2/2 in 10ms: op: OSError: b"),
    ]


def test_the_last_failure_names_the_target_and_the_described_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(OSError), caplog.at_level(logging.WARNING):
        retry_sync(Script(OSError("x"), OSError("y")), RetryPolicy(max_retries=1),
                   operation="kafka-admin", retriable=(OSError,), sleep=lambda _: None,
                   target="127.0.0.1:9092", describe=lambda e: f"<{e}>")  # fmt: skip
    assert "kafka-admin 127.0.0.1:9092: failed after 2 attempts: <y>" in caplog.text


def test_a_not_ready_answer_that_is_not_retriable_is_counted_apart_and_raised_at_once() -> None:
    stats = RetryStats()
    script = Script(NotReady("HTTP 503 jmx-unreachable: refused"))
    with pytest.raises(NotReady):
        retry_sync(script, RetryPolicy(), operation="op", retriable=(OSError,), stats=stats,
                   sleep=lambda _: pytest.fail("a not-ready answer is not waited for"))  # fmt: skip
    assert script.calls == 1
    counts = stats.snapshot()["op"]
    assert (counts.successes, counts.not_ready, counts.retries, counts.failures) == (0, 1, 0, 0)


def test_a_retried_not_ready_waits_as_long_as_the_peer_said_capped_at_the_maximum_backoff() -> None:
    stats = RetryStats()
    waits: list[float] = []

    async def go() -> str:
        script = Script(NotReady("starting", retry_after=1), NotReady("starting", retry_after=3600),
                        NotReady("starting"))  # fmt: skip

        async def attempt() -> str:
            return script()

        async def sleep(delay: float) -> None:
            waits.append(delay)

        policy = RetryPolicy(max_backoff_ms=2000, jitter_factor=0)
        return await retry_async(attempt, policy, operation="op", retriable=(NotReady,),
                                 stats=stats, sleep=sleep)  # fmt: skip

    assert asyncio.run(go()) == "ok"
    # Retry-After 1 s honoured; 3600 s capped at --retry-max-backoff-ms; none said: the backoff
    assert waits == [1.0, 2.0, 1.2]
    counts = stats.snapshot()["op"]
    assert (counts.successes, counts.not_ready, counts.retries, counts.failures) == (1, 0, 3, 0)


def test_not_ready_until_the_last_attempt_is_not_ready_not_failed() -> None:
    stats = RetryStats()
    with pytest.raises(NotReady):
        retry_sync(Script(*[NotReady("no")] * 3), RetryPolicy(max_retries=2), operation="op",
                   retriable=(NotReady,), stats=stats, sleep=lambda _: None)  # fmt: skip
    counts = stats.snapshot()["op"]
    assert (counts.not_ready, counts.retries, counts.failures) == (1, 2, 0)


def test_the_summary_shows_answers_not_ready_apart_and_only_when_there_were_some() -> None:
    stats = RetryStats()
    stats.record("agent-broker-state", successes=9, not_ready=8)
    stats.record("kafka-admin", successes=3, retries=1, failures=1)
    assert stats.summary() == (
        "agent-broker-state: 9 ok, 8 answered not ready, 0 retries, 0 failed; "
        "kafka-admin: 3 ok, 1 retries, 1 failed"
    )
    assert stats.to_json()["agent-broker-state"] == {
        "ok": 9,
        "notReady": 8,
        "retries": 0,
        "failed": 0,
    }
