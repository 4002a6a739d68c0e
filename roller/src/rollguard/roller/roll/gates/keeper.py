"""Gates: what holds a whole roll back between restarts, whatever each node's own safety.

A gate is checked before each restart and each batch (never while a restarted node is being
waited for: that wait goes on). Every configured gate must be open; a closed one says why
(`Closed`) and the roll waits, looking again at its next poll:

- `prometheus` (`--gate-prometheus URL --gate-query PROMQL`): closed while a query returns a
  non-empty result (an alert firing for the cluster, say);
- `consumer-lag` (`--gate-consumer-lag GROUP=MAX`): closed while a consumer group's lag
  (committed offsets against end offsets, from Kafka's Admin API) is above MAX;
- `window` (`--window`): closed outside every restart window, until the next one opens;
- `pause` (`rollguard pause`): closed while the roll is paused;
- `canary` (`--canary TOPIC`): closed while the roll's own client fails sends, cannot produce,
  or (`--canary-max-p99`) sees its sends slower than that over the last `--canary-window`.

A gate that cannot tell (Prometheus unreachable, the Admin API not answering) is closed: the
roll never acts on what it cannot see. The roll waits at a closed `prometheus`, `consumer-lag`
or `canary` gate within --safety-wait, as for any deferral (progress: its `deficit`
falling); outside a window or paused it waits without that budget: that wait is asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from rollguard.roller.model import Node
from rollguard.roller.roll.node.actions import Defer, DeferKind
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.rules.safety import Blocker
from rollguard.roller.roll.voice import EventLog, Progress
from rollguard.shared.dataset import Event


class GateKind(StrEnum):
    """A gate's kind: values are stored in events and metrics labels (never rename one)."""

    PROMETHEUS = "prometheus"
    CONSUMER_LAG = "consumer-lag"
    WINDOW = "window"
    PAUSE = "pause"
    CANARY = "canary"


@dataclass(frozen=True, slots=True)
class Closed:
    """A gate that holds the roll now."""

    kind: GateKind
    name: str  # which gate: the query, the group, the window as given, "pause"
    reason: str  # why it is closed now, a sentence for people
    deficit: int = 1  # how far from opening (series returned, lag above MAX): progress
    opens_at: datetime | None = None  # a window's next opening, when known

    @property
    def budgeted(self) -> bool:
        """Whether the roll waits for it within --safety-wait (a health gate), or for as long
        as it takes (a window or a pause, which were asked for)."""
        return self.kind in (GateKind.PROMETHEUS, GateKind.CONSUMER_LAG, GateKind.CANARY)

    def describe(self) -> str:
        """`window gate: outside every restart window (Mon-Fri ...)...`: the reason names the
        gate's own query, group or window."""
        return f"{self.kind} gate: {self.reason}"


class Gate(Protocol):
    """One gate. `check` never raises for what it cannot read: it returns a `Closed` saying so
    (unknown is closed)."""

    kind: GateKind
    name: str

    async def check(self) -> Closed | None:
        """None when open now."""


@dataclass(frozen=True)
class Gates:
    """The roll's gates, checked together."""

    gates: Sequence[Gate] = ()

    def __bool__(self) -> bool:
        return bool(self.gates)

    async def closed(self) -> list[Closed]:
        """Every closed gate now (none: the roll may restart)."""
        if not self.gates:
            return []
        found = await asyncio.gather(*(gate.check() for gate in self.gates))
        return [c for c in found if c is not None]


def describe(closed: Sequence[Closed]) -> str:
    return "; ".join(c.describe() for c in closed)


class GateKeeper:
    """The roll loop's side of its gates: asked once a poll, at its first restart (or batch);
    what holds the roll said once a change, and once when every gate is open again."""

    def __init__(
        self,
        gates: Gates,
        observer: Observer,
        on_progress: Progress,
        events: EventLog | None = None,
    ) -> None:
        self.gates = gates
        self.observer = observer
        self.events = events or observer.events
        self._on_progress = on_progress
        self._closed: list[Closed] = []  # at this poll's first restart
        self._said: set[str] = set()  # the closed gates said, until every one opens

    async def closed(self, *, ask: bool) -> bool:
        """Whether a gate holds the roll's restarts now: the gates are asked when `ask` (a
        poll's first restart or batch), else their answer at that moment stands."""
        if not self.gates:
            return False
        if ask:
            self._closed = await self.gates.closed()
            if not self._closed:
                self._opened()
        return bool(self._closed)

    @property
    def now(self) -> list[Closed]:
        """The gates closed at this poll's first restart."""
        return list(self._closed)

    def hold(self, gated: Sequence[Node]) -> tuple[dict[Node, Defer], bool]:
        """Hold `gated` at the closed gates, said: at a health gate each is deferred (within
        --safety-wait, its progress the gates' deficit: the deferrals returned); at a window or
        a pause alone they wait without that budget (True: the roll is waiting, not stuck)."""
        for gate in self._closed:
            figures: dict[str, Any] = {"gate": gate.kind, "name": gate.name}
            figures["deficit"] = gate.deficit
            if gate.opens_at is not None:
                figures["opensAt"] = gate.opens_at.isoformat()
            key = f"gate:{gate.kind}:{gate.name}"
            self.events.say(None, key, Event.GATE_CLOSED, gate.describe(), **figures)
            self._said.add(key)
        budgeted = [g for g in self._closed if g.budgeted]
        reason = describe(self._closed)
        deferred: dict[Node, Defer] = {}
        for node in gated:  # each node held, as any deferral (its wait, in metrics too)
            self.events.say(node.name, "defer", Event.DEFER, reason, kind=DeferKind.GATE)
            if budgeted:
                blockers = tuple(Blocker(g.describe(), "gate", deficit=g.deficit) for g in budgeted)
                deferred[node] = Defer(reason, blockers)
            else:
                self._on_progress(node, f"held: {reason}", None)
        return deferred, not budgeted

    def _opened(self) -> None:
        """Every gate open, after some were closed: said once."""
        if not self._said:
            return
        for key in self._said:
            self.events.forget_said(None, key)
        self._said = set()
        self.events.say(None, "gates", Event.GATE_OPEN, "every gate is open")
        self.events.forget_said(None, "gates")
