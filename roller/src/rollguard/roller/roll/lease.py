"""One roll per cluster: a lease taken before the first action and renewed while rolling.

Two rollers on one cluster once made 6 restarts of 3 nodes, some twice within a second, and
`--resume` of a roll that was still running did the same. A lease prevents both: whoever holds
it may act; it names its holder (host:pid), the roll and since when; and it lapses when the
holder stops renewing it (killed, partitioned), so a roll can be taken over without a person
deleting anything. Holders are processes, not rolls: a resume by another process is refused
while the running roller still renews the lease, even with the same roll id.

- `FileLease`: a JSON file in the state directory, changed only under `flock` of a sibling lock
  file (inventories: the rollers share a state directory).
- `KubernetesLease`: a `coordination.k8s.io/v1` Lease, written with its resourceVersion so that
  of two rollers racing for it exactly one wins (the other gets 409 Conflict).

Expiry compares the holder's last renewal with this process's clock, as Kubernetes' own Lease
users do: the rollers' clocks must agree to well within the lease duration.

    RollguardError
     +-- LeaseError      the lease cannot be read or written (API refused or unreachable)
          +-- LeaseHeld  another process holds a live lease: exit, naming it
          +-- LeaseLost  the lease we held was taken over or could not be renewed in time

The lease file of an unusable state directory is a ConfigError (exit 2, nothing started).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import httpx

from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.files import atomic_write
from rollguard.shared.wire import format_time, parse_time

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from lightkube.resources.coordination_v1 import Lease as KubeLease

logger = logging.getLogger(__name__)

VERSION = 1
LEASE_FILE = "lease.json"  # in the state directory
KUBERNETES_LEASE = "rollguard-roll"  # one roll at a time per namespace
ROLL_ID_ANNOTATION = "rollguard.io/roll-id"
DEFAULT_DURATION = 30.0
CONFLICT_RETRIES = 3
NOT_FOUND, CONFLICT = 404, 409


class LeaseError(RollguardError):
    """The lease could not be read or written; the message names it and the cause."""


class LeaseHeld(LeaseError):
    """Another process holds a live lease on the cluster."""

    def __init__(self, record: LeaseRecord, now: float, wanted_roll: str | None = None) -> None:
        self.holder = record.holder
        self.roll_id = record.roll_id
        self.since = datetime.fromtimestamp(record.acquired_at, UTC)
        self.expires_in = max(0.0, record.expires_at - now)
        message = (
            f"cluster is being rolled by {record.holder} (roll {record.roll_id}) since "
            f"{_seconds(record.acquired_at)}; its lease expires in {round(self.expires_in)}s"
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

    def describe(self) -> str:
        """Where the lease lives, for messages: `lease file /var/lib/rollguard/lease.json`."""
        ...

    async def acquire(self) -> None:
        """Take the lease, or raise LeaseHeld naming the live holder."""
        ...

    async def renew(self) -> None:
        """Extend it; LeaseLost if someone else holds it now, LeaseError if it cannot tell."""
        ...

    async def release(self) -> None:
        """Give it up if still ours, so the next roll need not wait for it to expire."""
        ...


def _seconds(moment: float) -> str:
    """ISO 8601 UTC to the second, for people: 2026-11-23T11:00:02Z."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_duration(duration: float) -> float:
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


def _took_over(where: str, old: LeaseRecord, now: float) -> None:
    logger.warning(
        "%s: took over the lease of %s, which stopped renewing it %.0fs ago (%s %s)",
        where,
        old.describe(),
        now - old.renewed_at,
        "its process is gone; it would have expired" if old.live(now) else "expired",
        _seconds(old.expires_at),
    )


# --- a lease file ------------------------------------------------------------------------------


class FileLease:
    """`path` (e.g. `<state-dir>/lease.json`), changed only under an exclusive `flock` of
    `path` + `.lock`. The lock is held for a read and a write, never while rolling: the lease
    file, not the lock, is what says who rolls, so a holder that hangs still loses its lease."""

    def __init__(
        self,
        path: Path,
        *,
        holder: str,
        roll_id: str,
        duration: float = DEFAULT_DURATION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.holder = holder
        self.roll_id = roll_id
        self.duration = _check_duration(duration)
        self._clock = clock
        self._lock_path = path.with_name(path.name + ".lock")

    def describe(self) -> str:
        return f"lease file {self.path}"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # The lock file is never deleted: a process waiting on a deleted file's lock would
        # hold a lock nobody else sees.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> LeaseRecord | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise self._malformed(str(exc)) from None
        version = data.get("version") if isinstance(data, dict) else None
        if version != VERSION:
            raise self._malformed(f"version {version!r} is not {VERSION}")
        try:
            holder, roll_id = str(data["holder"]), str(data["rollId"])
            acquired_at = parse_time(data["acquiredAt"]).timestamp()
            renewed_at = parse_time(data["renewedAt"]).timestamp()
            duration = float(data["durationSeconds"])
            if not math.isfinite(duration):
                duration = 0.0  # an impossible duration: treat the lease as expired
            return LeaseRecord(holder, roll_id, acquired_at, renewed_at, duration)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._malformed(f"{type(exc).__name__}: {exc}") from None

    def _malformed(self, why: str) -> ConfigError:
        return ConfigError(
            f"{self.describe()} is not a rollguard lease ({why}); if no roll is running, remove it"
        )

    def _write(self, acquired_at: float, now: float) -> None:
        record = {
            "version": VERSION,
            "holder": self.holder,
            "rollId": self.roll_id,
            "acquiredAt": format_time(datetime.fromtimestamp(acquired_at, UTC)),
            "renewedAt": format_time(datetime.fromtimestamp(now, UTC)),
            "durationSeconds": self.duration,
            "expires": format_time(datetime.fromtimestamp(now + self.duration, UTC)),
        }
        atomic_write(self.path, (json.dumps(record, indent=2) + "\n").encode(), mode=0o644)

    async def acquire(self) -> None:
        try:
            with self._locked():
                now = self._clock()
                current = self._read()
                acquired = now
                if current is not None and current.holder != self.holder:
                    if current.live(now) and not holder_gone(current.holder):
                        raise LeaseHeld(current, now, self.roll_id)
                    if current.holder:
                        _took_over(self.describe(), current, now)
                elif current is not None and current.roll_id == self.roll_id:
                    acquired = current.acquired_at  # taken again by its holder: keep "since"
                self._write(acquired, now)
        except OSError as exc:
            raise ConfigError(
                f"{self.describe()}: cannot be written ({exc.strerror or exc}); check --state-dir"
            ) from None
        logger.info("%s: taken by %s for roll %s", self.describe(), self.holder, self.roll_id)

    async def renew(self) -> None:
        try:
            with self._locked():
                now = self._clock()
                current = self._read()
                if current is None:
                    raise LeaseLost(f"{self.describe()} was removed while roll {self.roll_id} ran")
                if current.holder != self.holder or current.roll_id != self.roll_id:
                    raise LeaseLost(f"{self.describe()} is now held by {current.describe()}")
                if not current.live(now):
                    # Nobody took it over in the meantime (the lock makes this check exact).
                    logger.warning(
                        "%s: renewed %.0fs late", self.describe(), now - current.expires_at
                    )
                self._write(current.acquired_at, now)
        except (OSError, ConfigError) as exc:
            raise LeaseError(f"{self.describe()}: cannot be renewed ({_os_reason(exc)})") from None

    async def release(self) -> None:
        try:
            with self._locked():
                current = self._read()
                if current is None or current.holder != self.holder:
                    logger.info("%s: not ours any more, left as it is", self.describe())
                    return
                self.path.unlink()
        except (OSError, ConfigError) as exc:
            raise LeaseError(f"{self.describe()}: cannot be released ({_os_reason(exc)})") from None
        logger.info("%s: released by %s", self.describe(), self.holder)


def _os_reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


# --- a Kubernetes Lease ------------------------------------------------------------------------


class KubernetesLease:
    """A `coordination.k8s.io/v1` Lease `namespace/name`, as Kubernetes' own leader election
    keeps it: holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions;
    the roll id in the annotation `rollguard.io/roll-id`. Released by clearing the holder (the
    roller's Role may get, create and update leases, not delete them). lightkube is imported
    on first use, as the CLI does, so that inventory rolls do not load it."""

    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        name: str,
        *,
        holder: str,
        roll_id: str,
        duration: float = DEFAULT_DURATION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.holder = holder
        self.roll_id = roll_id
        # leaseDurationSeconds is a whole number; round up rather than promise less.
        self.duration = float(math.ceil(_check_duration(duration)))
        self._clock = clock

    def describe(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def _record(self, lease: KubeLease) -> LeaseRecord:
        spec = lease.spec
        annotations = (lease.metadata.annotations if lease.metadata else None) or {}
        renewed = spec.renewTime.timestamp() if spec and spec.renewTime else 0.0
        acquired = spec.acquireTime.timestamp() if spec and spec.acquireTime else renewed
        return LeaseRecord(
            holder=(spec.holderIdentity if spec else None) or "",
            roll_id=annotations.get(ROLL_ID_ANNOTATION, "unknown"),
            acquired_at=acquired,
            renewed_at=renewed,
            duration=float((spec.leaseDurationSeconds if spec else None) or 0),
        )

    async def _call(self, what: str, call: Awaitable[Any]) -> Any:
        """The one place where lightkube's and httpx's errors become LeaseErrors. 404 and 409
        come back as `NOT_FOUND` and `CONFLICT`, for the caller to decide."""
        # lightkube 1.x talks through httpx2, not httpx: its transport errors are httpx2's.
        import httpx2
        from lightkube import ApiError

        try:
            return await call
        except ApiError as exc:
            if exc.status.code in (NOT_FOUND, CONFLICT):
                return exc.status.code
            raise LeaseError(
                f"{self.describe()}: cannot {what}: {exc.status.code} {exc.status.reason}: "
                f"{exc.status.message}"
            ) from None
        except (httpx2.HTTPError, httpx.HTTPError) as exc:
            raise LeaseError(
                f"{self.describe()}: cannot {what}: the Kubernetes API did not answer "
                f"({type(exc).__name__}: {exc})"
            ) from None

    async def _get(self) -> KubeLease | None:
        from lightkube.resources.coordination_v1 import Lease as KubeLease

        found = await self._call(
            "read it", self.client.get(KubeLease, self.name, namespace=self.namespace)
        )
        return None if found == NOT_FOUND else found

    def _stamp(self, lease: KubeLease, *, holder: str, acquired: float | None, now: float) -> None:
        """Write `holder` into the lease as client-go's leader election does; `acquired` None
        keeps the acquire time. A new holder counts as a transition, a release does not."""
        from lightkube.models.coordination_v1 import LeaseSpec
        from lightkube.models.meta_v1 import ObjectMeta

        spec = lease.spec or LeaseSpec()
        meta = lease.metadata or ObjectMeta(name=self.name, namespace=self.namespace)
        transitions = spec.leaseTransitions or 0
        if holder and holder != (spec.holderIdentity or "") and meta.resourceVersion:
            transitions += 1
        spec.holderIdentity = holder
        spec.leaseDurationSeconds = int(self.duration) if holder else 1
        spec.leaseTransitions = transitions
        spec.renewTime = _micro_time(now)
        if acquired is not None:
            spec.acquireTime = _micro_time(acquired)
        annotations = dict(meta.annotations or {})
        if holder:
            annotations[ROLL_ID_ANNOTATION] = self.roll_id
        else:
            annotations.pop(ROLL_ID_ANNOTATION, None)
        meta.annotations = annotations or None
        lease.spec, lease.metadata = spec, meta

    async def acquire(self) -> None:
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.coordination_v1 import Lease as KubeLease

        for _ in range(CONFLICT_RETRIES):
            now = self._clock()
            current = await self._get()
            expired: LeaseRecord | None = None
            if current is None:
                labels = {"app.kubernetes.io/managed-by": "rollguard"}
                fresh = KubeLease(
                    metadata=ObjectMeta(name=self.name, namespace=self.namespace, labels=labels)
                )
                self._stamp(fresh, holder=self.holder, acquired=now, now=now)
                answer = await self._call("create it", self.client.create(fresh))
                if answer == NOT_FOUND:
                    raise LeaseError(f"{self.describe()}: namespace {self.namespace} not found")
            else:
                record = self._record(current)
                if record.holder != self.holder:
                    if record.live(now):
                        raise LeaseHeld(record, now, self.roll_id)
                    expired = record if record.holder else None
                same = record.holder == self.holder and record.roll_id == self.roll_id
                self._stamp(current, holder=self.holder, acquired=None if same else now, now=now)
                answer = await self._call("update it", self.client.replace(current))
            if answer not in (NOT_FOUND, CONFLICT):
                if expired is not None:  # logged once won, not by every candidate
                    _took_over(self.describe(), expired, now)
                logger.info(
                    "%s: taken by %s for roll %s", self.describe(), self.holder, self.roll_id
                )
                return
            # Another roller created or wrote it since we read it (or it was deleted): the
            # next read says who holds it now.
        raise LeaseError(f"{self.describe()}: kept changing under us; try again")

    async def renew(self) -> None:
        for _ in range(CONFLICT_RETRIES):
            current = await self._get()
            if current is None:
                raise LeaseLost(f"{self.describe()} was deleted while roll {self.roll_id} ran")
            record = self._record(current)
            if record.holder != self.holder or record.roll_id != self.roll_id:
                raise LeaseLost(f"{self.describe()} is now held by {record.describe()}")
            self._stamp(current, holder=self.holder, acquired=None, now=self._clock())
            if await self._call("renew it", self.client.replace(current)) not in (
                NOT_FOUND,
                CONFLICT,
            ):
                return
        raise LeaseError(f"{self.describe()}: kept changing under us while renewing it")

    async def release(self) -> None:
        for _ in range(CONFLICT_RETRIES):
            current = await self._get()
            if current is None or self._record(current).holder != self.holder:
                logger.info("%s: not ours any more, left as it is", self.describe())
                return
            # As client-go releases: no holder, a 1 s duration, times set to now.
            now = self._clock()
            self._stamp(current, holder="", acquired=now, now=now)
            if await self._call("release it", self.client.replace(current)) not in (
                NOT_FOUND,
                CONFLICT,
            ):
                logger.info("%s: released by %s", self.describe(), self.holder)
                return
        raise LeaseError(f"{self.describe()}: kept changing under us while releasing it")


def _micro_time(moment: float) -> datetime:
    """A datetime for a MicroTime field. The API server parses MicroTime with exactly six
    fractional digits, and lightkube (msgspec) writes none when the microsecond is 0: so that
    microsecond is made 1."""
    value = datetime.fromtimestamp(moment, UTC)
    return value if value.microsecond else value.replace(microsecond=1)


# --- keeping a lease -----------------------------------------------------------------------------


async def keep_renewed(
    lease: Lease,
    interval: float,
    *,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> NoReturn:
    """Renew `lease` every `interval` seconds until cancelled.

    A failed renewal (API briefly unreachable) is logged and retried at the next interval, as
    long as the lease cannot have expired yet; LeaseLost when it was taken over, or when no
    renewal succeeded for the lease's whole duration (another roller may hold it by now).
    """
    if not (math.isfinite(interval) and 0 < interval < lease.duration):
        raise ValueError(f"renew interval {interval} must be positive and below the duration")
    renewed = clock()
    while True:
        await sleep(interval)
        try:
            await lease.renew()
        except LeaseLost as exc:
            logger.error("%s", exc)
            raise
        except RollguardError as exc:
            silent = clock() - renewed
            if silent >= lease.duration:
                lost = LeaseLost(
                    f"{lease.describe()}: not renewed for {silent:.0f}s ({exc}); it has expired "
                    "and another roller may hold it"
                )
                logger.error("%s", lost)
                raise lost from None
            logger.warning("%s; retrying in %gs", exc, interval)
            continue
        renewed = clock()


class LeaseGuard:
    """Handed out by `holding()`: `check()` before each action raises what ended the renewals."""

    def __init__(self, lease: Lease, task: asyncio.Task[NoReturn]) -> None:
        self.lease = lease
        self._task = task

    def check(self) -> None:
        if self._task.done() and not self._task.cancelled():
            error = self._task.exception()
            if error is not None:
                raise error


@asynccontextmanager
async def holding(
    lease: Lease,
    *,
    interval: float | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[LeaseGuard]:
    """Acquire `lease`, renew it every `interval` (default a third of its duration) while the
    block runs, and release it after, even on failure. LeaseHeld from the acquire propagates."""
    await lease.acquire()
    every = interval if interval is not None else lease.duration / 3
    task = asyncio.create_task(keep_renewed(lease, every, sleep=sleep), name="lease-renewal")
    try:
        yield LeaseGuard(lease, task)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, RollguardError):
            await task
        try:
            await lease.release()
        except RollguardError as exc:
            logger.warning("%s; it will expire by itself", exc)
