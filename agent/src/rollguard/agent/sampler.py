"""The background sampler: one JMX round at a time, results cached for the request path.

Requests never wait for JMX: they read `Sampler.current()`, which costs a clock read and a
comparison. The sampler runs a round, publishes the outcome, sleeps, and goes again. Sleeps are
short while the broker is not RUNNING (a recovery is being watched, or JMX just failed) and long
once it is, because a RUNNING broker rarely changes state and every jmxquery round costs a JVM.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from rollguard.agent.jmx import JmxBackend
from rollguard.agent.readings import FailureReason, SampleError, interpret
from rollguard.shared.retry import RetryPolicy, RetryStats, retry_async
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Sample:
    """A good sample; `body` is the response, rendered once when the sample is taken."""

    report: BrokerStateReport
    body: bytes
    taken_at: float  # monotonic seconds


@dataclass(frozen=True, slots=True)
class Unavailable:
    """No usable sample, and why; `body` is the JSON of the 503 response."""

    reason: FailureReason
    message: str
    body: bytes


def unavailable(
    reason: FailureReason, message: str, details: dict[str, str] | None = None
) -> Unavailable:
    """`details`: what is known all the same (`SampleError.details`), in the 503 body."""
    body = {"error": reason, "message": message, **(details or {})}
    return Unavailable(reason, message, json.dumps(body).encode())


@dataclass(frozen=True, slots=True)
class SamplerSettings:
    interval: float  # between rounds while the broker is not RUNNING, or after a failure
    running_interval: float  # between rounds while the broker is RUNNING
    timeout: float  # hard limit of one round
    max_age: float  # a sample older than this is not served


def next_interval(outcome: Sample | Unavailable, settings: SamplerSettings) -> float:
    if isinstance(outcome, Sample) and outcome.report.broker_state is BrokerState.RUNNING:
        return settings.running_interval
    return settings.interval


Listener = Callable[[Sample | Unavailable, Sample | Unavailable], None]

SAMPLE_OPERATION = "jmx-sample"


def is_transient(error: BaseException) -> bool:
    """Only `jmx-error` is worth retrying inside a round: a refused, hung or unauthorised JMX
    port says something true about the broker, and the next round comes soon anyway."""
    return isinstance(error, SampleError) and error.reason is FailureReason.JMX_ERROR


class Sampler:
    def __init__(
        self,
        backend: JmxBackend,
        settings: SamplerSettings,
        *,
        retry: RetryPolicy | None = None,
        stats: RetryStats | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        boot_id: str | None = None,
    ) -> None:
        self.backend = backend
        self.boot_id = boot_id
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.stats = stats or RetryStats()
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._latest: Sample | Unavailable = unavailable(
            FailureReason.NO_SAMPLE_YET, "the agent has not finished its first JMX round yet"
        )
        self._listeners: list[Listener] = []
        self.rounds = 0
        self.last_duration: float | None = None

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(previous, latest)` after every round."""
        self._listeners.append(listener)

    @property
    def latest(self) -> Sample | Unavailable:
        return self._latest

    def current(self) -> Sample | Unavailable:
        """The latest sample if it is fresh enough to act on; otherwise why not."""
        latest = self._latest
        if isinstance(latest, Sample):
            age = self._clock() - latest.taken_at
            if age > self.settings.max_age:
                return unavailable(
                    FailureReason.STALE_SAMPLE,
                    f"the latest sample is {age:.1f}s old (limit {self.settings.max_age:g}s)",
                )
        return latest

    async def sample_once(self) -> Sample | Unavailable:
        """Take one sample and publish it."""
        started = self._clock()
        deadline = started + self.settings.timeout
        try:
            # Retries share the round's hard time limit: a round never outlasts --sample-timeout.
            readings = await retry_async(
                lambda: self.backend.read(deadline - self._clock()),
                self.retry,
                operation=SAMPLE_OPERATION,
                retriable=is_transient,
                stats=self.stats,
                clock=self._clock,
                sleep=self._sleep,
                deadline=deadline,
            )
            report = interpret(readings, self._wall_clock(), boot_id=self.boot_id)
            outcome: Sample | Unavailable = Sample(report, report.to_json(), self._clock())
        except SampleError as exc:
            outcome = unavailable(exc.reason, exc.message, exc.details)
        self.rounds += 1
        self.last_duration = self._clock() - started
        self._publish(outcome)
        return outcome

    def _publish(self, outcome: Sample | Unavailable) -> None:
        previous, self._latest = self._latest, outcome
        _log_transition(previous, outcome)
        for listener in self._listeners:
            listener(previous, outcome)

    async def run(self) -> None:
        """Sample until cancelled; cancellation kills a JMX round in flight."""
        while True:
            outcome = await self.sample_once()
            await self._sleep(next_interval(outcome, self.settings))


def _describe(outcome: Sample | Unavailable) -> str:
    if isinstance(outcome, Unavailable):
        return f"unavailable ({outcome.reason}: {outcome.message})"
    return outcome.report.describe()


def _log_transition(previous: Sample | Unavailable, latest: Sample | Unavailable) -> None:
    """One log line per change of state or failure reason, not one per round."""
    same_state = (
        isinstance(previous, Sample)
        and isinstance(latest, Sample)
        and previous.report.broker_state is latest.report.broker_state
    )
    same_failure = (
        isinstance(previous, Unavailable)
        and isinstance(latest, Unavailable)
        and previous.reason is latest.reason
    )
    if same_state or same_failure:
        return
    level = logging.WARNING if isinstance(latest, Unavailable) else logging.INFO
    logger.log(level, "broker is %s", _describe(latest))
