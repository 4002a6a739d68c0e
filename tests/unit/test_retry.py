"""The shared retry policy: the reference formula, validation, and the execution helpers."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryPolicy, RetryStats, backoff_ms, retry_async, retry_sync


def test_defaults_are_the_references() -> None:
    policy = RetryPolicy()
    assert (
        policy.max_retries,
        policy.initial_backoff_ms,
        policy.max_backoff_ms,
        policy.backoff_multiplier,
        policy.jitter_factor,
    ) == (5, 300, 10000, 2.0, 0.25)
    assert policy.attempts == 6


def test_delays_for_retries_0_to_10_with_a_seeded_random_source() -> None:
    draws = random.Random(2026)
    delays = [round(backoff_ms(RetryPolicy(), n, draws.random()), 3) for n in range(11)]
    # capped = min(300 * 2**n, 10000); final = capped * (1 + 0.25 * U): computed by hand from
    # the same seeded draws, so the table checks the formula, not itself
    draws = random.Random(2026)
    expected = []
    for capped in [300, 600, 1200, 2400, 4800, 9600] + [10000] * 5:
        expected.append(round(capped + capped * 0.25 * draws.random(), 3))
    assert delays == expected
    assert delays[0] >= 300 and delays[-1] <= 12500
    # and without jitter, exactly the capped exponential
    flat = [backoff_ms(RetryPolicy(jitter_factor=0), n, 0.99) for n in range(11)]
    assert flat == [300, 600, 1200, 2400, 4800, 9600, 10000, 10000, 10000, 10000, 10000]


@given(
    initial=st.floats(0, 10_000),
    extra=st.floats(0, 100_000),
    multiplier=st.floats(1, 10),
    jitter=st.floats(0, 1),
    retry=st.integers(0, 5000),
    uniform=st.floats(0, 1, exclude_max=True),
)
def test_every_delay_lies_between_the_capped_value_and_its_jittered_bound(
    initial: float, extra: float, multiplier: float, jitter: float, retry: int, uniform: float
) -> None:
    policy = RetryPolicy(0, initial, initial + extra, multiplier, jitter)
    try:
        base = initial * multiplier**retry
    except OverflowError:
        base = float("inf")
    capped = min(base, initial + extra)
    delay = backoff_ms(policy, retry, uniform)
    assert capped <= delay <= capped * (1 + jitter) * (1 + 1e-12)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"initial_backoff_ms": 20000},
            "--retry-initial-backoff-ms 20000 must not exceed --retry-max-backoff-ms 10000",
        ),
        ({"jitter_factor": 1.5}, r"--retry-jitter-factor 1.5 must be in \[0, 1\]"),
        ({"jitter_factor": -0.1}, r"--retry-jitter-factor -0.1 must be in \[0, 1\]"),
        ({"backoff_multiplier": 0.5}, r"--retry-backoff-multiplier 0.5 must be in \[1, inf\)"),
        ({"max_retries": -1}, r"--retry-max-retries -1 must be a whole number in \[0, "),
        ({"initial_backoff_ms": -5}, r"--retry-initial-backoff-ms -5 must be in \[0, inf\)"),
        ({"max_backoff_ms": -1, "initial_backoff_ms": 0}, "--retry-max-backoff-ms -1 must be"),
        ({"jitter_factor": float("nan")}, "--retry-jitter-factor is not a number"),
        ({"max_backoff_ms": float("inf")}, "--retry-max-backoff-ms inf must be in"),
    ],
)
def test_each_invalid_setting_is_refused_with_its_name_and_range(
    settings: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        RetryPolicy(**settings)  # type: ignore[arg-type]


class Flaky:
    def __init__(self, failures: int, error: type[Exception] = ConnectionError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return f"ok after {self.calls}"


def test_sync_retries_with_injected_sleep_and_randomness() -> None:
    waits: list[float] = []
    stats = RetryStats()
    result = retry_sync(
        Flaky(3),
        RetryPolicy(),
        operation="op",
        retriable=(ConnectionError,),
        stats=stats,
        sleep=waits.append,
        uniform=lambda: 0.5,
    )
    assert result == "ok after 4"
    assert waits == [0.3375, 0.675, 1.35]  # capped * 1.125 with U = 0.5
    counts = stats.snapshot()["op"]
    assert (counts.retries, counts.failures, counts.successes) == (3, 0, 1)


def test_a_permanent_failure_is_raised_after_max_retries_plus_one_attempts() -> None:
    flaky, stats = Flaky(100), RetryStats()
    with pytest.raises(ConnectionError, match="failure 6"):
        retry_sync(
            flaky,
            RetryPolicy(),
            operation="op",
            retriable=(ConnectionError,),
            stats=stats,
            sleep=lambda s: None,
        )
    assert flaky.calls == 6
    counts = stats.snapshot()["op"]
    assert (counts.retries, counts.failures, counts.successes) == (5, 1, 0)


def test_an_error_the_caller_does_not_call_retriable_is_raised_at_once() -> None:
    flaky, stats = Flaky(1, ValueError), RetryStats()
    with pytest.raises(ValueError, match="failure 1"):
        retry_sync(
            flaky,
            RetryPolicy(),
            operation="op",
            retriable=lambda e: False,
            stats=stats,
            sleep=lambda s: None,
        )
    assert flaky.calls == 1 and stats.snapshot()["op"].failures == 1


def test_a_deadline_stops_retrying_when_the_next_wait_would_pass_it() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    with pytest.raises(ConnectionError):
        retry_sync(
            Flaky(100),
            RetryPolicy(jitter_factor=0),
            operation="op",
            retriable=(ConnectionError,),
            sleep=sleep,
            clock=lambda: now[0],
            deadline=2.0,
        )
    assert waits == [0.3, 0.6]  # 0.9 s waited; 1.2 s more would end at 2.1 s


def test_async_attempts_run_in_order_and_never_overlap() -> None:
    events: list[str] = []
    running = 0

    async def attempt() -> int:
        nonlocal running
        running += 1
        assert running == 1
        events.append(f"start {len(events) // 2}")
        await asyncio.sleep(0)
        events.append(f"end {len(events) // 2}")
        running -= 1
        if len(events) < 6:
            raise TimeoutError("again")
        return 42

    async def no_wait(seconds: float) -> None:
        await asyncio.sleep(0)

    result = asyncio.run(
        retry_async(
            attempt, RetryPolicy(), operation="op", retriable=(TimeoutError,), sleep=no_wait
        )
    )
    assert result == 42
    assert events == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]


def test_async_waits_do_not_block_the_event_loop_and_cancellation_stops_cleanly() -> None:
    stats = RetryStats()

    async def scenario() -> None:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        async def always_fails() -> None:
            raise ConnectionError("down")

        policy = RetryPolicy(initial_backoff_ms=5000)  # real asyncio.sleep: 5 s waits
        tick_task = asyncio.create_task(ticker())
        retry_task = asyncio.create_task(
            retry_async(
                always_fails, policy, operation="op", retriable=(ConnectionError,), stats=stats
            )
        )
        await asyncio.sleep(0.2)
        assert ticks >= 5, "the event loop was blocked during the wait"
        retry_task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(retry_task, 1)
        tick_task.cancel()

    asyncio.run(scenario())
    counts = stats.snapshot()["op"]
    assert (counts.retries, counts.failures, counts.successes) == (1, 0, 0)


def test_summary_names_each_operation() -> None:
    stats = RetryStats()
    stats.record("agent-broker-state", retries=2, successes=3)
    stats.record("jmx-sample", failures=1)
    assert stats.summary() == (
        "agent-broker-state: 3 ok, 2 retries, 0 failed; jmx-sample: 0 ok, 0 retries, 1 failed"
    )
    assert RetryStats().summary() == "no network operations"
