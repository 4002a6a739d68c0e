"""A Kubernetes Lease, for rolls on Kubernetes (see `lease.py` for the rule)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from rollguard.roller.roll.stores.lease import (
    DEFAULT_DURATION,
    LeaseHeld,
    LeaseLost,
    LeaseRecord,
    LeaseUnavailable,
    check_duration,
    running_roll,
    took_over,
)

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from lightkube.resources.coordination_v1 import Lease as KubeLease

logger = logging.getLogger(__name__)

KUBERNETES_LEASE = "rollguard-roll"  # one roll at a time per namespace
ROLL_ID_ANNOTATION = "rollguard.io/roll-id"
# Who paused the roll and when (`rollguard roll pause`, or `kubectl annotate`): while the Lease
# carries it, the roll starts no restart. Cleared by `rollguard roll resume` and at release.
PAUSED_ANNOTATION = "rollguard.io/paused"
CONFLICT_RETRIES = 3
NOT_FOUND, CONFLICT = 404, 409


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
        self.duration = float(math.ceil(check_duration(duration)))
        self._clock = clock
        self.paused = ""  # as last read

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
            paused=annotations.get(PAUSED_ANNOTATION, ""),
        )

    async def _call(self, what: str, call: Awaitable[Any]) -> Any:
        """The one place where lightkube's and httpx's errors become LeaseUnavailable. 404 and 409
        come back as `NOT_FOUND` and `CONFLICT`, for the caller to decide."""
        # lightkube 1.x talks through httpx2, not httpx: its transport errors are httpx2's.
        import httpx2
        from lightkube import ApiError

        try:
            return await call
        except ApiError as exc:
            if exc.status.code in (NOT_FOUND, CONFLICT):
                return exc.status.code
            raise LeaseUnavailable(
                f"{self.describe()}: cannot {what}: {exc.status.code} {exc.status.reason}: "
                f"{exc.status.message}"
            ) from None
        except (httpx2.HTTPError, httpx.HTTPError) as exc:
            raise LeaseUnavailable(
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
            if annotations.get(ROLL_ID_ANNOTATION) != self.roll_id:
                annotations.pop(PAUSED_ANNOTATION, None)  # another roll's pause
            annotations[ROLL_ID_ANNOTATION] = self.roll_id
        else:
            annotations.pop(ROLL_ID_ANNOTATION, None)
            annotations.pop(PAUSED_ANNOTATION, None)
        self.paused = annotations.get(PAUSED_ANNOTATION, "")
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
                    raise LeaseUnavailable(
                        f"{self.describe()}: namespace {self.namespace} not found"
                    )
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
                    took_over(self.describe(), expired, now)
                logger.info(
                    "%s: taken by %s for roll %s", self.describe(), self.holder, self.roll_id
                )
                return
            # Another roller created or wrote it since we read it (or it was deleted): the
            # next read says who holds it now.
        raise LeaseUnavailable(f"{self.describe()}: kept changing under us; try again")

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
        raise LeaseUnavailable(f"{self.describe()}: kept changing under us while renewing it")

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
        raise LeaseUnavailable(f"{self.describe()}: kept changing under us while releasing it")

    async def read_paused(self) -> str:
        current = await self._get()
        self.paused = self._record(current).paused if current is not None else ""
        return self.paused

    async def set_paused(self, note: str) -> LeaseRecord:
        """Pause (`note`: who and when) or let go on ("") the roll holding this Lease, as
        `rollguard roll pause|resume` does from another process; the record written."""
        for _ in range(CONFLICT_RETRIES):
            current = await self._get()
            record = None if current is None else self._record(current)
            running_roll(self.describe(), record, self.roll_id, self._clock())
            assert current is not None and current.metadata is not None
            annotations = dict(current.metadata.annotations or {})
            if note:
                annotations[PAUSED_ANNOTATION] = note
            else:
                annotations.pop(PAUSED_ANNOTATION, None)
            current.metadata.annotations = annotations
            if await self._call("update it", self.client.replace(current)) not in (
                NOT_FOUND,
                CONFLICT,
            ):
                return self._record(current)
        raise LeaseUnavailable(f"{self.describe()}: kept changing under us; try again")


def _micro_time(moment: float) -> datetime:
    """A datetime for a MicroTime field. The API server parses MicroTime with exactly six
    fractional digits, and lightkube (msgspec) writes none when the microsecond is 0: so that
    microsecond is made 1."""
    value = datetime.fromtimestamp(moment, UTC)
    return value if value.microsecond else value.replace(microsecond=1)
