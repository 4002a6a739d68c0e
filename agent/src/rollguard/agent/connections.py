"""How many connections one listening port holds, and which one goes when it is full.

Every connection the agent accepts takes a slot; a port never holds more than its limit, so its
memory and file descriptors are bounded whatever arrives. When a new connection finds the port
full, the oldest connection that has not yet proved itself makes room for it:

    HANDSHAKE   accepted, TLS handshake not finished (API port): anyone who can reach the port
    UNPROVEN    connected (and authenticated on the API port), no response sent yet
    PROVEN      has been answered at least once: a client that speaks HTTP

HANDSHAKE and UNPROVEN connections are one queue, by the time they were accepted: the one that
has gone longest without a request answered goes first, whatever it is waiting for. An honest
client needs a few milliseconds to get there; a silent TCP connection, a handshake that never
ends or a slowloris request head takes seconds, and is always older. A PROVEN connection is
never pushed out (the idle and header timeouts end it), so no flood can take the place of the
roller's keep-alive connection; only when every slot is PROVEN is a newcomer refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


def _nothing() -> None:
    """The `close` of a released slot."""


class Stage(IntEnum):
    HANDSHAKE = 0
    UNPROVEN = 1
    PROVEN = 2


@dataclass(eq=False, slots=True)
class Slot:
    """One connection's place; `close` ends the connection when it has to make room."""

    close: Callable[[], None]
    stage: Stage
    opened: float


class ConnectionLimiter:
    """The slots of one port. Single-threaded: used from the event loop only."""

    def __init__(
        self,
        limit: int,
        *,
        on_drop: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError("a port needs at least one connection")
        self.limit = limit
        self._on_drop = on_drop
        self._clock = clock
        # Insertion-ordered: the first key of `_waiting` is the oldest connection not yet proven.
        self._waiting: dict[Slot, None] = {}
        self._proven: dict[Slot, None] = {}
        self._counts = dict.fromkeys(Stage, 0)

    def __len__(self) -> int:
        return len(self._waiting) + len(self._proven)

    def count(self, stage: Stage) -> int:
        return self._counts[stage]

    def admit(self, close: Callable[[], None], stage: Stage) -> Slot | None:
        """A slot for a new connection, making room if needed; None: refuse it (all PROVEN)."""
        if len(self) >= self.limit:
            victim = next(iter(self._waiting), None)
            if victim is None:
                self._on_drop("refused")
                return None
            end = victim.close
            self.release(victim)
            self._on_drop("evicted")
            end()
        slot = Slot(close, stage, self._clock())
        self._held(stage)[slot] = None
        self._counts[stage] += 1
        return slot

    def advance(self, slot: Slot, stage: Stage, close: Callable[[], None] | None = None) -> None:
        """Move a held slot on to `stage`, keeping its place among those not yet proven; a
        released slot stays released."""
        if slot not in self._held(slot.stage):
            return
        if (stage is Stage.PROVEN) != (slot.stage is Stage.PROVEN):
            del self._held(slot.stage)[slot]
            self._held(stage)[slot] = None
        self._counts[slot.stage] -= 1
        self._counts[stage] += 1
        slot.stage = stage
        if close is not None:
            slot.close = close

    def release(self, slot: Slot) -> None:
        """The connection ended (or is being ended): its slot is free. Idempotent."""
        if self._held(slot.stage).pop(slot, slot) is None:
            self._counts[slot.stage] -= 1
        # `close` refers to the connection, which refers to its slot: a cycle that only the
        # garbage collector's rare full passes would free, with the connection's buffers.
        slot.close = _nothing

    def close_all(self, below: Stage = Stage.PROVEN) -> int:
        """End every connection in a stage below `below` (on shutdown: handshakes in flight
        would otherwise hold the server open until their timeout). Returns how many."""
        victims = [slot for slot in (*self._waiting, *self._proven) if slot.stage < below]
        for slot in victims:
            end = slot.close
            self.release(slot)
            end()
        return len(victims)

    def _held(self, stage: Stage) -> dict[Slot, None]:
        return self._proven if stage is Stage.PROVEN else self._waiting


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The bounds every HTTP connection of a port lives within (both ports have their own)."""

    header_timeout: float  # a request line and headers must arrive whole within this
    idle_timeout: float  # a keep-alive connection with no request in flight for this is closed
    max_header_bytes: int  # a request line and headers larger than this are answered 431


@dataclass(eq=False, slots=True)
class Port:
    """What the protocols of one listening port share: its name (a metrics label), its
    limiter, its HTTP bounds and a counter of connections it dropped, by reason."""

    name: str
    limiter: ConnectionLimiter
    http: HttpLimits
    dropped: Callable[[str], None]
