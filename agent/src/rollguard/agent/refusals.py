"""Refused TLS handshakes: counted by reason, logged at most once per reason per interval.

A client with a wrong certificate retries, and a scanner or a flood refuses thousands of
handshakes a minute: one line each would bury the log (and cost the agent more than the
handshake). Each reason gets one line per `interval`, naming the peer and the cause of the
latest refusal and how many others of that reason went unlogged since the previous line. The
counter (`rollguard_tls_handshake_failures_total{reason}`) sees every one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

logger = logging.getLogger(__name__)

LOG_INTERVAL = 10.0  # seconds between two lines of one reason


@dataclass(slots=True)
class _Reason:
    logged_at: float
    suppressed: int = 0


class Refusals:
    def __init__(
        self,
        count: Callable[[str], None],
        *,
        loud: Collection[str] = (),
        interval: float = LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._count = count
        self._loud = frozenset(loud)
        self.interval = interval
        self._clock = clock
        self._reasons: dict[str, _Reason] = {}

    def record(self, reason: str, peer: str, detail: str) -> None:
        """One refused handshake from `peer`: counted, and logged unless this reason was logged
        less than `interval` ago."""
        self._count(reason)
        now = self._clock()
        seen = self._reasons.get(reason)
        if seen is not None and now - seen.logged_at < self.interval:
            seen.suppressed += 1
            return
        suppressed = seen.suppressed if seen is not None else 0
        self._reasons[reason] = _Reason(now)
        level = logging.WARNING if reason in self._loud else logging.INFO
        if suppressed:
            logger.log(
                level,
                "refused a TLS handshake from %s: %s (%s); %d more refused for this reason "
                "since the previous line",
                peer,
                reason,
                detail,
                suppressed,
            )
        else:
            logger.log(level, "refused a TLS handshake from %s: %s (%s)", peer, reason, detail)
