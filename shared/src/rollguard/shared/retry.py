"""One retry discipline for every network client: exponential backoff with proportional jitter.

The policy and its defaults are those of the Kafka Connect status-store proposal (see
`../shared/reference/kip-status-store-retry-backoff-jitter.txt`):

    retry-max-retries          5      [0, 2**31-1]  attempts = 1 + max retries
    retry-initial-backoff-ms   300    [0, inf)
    retry-max-backoff-ms       10000  [0, inf)      and initial <= max
    retry-backoff-multiplier   2.0    [1, inf)
    retry-jitter-factor        0.25   [0, 1]

The delay before retry number `n` (0 for the first retry) is

    capped = min(initial * multiplier ** n, max)
    delay  = capped + capped * jitter * U(0, 1)

so the final delay may exceed `max` by up to the jitter share (at most 25 % with the defaults), as
the reference specifies: the cap applies before the jitter, so that clients that reached the cap
still spread out instead of retrying in lockstep.

Counters per operation follow the reference's metrics: retries (`status-update-retry-total`),
failures after all retries (`-failure-total`) and successes (`-success-total`); and, apart from
failures, answers that say the peer is not ready yet (`NotReady`: an HTTP 503 with a reason),
which are answers, not a peer that cannot be reached.

Each retry can be announced as it happens (`on_retry=announce`: one warning a retry, naming the
operation, what it is against and why), so that a command waiting on a peer is never silent:

    retrying 2/6 in 0.7s: agent-broker-state https://kafka-0:8443/v1/broker-state: ConnectError: ...
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import TypeVar

from rollguard.shared.converters import MAX_INT
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)

T = TypeVar("T")
Retriable = Callable[[BaseException], bool] | tuple[type[BaseException], ...]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The five settings (the flags that set them: `retry_options.RetryOptions`, which a test
    holds to these defaults); invalid combinations are refused when the policy is built."""

    max_retries: int = 5
    initial_backoff_ms: float = 300.0
    max_backoff_ms: float = 10000.0
    backoff_multiplier: float = 2.0
    jitter_factor: float = 0.25

    def __post_init__(self) -> None:
        for setting in fields(self):
            value = getattr(self, setting.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{flag(setting.name)} {value!r} is not a number")
            if math.isnan(value):
                raise ConfigError(f"{flag(setting.name)} is not a number (NaN)")
        if not isinstance(self.max_retries, int) or not 0 <= self.max_retries <= MAX_INT:
            raise ConfigError(
                f"{flag('max_retries')} {self.max_retries} must be a whole number in [0, {MAX_INT}]"
            )
        for name in ("initial_backoff_ms", "max_backoff_ms"):
            value = getattr(self, name)
            if not 0 <= value < math.inf:
                raise ConfigError(f"{flag(name)} {value:g} must be in [0, inf) milliseconds")
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise ConfigError(
                f"{flag('initial_backoff_ms')} {self.initial_backoff_ms:g} must not exceed "
                f"{flag('max_backoff_ms')} {self.max_backoff_ms:g}"
            )
        if not 1 <= self.backoff_multiplier < math.inf:
            raise ConfigError(
                f"{flag('backoff_multiplier')} {self.backoff_multiplier:g} must be in [1, inf)"
            )
        if not 0 <= self.jitter_factor <= 1:
            raise ConfigError(f"{flag('jitter_factor')} {self.jitter_factor:g} must be in [0, 1]")

    @property
    def attempts(self) -> int:
        return self.max_retries + 1


def flag(setting: str) -> str:
    """The command-line name of a setting, the same in every rollguard CLI."""
    return "--retry-" + setting.replace("_", "-")


def backoff_ms(policy: RetryPolicy, retry: int, uniform: float) -> float:
    """The delay before retry number `retry` (0-based), given a draw `uniform` from U(0, 1)."""
    try:
        base = policy.initial_backoff_ms * policy.backoff_multiplier**retry
    except OverflowError:
        base = math.inf
    capped = min(base, policy.max_backoff_ms)
    return capped + capped * policy.jitter_factor * uniform


class NotReady(Exception):
    """An answer that says the peer is not ready yet (an HTTP 503 with a reason): the peer is
    there, so it is not a failure to reach it. An attempt raises it; it is retried only when
    `retriable` accepts it, after `retry_after` seconds when the peer said how long (at most
    the policy's maximum backoff), and when it is the last word it is counted as `not_ready`,
    not as a failure."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Retrying:
    """One retry about to happen: after attempt `attempt - 1` of `attempts` failed with
    `error` (described as `reason`), attempt `attempt` starts in `delay` seconds."""

    operation: str
    target: str  # what the operation is against (a URL, bootstrap servers), or ""
    attempt: int
    attempts: int
    delay: float
    reason: str
    error: BaseException

    def __str__(self) -> str:
        wait = f"{self.delay:.1f}s" if self.delay >= 0.1 else f"{self.delay * 1000:.0f}ms"
        return (
            f"retrying {self.attempt}/{self.attempts} in {wait}: "
            f"{_subject(self.operation, self.target)}: {self.reason}"
        )


def announce(retrying: Retrying) -> None:
    """`on_retry` for commands a person waits on: each retry is a warning, as it happens."""
    logger.warning("%s", retrying)


def _quiet(retrying: Retrying) -> None:
    logger.debug("%s", retrying)


def describe_error(error: BaseException) -> str:
    """`Type: message`, the default description of an error in retry and failure lines."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _subject(operation: str, target: str) -> str:
    return f"{operation} {target}" if target else operation


@dataclass(slots=True)
class OperationCounts:
    retries: int = 0
    failures: int = 0
    successes: int = 0
    not_ready: int = 0  # the last answer said "not ready yet" (NotReady): not a failure


class RetryStats:
    """Thread-safe counters per operation name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, OperationCounts] = {}

    def record(
        self,
        operation: str,
        *,
        retries: int = 0,
        failures: int = 0,
        successes: int = 0,
        not_ready: int = 0,
    ) -> None:
        with self._lock:
            counts = self._counts.setdefault(operation, OperationCounts())
            counts.retries += retries
            counts.failures += failures
            counts.successes += successes
            counts.not_ready += not_ready

    def snapshot(self) -> dict[str, OperationCounts]:
        with self._lock:
            return {
                name: OperationCounts(c.retries, c.failures, c.successes, c.not_ready)
                for name, c in sorted(self._counts.items())
            }

    def summary(self) -> str:
        """One line for a CLI's closing summary. Answers that said "not ready" (a broker being
        restarted says so through its agent) are counted apart from failures, and shown only
        when there were some."""
        parts = []
        for name, c in self.snapshot().items():
            waiting = f", {c.not_ready} answered not ready" if c.not_ready else ""
            parts.append(
                f"{name}: {c.successes} ok{waiting}, {c.retries} retries, {c.failures} failed"
            )
        return "; ".join(parts) or "no network operations"

    def to_json(self) -> dict[str, dict[str, int]]:
        """The counts by operation, for JSON output (camelCase, as every JSON rollguard writes)."""
        return {
            name: {
                "ok": c.successes,
                "notReady": c.not_ready,
                "retries": c.retries,
                "failed": c.failures,
            }
            for name, c in self.snapshot().items()
        }


def _is_retriable(retriable: Retriable, error: BaseException) -> bool:
    if isinstance(retriable, tuple):
        return isinstance(error, retriable)
    return retriable(error)


@dataclass(frozen=True, slots=True)
class _Attempts:
    """The pure part of a retry loop: what to do after attempt `retry` failed with `error`."""

    policy: RetryPolicy
    operation: str
    retriable: Retriable
    stats: RetryStats | None
    uniform: Callable[[], float]
    clock: Callable[[], float]
    deadline: float | None
    target: str = ""
    describe: Callable[[BaseException], str] = describe_error
    on_retry: Callable[[Retrying], object] = _quiet

    def delay_after(self, retry: int, error: Exception) -> float | None:
        """Seconds to wait before the next attempt, or None to give up: counted as a failure,
        or as `not_ready` when the last word was an answer saying so (`NotReady`)."""
        answered = isinstance(error, NotReady)
        subject = _subject(self.operation, self.target)
        if not _is_retriable(self.retriable, error) or retry >= self.policy.max_retries:
            if retry >= self.policy.max_retries and retry and not answered:
                logger.warning(
                    "%s: failed after %d attempts: %s", subject, retry + 1, self.describe(error)
                )
            self._give_up(answered)
            return None
        delay = backoff_ms(self.policy, retry, self.uniform()) / 1000
        if isinstance(error, NotReady) and error.retry_after is not None:  # honoured, capped
            delay = min(max(error.retry_after, 0.0), self.policy.max_backoff_ms / 1000)
        if self.deadline is not None and self.clock() + delay >= self.deadline:
            if not answered:
                logger.warning(
                    "%s: failed, and no time is left to retry: %s", subject, self.describe(error)
                )
            self._give_up(answered)
            return None
        self._record(retries=1)
        reason = self.describe(error)
        self.on_retry(
            Retrying(
                self.operation, self.target, retry + 2, self.policy.attempts, delay, reason, error
            )
        )
        return delay

    def _give_up(self, answered: bool) -> None:
        self._record(**({"not_ready": 1} if answered else {"failures": 1}))

    def _record(self, **counts: int) -> None:
        if self.stats is not None:
            self.stats.record(self.operation, **counts)

    def succeeded(self) -> None:
        self._record(successes=1)


async def retry_async(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    operation: str,
    retriable: Retriable,
    stats: RetryStats | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    uniform: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
    target: str = "",
    describe: Callable[[BaseException], str] = describe_error,
    on_retry: Callable[[Retrying], object] | None = None,
) -> T:
    """Await `attempt()` until it succeeds, retrying errors that `retriable` accepts.

    Attempts run one after the other, never overlapping. Waits use `sleep` and never block the
    event loop; cancellation (during an attempt or a wait) propagates at once and counts nothing.
    After the last attempt, or on an error that is not retriable, the last error is raised as is.
    `deadline` (on `clock`) stops retrying when the next wait would pass it.

    `on_retry` is told of each retry before its wait (`announce`: a warning a retry; default: a
    debug line); `target` (what the operation is against) and `describe` (an error's words) go
    into those lines and into the warning after the last attempt.
    """
    attempts = _Attempts(
        policy,
        operation,
        retriable,
        stats,
        uniform,
        clock,
        deadline,
        target,
        describe,
        on_retry or _quiet,
    )
    retry = 0
    while True:
        try:
            result = await attempt()
        except Exception as error:
            delay = attempts.delay_after(retry, error)
            if delay is None:
                raise
            await sleep(delay)
            retry += 1
            continue
        attempts.succeeded()
        return result


def retry_sync(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    operation: str,
    retriable: Retriable,
    stats: RetryStats | None = None,
    sleep: Callable[[float], object] = time.sleep,
    uniform: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
    target: str = "",
    describe: Callable[[BaseException], str] = describe_error,
    on_retry: Callable[[Retrying], object] | None = None,
) -> T:
    """The blocking twin of `retry_async`, for code that is not asynchronous."""
    attempts = _Attempts(
        policy,
        operation,
        retriable,
        stats,
        uniform,
        clock,
        deadline,
        target,
        describe,
        on_retry or _quiet,
    )
    retry = 0
    while True:
        try:
            result = attempt()
        except Exception as error:
            delay = attempts.delay_after(retry, error)
            if delay is None:
                raise
            sleep(delay)
            retry += 1
            continue
        attempts.succeeded()
        return result
