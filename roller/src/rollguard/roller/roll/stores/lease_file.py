"""A lease file in the state directory, for inventories (see `lease.py` for the rule)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from rollguard.roller.roll.stores.lease import (
    DEFAULT_DURATION,
    LeaseHeld,
    LeaseLost,
    LeaseRecord,
    LeaseUnavailable,
    check_duration,
    holder_gone,
    running_roll,
    took_over,
)
from rollguard.shared.errors import ConfigError
from rollguard.shared.files import atomic_write
from rollguard.shared.wire import format_time, parse_time

logger = logging.getLogger(__name__)

VERSION = 1
LEASE_FILE = "lease.json"  # in the state directory


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
        self.duration = check_duration(duration)
        self._clock = clock
        self._lock_path = path.with_name(path.name + ".lock")
        self.paused = ""  # as last read

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
            paused = str(data.get("paused") or "")
            return LeaseRecord(holder, roll_id, acquired_at, renewed_at, duration, paused)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._malformed(f"{type(exc).__name__}: {exc}") from None

    def _malformed(self, why: str) -> ConfigError:
        return ConfigError(
            f"{self.describe()} is not a rollguard lease ({why}); if no roll is running, remove it"
        )

    def _write(self, acquired_at: float, now: float, paused: str = "") -> None:
        self._write_record(
            LeaseRecord(self.holder, self.roll_id, acquired_at, now, self.duration, paused)
        )
        self.paused = paused

    def _write_record(self, lease: LeaseRecord) -> None:
        record = {
            "version": VERSION,
            "holder": lease.holder,
            "rollId": lease.roll_id,
            "acquiredAt": format_time(datetime.fromtimestamp(lease.acquired_at, UTC)),
            "renewedAt": format_time(datetime.fromtimestamp(lease.renewed_at, UTC)),
            "durationSeconds": lease.duration,
            "expires": format_time(datetime.fromtimestamp(lease.expires_at, UTC)),
            **({"paused": lease.paused} if lease.paused else {}),
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
                        took_over(self.describe(), current, now)
                elif current is not None and current.roll_id == self.roll_id:
                    acquired = current.acquired_at  # taken again by its holder: keep "since"
                # A roll resumed while paused stays paused (`roll resume` lets it go on).
                same = current is not None and current.roll_id == self.roll_id
                self._write(acquired, now, current.paused if current and same else "")
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
                self._write(current.acquired_at, now, current.paused)
        except (OSError, ConfigError) as exc:
            raise LeaseUnavailable(
                f"{self.describe()}: cannot be renewed ({_os_reason(exc)})"
            ) from None

    async def release(self) -> None:
        try:
            with self._locked():
                current = self._read()
                if current is None or current.holder != self.holder:
                    logger.info("%s: not ours any more, left as it is", self.describe())
                    return
                self.path.unlink()
        except (OSError, ConfigError) as exc:
            raise LeaseUnavailable(
                f"{self.describe()}: cannot be released ({_os_reason(exc)})"
            ) from None
        logger.info("%s: released by %s", self.describe(), self.holder)

    async def read_paused(self) -> str:
        try:
            current = self._read()
        except (OSError, ConfigError) as exc:
            raise LeaseUnavailable(
                f"{self.describe()}: cannot be read ({_os_reason(exc)})"
            ) from None
        self.paused = current.paused if current is not None else ""
        return self.paused

    async def set_paused(self, note: str) -> LeaseRecord:
        """Pause (`note`: who and when) or let go on ("") the roll holding this lease, as
        `rollguard roll pause|resume` does from another process; the record written."""
        try:
            with self._locked():
                now = self._clock()
                current = self._read()
                running_roll(self.describe(), current, self.roll_id, now)
                assert current is not None
                changed = replace(current, paused=note)
                self._write_record(changed)
                return changed
        except OSError as exc:
            raise LeaseUnavailable(
                f"{self.describe()}: cannot be written ({_os_reason(exc)})"
            ) from None


def _os_reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
