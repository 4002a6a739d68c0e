"""The consumer-lag gate (`--gate-consumer-lag GROUP=MAX`, repeatable).

Closed while a consumer group lags by more than MAX messages (summed over its partitions):
restarting a broker makes its consumers rebalance or fail over, and a group already behind
falls further behind. Its deficit is the lag above MAX, so a group catching up is progress
within --safety-wait. A lag that cannot be read (the Admin API not answering, a group with no
committed offsets: unknown, or a misspelt id) closes it too, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rollguard.roller.roll.gates.keeper import Closed, GateKind
from rollguard.shared.errors import RollguardError

MAX_LAG = 10**15


@dataclass(frozen=True, slots=True)
class LagLimit:
    group: str
    max_lag: int

    def __str__(self) -> str:
        return f"{self.group}={self.max_lag}"


def lag_limit(text: str) -> LagLimit:
    """`GROUP=MAX`: a consumer group id and the most lag (messages, summed over its
    partitions) a restart may start with."""
    group, equals, limit = text.rpartition("=")
    group = group.strip()
    if not equals or not group:
        raise ValueError(f"{text!r}: give GROUP=MAX (a consumer group and its largest lag)")
    limit = limit.strip()
    if not (limit.isascii() and limit.isdigit()) or int(limit) > MAX_LAG:
        raise ValueError(f"{text!r}: MAX is a whole number of messages, 0 to {MAX_LAG}")
    return LagLimit(group, int(limit))


class LagReader(Protocol):
    """A consumer group's total lag now: committed offsets against end offsets, summed over
    its partitions (KafkaObserver.consumer_lag). A RollguardError when it cannot be told."""

    async def __call__(self, group: str) -> int: ...


class ConsumerLagGate:
    """Closed while `limit.group` lags by more than `limit.max_lag` messages."""

    kind = GateKind.CONSUMER_LAG

    def __init__(self, limit: LagLimit, lag: LagReader) -> None:
        self.limit, self.lag, self.name = limit, lag, limit.group

    async def check(self) -> Closed | None:
        group, most = self.limit.group, self.limit.max_lag
        try:
            lag = await self.lag(group)
        except RollguardError as exc:  # the reader's translated errors: unknown is closed
            reason = f"the lag of consumer group {group} cannot be read: {exc}"
            return Closed(self.kind, self.name, reason)
        if lag <= most:
            return None
        reason = f"consumer group {group} lags {lag:,} messages (more than {most:,})"
        return Closed(self.kind, self.name, reason, deficit=lag - most)
