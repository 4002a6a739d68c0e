"""The journal store and the lease as the roll uses them, each telling the roll's metrics
(`metrics.RollMetrics`) what it does: the records saved, the lease taken, renewed, given up.
Both wrappers do what the object they wrap does, no more.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rollguard.roller.roll.stores.journal import JournalStore, RollRecord
from rollguard.roller.roll.stores.lease import Lease, LeaseLost


class WatchedJournal:
    """The roll's journal store, telling `saved` each record it has written."""

    def __init__(self, store: JournalStore, saved: Callable[[RollRecord], None]) -> None:
        self.store = store
        self._saved = saved

    def load(self, roll_id: str) -> RollRecord | None:
        return self.store.load(roll_id)

    def save(self, record: RollRecord) -> None:
        self.store.save(record)
        self._saved(record)

    def where(self, roll_id: str) -> str:
        return self.store.where(roll_id)

    def rolls(self) -> list[str] | None:
        return self.store.rolls()


class WatchedLease:
    """The roll's lease, and whether it is held: taken, and renewed within its duration since
    (a renewal that failed is tried again until then: `lease.keep_renewed`), not lost nor
    given up."""

    def __init__(self, lease: Lease, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.lease = lease
        self._clock = clock
        self._renewed: float | None = None

    @property
    def held(self) -> bool:
        renewed = self._renewed
        return renewed is not None and self._clock() - renewed < self.lease.duration

    @property
    def holder(self) -> str:
        return self.lease.holder

    @property
    def duration(self) -> float:
        return self.lease.duration

    @property
    def paused(self) -> str:
        return self.lease.paused

    async def read_paused(self) -> str:
        return await self.lease.read_paused()

    def describe(self) -> str:
        return self.lease.describe()

    async def acquire(self) -> None:
        await self.lease.acquire()
        self._renewed = self._clock()

    async def renew(self) -> None:
        try:
            await self.lease.renew()
        except LeaseLost:
            self._renewed = None
            raise
        self._renewed = self._clock()

    async def release(self) -> None:
        try:
            await self.lease.release()
        finally:
            self._renewed = None
