"""The sampler's logic with a scripted JMX backend and an injected clock (no sleeping)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rollguard.agent.readings import (
    BROKER_STATE,
    REMAINING_LOGS,
    FailureReason,
    MBeanValue,
    SampleError,
)
from rollguard.agent.sampler import Sample, Sampler, SamplerSettings, Unavailable, next_interval
from rollguard.shared.retry import RetryPolicy

from helpers import Clock

SETTINGS = SamplerSettings(interval=1, running_interval=10, timeout=5, max_age=30)


class Scripted:
    """Answers each read with the next scripted result: values, or a SampleError to raise."""

    name = "scripted"

    def __init__(self, *results: list[MBeanValue] | SampleError) -> None:
        self.results = list(results)
        self.timeouts: list[float] = []

    async def read(self, timeout: float) -> list[MBeanValue]:
        self.timeouts.append(timeout)
        result = self.results.pop(0)
        if isinstance(result, SampleError):
            raise result
        return result

    async def close(self) -> None:
        pass


def broker(state: str, *extra: MBeanValue) -> list[MBeanValue]:
    return [MBeanValue(BROKER_STATE, "Value", state), *extra]


def test_nothing_is_served_before_the_first_round() -> None:
    current = Sampler(Scripted(), SETTINGS).current()
    assert isinstance(current, Unavailable) and current.reason is FailureReason.NO_SAMPLE_YET


def test_a_sample_is_served_until_it_is_older_than_the_limit() -> None:
    clock = Clock(1000.0)
    backend = Scripted(broker("3"))
    sampler = Sampler(backend, SETTINGS, clock=clock)
    asyncio.run(sampler.sample_once())
    assert backend.timeouts == [5]
    current = sampler.current()
    assert isinstance(current, Sample) and current.body.startswith(b'{"brokerState":3')
    clock.now += 30
    assert isinstance(sampler.current(), Sample)
    clock.now += 0.1
    stale = sampler.current()
    assert isinstance(stale, Unavailable) and stale.reason is FailureReason.STALE_SAMPLE
    assert b"30.1s old" in stale.body


def test_a_failed_round_replaces_the_previous_sample_at_once() -> None:
    sampler = Sampler(
        Scripted(broker("3"), SampleError(FailureReason.JMX_UNREACHABLE, "refused")), SETTINGS
    )
    asyncio.run(sampler.sample_once())
    asyncio.run(sampler.sample_once())
    current = sampler.current()
    assert isinstance(current, Unavailable)
    assert current.reason is FailureReason.JMX_UNREACHABLE
    assert current.body == b'{"error": "jmx-unreachable", "message": "refused"}'


@pytest.mark.parametrize(
    ("outcome", "interval"),
    [(broker("3"), 10), (broker("2", MBeanValue(REMAINING_LOGS + ",dir=/d", "Value", 1)), 1),
     (broker("1"), 1), (broker("6"), 1), (SampleError(FailureReason.JMX_TIMEOUT, "hung"), 1)],
)  # fmt: skip
def test_rounds_are_frequent_unless_the_broker_is_running(
    outcome: list[MBeanValue] | SampleError, interval: float
) -> None:
    sampler = Sampler(Scripted(outcome), SETTINGS)
    assert next_interval(asyncio.run(sampler.sample_once()), SETTINGS) == interval


def test_listeners_see_every_round_and_the_log_shows_only_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = Sampler(
        Scripted(broker("2"), broker("2"), broker("3"),
                 SampleError(FailureReason.JMX_TIMEOUT, "hung"),
                 SampleError(FailureReason.JMX_TIMEOUT, "hung")),
        SETTINGS,
    )  # fmt: skip
    seen: list[tuple[object, object]] = []
    sampler.subscribe(lambda previous, latest: seen.append((previous, latest)))
    with caplog.at_level(logging.INFO, logger="rollguard.agent.sampler"):
        for _ in range(5):
            asyncio.run(sampler.sample_once())
    assert len(seen) == 5 and sampler.rounds == 5
    assert [r.getMessage() for r in caplog.records] == [
        "broker is RECOVERY (2)",
        "broker is RUNNING (3)",
        "broker is unavailable (jmx-timeout: hung)",
    ]


def test_cancelling_the_sampler_interrupts_a_round_in_flight() -> None:
    started = asyncio.Event()

    class Hanging(Scripted):
        async def read(self, timeout: float) -> list[MBeanValue]:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    async def scenario() -> None:
        task = asyncio.create_task(Sampler(Hanging(), SETTINGS).run())
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)

    asyncio.run(scenario())


class Waits:
    """An injected sleep that records what it was asked to wait and advances the clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += seconds


def test_a_transient_jmx_error_is_retried_within_the_round_with_the_shared_policy() -> None:
    clock = Clock(1000.0)
    waits = Waits(clock)
    vanished = SampleError(FailureReason.JMX_ERROR, "gauge vanished")
    backend = Scripted(vanished, vanished, broker("3"))
    policy = RetryPolicy(initial_backoff_ms=100, jitter_factor=0)
    sampler = Sampler(backend, SETTINGS, retry=policy, clock=clock, sleep=waits)
    assert isinstance(asyncio.run(sampler.sample_once()), Sample)
    assert waits.waits == [0.1, 0.2]
    # each attempt gets what is left of the round's time limit
    assert backend.timeouts == pytest.approx([5, 4.9, 4.7])
    counts = sampler.stats.snapshot()["jmx-sample"]
    assert (counts.retries, counts.failures, counts.successes) == (2, 0, 1)


def test_retries_never_outlast_the_round() -> None:
    clock = Clock(1000.0)
    waits = Waits(clock)
    errors = [SampleError(FailureReason.JMX_ERROR, "boom") for _ in range(6)]
    policy = RetryPolicy(initial_backoff_ms=2000, jitter_factor=0)
    sampler = Sampler(Scripted(*errors), SETTINGS, retry=policy, clock=clock, sleep=waits)
    outcome = asyncio.run(sampler.sample_once())
    assert isinstance(outcome, Unavailable) and outcome.reason is FailureReason.JMX_ERROR
    assert waits.waits == [2.0]  # 2 s, then 4 s would pass the 5 s limit
    counts = sampler.stats.snapshot()["jmx-sample"]
    assert (counts.retries, counts.failures, counts.successes) == (1, 1, 0)


def test_a_refused_or_hung_jmx_port_is_not_retried() -> None:
    for reason in (FailureReason.JMX_UNREACHABLE, FailureReason.JMX_TIMEOUT):
        backend = Scripted(SampleError(reason, "no"))
        sampler = Sampler(backend, SETTINGS)
        outcome = asyncio.run(sampler.sample_once())
        assert isinstance(outcome, Unavailable) and outcome.reason is reason
        assert len(backend.timeouts) == 1
