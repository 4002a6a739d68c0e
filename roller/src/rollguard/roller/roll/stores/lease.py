"""One roll per cluster: a lease taken before the first action and renewed while rolling.

Two rollers on one cluster once made 6 restarts of 3 nodes, some twice within a second, and
`--resume` of a roll that was still running did the same. A lease prevents both: whoever holds
it may act; it names its holder (host:pid), the roll and since when; and it lapses when the
holder stops renewing it (killed, partitioned), so a roll can be taken over without a person
deleting anything. Holders are processes, not rolls: a resume by another process is refused
while the running roller still renews the lease, even with the same roll id.

- `FileLease` (`lease_file.py`): a JSON file in the state directory, changed only under
  `flock` of a sibling lock file (inventories: the rollers share a state directory).
- `KubernetesLease` (`lease_kubernetes.py`): a `coordination.k8s.io/v1` Lease, written with its
  resourceVersion so that of two rollers racing for it exactly one wins (the other gets 409).

Expiry compares the holder's last renewal with this process's clock, as Kubernetes' own Lease
users do: the rollers' clocks must agree to well within the lease duration.

    RollguardError
     +-- LeaseError      the lease cannot be read or written (API refused or unreachable)
          +-- LeaseHeld  another process holds a live lease: exit, naming it
          +-- LeaseLost  the lease we held was taken over or could not be renewed in time

The lease file of an unusable state directory is a ConfigError (exit 2, nothing started).

Keeping a lease has one rule (`keep_renewed`, which `renewing` and `holding` run beside the
work): a failed renewal (the API briefly unreachable) is retried at the next interval for as
long as the lease cannot have expired; when it could have (no renewal for its whole duration),
or when another holder took it, the lease is lost and the work is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn, Protocol

from rollguard.shared.errors import RetryLater, RollguardError

logger = logging.getLogger(__name__)

# A Kubernetes API server restarted takes seconds to serve again, more on a busy control plane:
# started, it accepts connections but finishes no TLS handshake until it serves, so a client
# waits out its connect timeout. 20 s stopped and its start took more than 30 s under load: a
# 60 s lease rides out an API that does not answer for up to ~48 s (renewed every 10 s, retried
# every 2 s). A roller that crashed on another host holds a new roll back for up to as long.
DEFAULT_DURATION = 60.0


class LeaseError(RollguardError):
    """Something about the lease; the message names it and the cause. An origin group (`except
    LeaseError`: any of them): what is raised is one of its members, each of its category."""


class LeaseUnavailable(LeaseError, RetryLater):
    """The lease could not be read or written just now (the API or the file system failed):
    its renewal is tried again for as long as the lease cannot have expired (`keep_renewed`)."""


class LeaseHeld(LeaseError):
    """Another process holds a live lease on the cluster."""

    def __init__(self, record: LeaseRecord, now: float, wanted_roll: str | None = None) -> None:
        self.holder = record.holder
        self.roll_id = record.roll_id
        self.since = datetime.fromtimestamp(record.acquired_at, UTC)
        self.expires_in = max(0.0, record.expires_at - now)
        message = (
            f"cluster is being rolled by {record.holder} (roll {record.roll_id}) since "
            f"{iso_seconds(record.acquired_at)}; its lease expires in {round(self.expires_in)}s"
        )
        if wanted_roll == record.roll_id:
            message += "; that roller is still running this roll: resume it once it has stopped"
        super().__init__(message)


class LeaseLost(LeaseError):
    """The lease we held is gone: another roller may act now, so this one must stop."""


def default_holder() -> str:
    """`host:pid`: one process. A restarted roller is a new holder, on purpose."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What a lease says, whichever store it lives in; times are POSIX seconds."""

    holder: str  # "" once released
    roll_id: str
    acquired_at: float
    renewed_at: float
    duration: float
    paused: str = ""  # who paused the roll and when (`rollguard roll pause`); "" running

    @property
    def expires_at(self) -> float:
        return self.renewed_at + self.duration

    def live(self, now: float) -> bool:
        return bool(self.holder) and self.expires_at > now

    def describe(self) -> str:
        return f"{self.holder} (roll {self.roll_id})"


class Lease(Protocol):
    """What the roll needs from a lease; `holding()` drives it."""

    @property
    def holder(self) -> str: ...

    @property
    def duration(self) -> float: ...

    @property
    def paused(self) -> str:
        """Whether the roll is paused, as the lease said when last acquired or renewed: who
        paused it and when, or ""."""
        ...

    async def read_paused(self) -> str:
        """Whether the roll is paused now, read from the lease (LeaseUnavailable if it cannot
        be)."""
        ...

    def describe(self) -> str:
        """Where the lease lives, for messages: `lease file /var/lib/rollguard/lease.json`."""
        ...

    async def acquire(self) -> None:
        """Take the lease, or raise LeaseHeld naming the live holder."""
        ...

    async def renew(self) -> None:
        """Extend it; LeaseLost if someone else holds it now, LeaseUnavailable if it cannot
        tell."""
        ...

    async def release(self) -> None:
        """Give it up if still ours, so the next roll need not wait for it to expire."""
        ...


def iso_seconds(moment: float) -> str:
    """ISO 8601 UTC to the second, for people: 2026-11-23T11:00:02Z."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_duration(duration: float) -> float:
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"a lease duration must be a positive number of seconds, not {duration}")
    return duration


def holder_gone(holder: str) -> bool:
    """The holder is a process of this host that no longer runs (killed -9, crashed): its lease
    needs no waiting out. Another host's holder cannot be checked: only expiry frees it."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isascii() or not pid.isdigit():
        return False
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[:1] in (["Z"], ["X"])  # a zombie is gone too


class NotRunning(LeaseError):
    """`rollguard roll pause|resume`: the roll named is not the one holding the lease now."""


def running_roll(where: str, record: LeaseRecord | None, roll_id: str, now: float) -> None:
    """NotRunning unless `record` is a live lease of roll `roll_id`."""
    if record is None or not record.live(now):
        raise NotRunning(f"roll {roll_id} is not running: {where} is free")
    if record.roll_id != roll_id:
        raise NotRunning(f"roll {roll_id} is not running: {where} is held by {record.describe()}")


def took_over(where: str, old: LeaseRecord, now: float) -> None:
    logger.warning(
        "%s: took over the lease of %s, which stopped renewing it %.0fs ago (%s %s)",
        where,
        old.describe(),
        now - old.renewed_at,
        "its process is gone; it would have expired" if old.live(now) else "expired",
        iso_seconds(old.expires_at),
    )


# --- keeping a lease -----------------------------------------------------------------------------


RETRY_AFTER_FAILURE = 2.0  # seconds, as client-go's leader election retries (its retryPeriod)


async def keep_renewed(
    lease: Lease,
    interval: float,
    *,
    retry: float = RETRY_AFTER_FAILURE,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> NoReturn:
    """Renew `lease` every `interval` seconds until cancelled: the one rule for keeping a lease.

    A failed renewal (the API refusing or unreachable for a while) is logged and tried again
    every `retry` seconds (at most `interval`) for as long as the lease cannot expire before
    the next try. LeaseLost when it was taken over, or when the next try would come too late:
    no renewal for the lease's duration means another roller may hold it by then.
    """
    if not (math.isfinite(interval) and 0 < interval < lease.duration):
        raise ValueError(f"renew interval {interval} must be positive and below the duration")
    retry = min(retry, interval)
    renewed = clock()
    wait = interval
    while True:
        await sleep(wait)
        try:
            await lease.renew()
        except LeaseLost as exc:
            logger.error("%s", exc)
            raise
        except RollguardError as exc:
            silent = clock() - renewed
            if silent + retry >= lease.duration:
                lost = LeaseLost(
                    f"{lease.describe()}: not renewed for {silent:.0f}s ({exc}); it expires "
                    f"{lease.duration:g}s after the last renewal, so another roller may hold it"
                )
                logger.error("%s", lost)
                raise lost from None
            logger.warning("%s; retrying in %gs", exc, retry)
            wait = retry
            continue
        renewed = clock()
        wait = interval


@asynccontextmanager
async def renewing(
    lease: Lease,
    interval: float,
    *,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[None]:
    """Renew `lease` (held already) every `interval` seconds while the block runs, by the rule
    of `keep_renewed`. When the lease is lost, the block is cancelled at once (as
    `asyncio.timeout` cancels it) and LeaseLost is raised in its place: whoever runs the block
    records why it stopped, and nothing more is done under a lease that may be another's."""
    host = asyncio.current_task()
    if host is None:
        raise RuntimeError("renewing() needs a running task")
    lost: list[BaseException] = []

    def stop(task: asyncio.Task[NoReturn]) -> None:
        if not task.cancelled() and task.exception() is not None:
            lost.append(task.exception())  # type: ignore[arg-type]
            host.cancel()

    task = asyncio.create_task(
        keep_renewed(lease, interval, sleep=sleep, clock=clock), name="lease-renewal"
    )
    task.add_done_callback(stop)
    try:
        yield
    except asyncio.CancelledError:
        if lost and host.uncancel() == 0:
            raise lost[0] from None
        raise
    finally:
        task.remove_done_callback(stop)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@asynccontextmanager
async def holding(
    lease: Lease,
    *,
    interval: float | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[None]:
    """Acquire `lease`, keep it `renewing` (every `interval`, default a sixth of its duration)
    while the block runs, and release it after, even on failure. LeaseHeld from the acquire
    propagates; a lost lease cancels the block and raises LeaseLost."""
    await lease.acquire()
    every = interval if interval is not None else lease.duration / 6
    try:
        async with renewing(lease, every, sleep=sleep, clock=clock):
            yield
    finally:
        try:
            await lease.release()
        except RollguardError as exc:
            logger.warning("%s; it will expire by itself", exc)


async def release(lease: Lease | None, *, failed: bool) -> None:
    """Release `lease` at the end of a roll. After a failure, a lease that cannot be released
    (the API unreachable) is said, not raised: the roll's own error is the one to report, and
    the lease expires by itself."""
    if lease is None:
        return
    try:
        await lease.release()
    except RollguardError as exc:
        if not failed:
            raise
        logger.warning("%s; it expires by itself", exc)
