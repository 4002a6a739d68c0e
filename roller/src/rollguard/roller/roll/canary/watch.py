"""What each restart costs the roll's own client (`rollguard roll --canary TOPIC`): the canary
(`rollguard.roller.roll.canary.client`) runs for the whole roll, and this module cuts its samples
into windows by the roll's own events and says each window's figures (`canary.figures`).

- **The baseline**: the canary runs `--canary-baseline` before the roll's first action, from
  when the first send to every partition is acknowledged (a producer's first send to a broker
  waits on metadata, its producer id and a new connection: not what a client sees in steady
  state); the baseline is everything from then to the first restart, said once then
  (`canary-baseline`).
- **Each restart**: from the node's `restart` event (or the `configure` of a live step) to its
  `ready` (or `configured`) event, which the roll writes when the node is back where it was,
  in every ISR it was in. Its figures are said (`canary-cost`) once every send of the window is
  answered (a send that fails does so up to the delivery timeout after it was sent), with the
  baseline's beside them; a node never back is said at the roll's end, up to then.
- **A canary that cannot produce** (nothing acknowledged for its delivery timeout) is said once
  (`canary-failing`, a warning) until it produces again: never taken as healthy.
- **Its gate** (`gates.canary`): `breach` judges the last `--canary-window` before each
  restart (`canary.figures.breach`).
- **The journal**: each node's figures in its record (`journaled`), with the next save and
  at the roll's end. An ACL the canary lacks, found at its start, is exit 2 (`CanaryRefused`).

It listens to the event log as the roll's metrics do, so that the loop is unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from rollguard.roller.kafka_admin import AdminApiError
from rollguard.roller.model import CanaryArrival, CanarySample
from rollguard.roller.roll.canary.client import CanaryRefused
from rollguard.roller.roll.canary.figures import (
    Breach,
    Figures,
    breach,
    brief,
    by_broker,
    figures,
    settled,
    stalled,
)
from rollguard.roller.roll.canary.topic import CanaryTopic
from rollguard.roller.roll.stores.journal import JournalStore, RollRecord
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event
from rollguard.shared.errors import RollguardError
from rollguard.shared.logs import PROGRESS

logger = logging.getLogger(__name__)
progress = logging.getLogger(PROGRESS)  # the roll's progress lines, on stderr

STARTS = (Event.RESTART, Event.CONFIGURE)
BACKS = (Event.READY, Event.CONFIGURED)
WATCH_EVERY = 0.5  # seconds between two looks at the windows waiting for their answers


class CanarySource(Protocol):
    """What the roll asks of its canary (`canary.client.Canary`)."""

    topic: str
    delivery_timeout: float
    clock: Callable[[], float]
    warm: threading.Event
    last_error: str | None
    started_at: float | None
    refused: CanaryRefused | None

    @property
    def last_ack(self) -> float | None: ...
    def prepare(self) -> CanaryTopic: ...
    async def lead(self, partitions: Sequence[int]) -> None: ...
    def start(self) -> None: ...
    def stop(self, *, wait: bool = True) -> None: ...
    def samples(self) -> tuple[list[CanarySample], list[CanaryArrival], list[float]]: ...


class CanaryJournal:
    """The roll's journal store, each node's canary figures (`RollCanary.costs`) written into
    its record with every save; the last record saved again when the roll's canary stops, with
    the figures said after the roll's own last save."""

    def __init__(self, store: JournalStore, costs: Callable[[], Mapping[str, Mapping[str, Any]]]):
        self.store = store
        self._costs = costs
        self.last: RollRecord | None = None

    def load(self, roll_id: str) -> RollRecord | None:
        return self.store.load(roll_id)

    def save(self, record: RollRecord) -> None:
        for name, fields in self._costs().items():
            if name in record.nodes:
                record.nodes[name] = replace(record.nodes[name], canary=dict(fields))
        self.store.save(record)
        self.last = record

    def where(self, roll_id: str) -> str:
        return self.store.where(roll_id)

    def rolls(self) -> list[str] | None:
        return self.store.rolls()


@dataclass
class Window:
    """One node's restart (or live step), from its `restart` to its `ready`."""

    node: str
    start: float
    end: float | None = None
    figures: Figures | None = None  # once said


class RollCanary:
    """The canary for one roll: `start()` before the roll, `stop()` after it, `lines()` for its
    summary; `on_event` listens to the roll's events."""

    def __init__(
        self,
        canary: CanarySource,
        events: EventLog,
        *,
        baseline: float,
        window: float = 10.0,
        max_p99: float | None = None,
    ) -> None:
        self.canary = canary
        self.events = events
        self.baseline_wait = baseline
        self.window = window  # the gate's (`breach`), seconds
        self.max_p99 = max_p99  # seconds, None: not bounded
        self.topic: CanaryTopic | None = None
        self.baseline: Figures | None = None
        self.windows: list[Window] = []
        self._open: dict[str, Window] = {}
        self._since = 0.0  # the baseline's start
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._back: set[str] = set()  # nodes back: their canary partitions to lead again
        self._leading: asyncio.Task[None] | None = None  # an election under way
        self.node_ids: dict[str, int] = {}  # node name -> id, once the roll knows its nodes
        self._costs: dict[str, dict[str, Any]] = {}  # node -> its canary-cost's figures
        self._lock = threading.Lock()  # the journal reads them in a worker thread
        self._journal: CanaryJournal | None = None
        self.brokers: dict[int, Figures] = {}  # the whole roll by broker, once it ended

    def journaled(self, store: JournalStore) -> CanaryJournal:
        """The journal store to give the roll in place of `store`: each node's figures in its
        record."""
        self._journal = CanaryJournal(store, self.costs)
        return self._journal

    def costs(self) -> dict[str, dict[str, Any]]:
        """Each node's figures said so far (its latest window's), as the journal keeps them."""
        with self._lock:
            return dict(self._costs)

    @property
    def name(self) -> str:
        return self.canary.topic

    async def start(self) -> None:
        """The topic found or made, the clients started, the baseline's first seconds waited
        for. AdminApiError when the topic can be neither found nor made; CanaryRefused (exit
        2) when Kafka refuses the roller's client an operation the canary needs."""
        self.topic = topic = await asyncio.to_thread(self.canary.prepare)
        if topic.problem:  # said once, here and in the event
            logger.warning("canary %s", topic.text())
        else:
            progress.info("canary %s", topic.text())
        self.events.write(
            None,
            Event.CANARY_TOPIC,
            topic.text(),
            topic=topic.name,
            partitions=topic.partitions,
            replication=topic.replication,
            created=topic.created,
        )
        await asyncio.to_thread(self.canary.start)
        # Warm first (up to the delivery timeout): every partition's first send acknowledged.
        await asyncio.to_thread(self.canary.warm.wait, self.canary.delivery_timeout)
        if self.canary.refused is not None:  # an ACL missing: exit 2, nothing done yet
            raise self.canary.refused
        self._since = self.canary.clock()
        self._task = asyncio.create_task(self._watch(), name="canary")
        self.events.listeners.append(self.on_event)
        progress.info(
            "canary %s: %s of idle baseline before the first restart",
            self.name,
            format_duration(self.baseline_wait),
        )
        await asyncio.sleep(self.baseline_wait)

    def breach(self) -> Breach | None:
        """The gate's judgement of the last `window` (`canary.figures.breach`); a canary not
        running is closed."""
        if self._task is None:
            return Breach("not running")
        samples, _, unanswered = self.canary.samples()
        now = self.canary.clock()
        max_ms = None if self.max_p99 is None else self.max_p99 * 1000
        start = max(self._since, now - self.window)
        found = breach(samples, unanswered, start, now, max_p99_ms=max_ms)
        if found is not None and found.p99_ms is None and self.canary.last_error:
            return Breach(f"{found.reason} ({self.canary.last_error})", found.failed)
        return found

    def on_event(self, entry: Mapping[str, Any]) -> None:
        action, node = entry.get("action"), entry.get("node")
        if entry.get("repeated") or not isinstance(node, str):
            return
        now = self.canary.clock()
        if action in STARTS and node not in self._open:
            if self.baseline is None:
                samples, arrivals, _ = self.canary.samples()
                self.baseline = figures(samples, arrivals, self._since, now)
                logger.info("canary %s: baseline %s", self.name, self.baseline.text())
                self.events.write(
                    None,
                    Event.CANARY_BASELINE,
                    self.baseline.text(),
                    topic=self.name,
                    **self.baseline.fields(),
                )
            self._open[node] = Window(node, now)
            self.windows.append(self._open[node])
        elif action in BACKS and node in self._open:
            self._open.pop(node).end = now
            self._back.add(node)

    async def _watch(self) -> None:
        while True:
            self._settle(final=False)
            self._stalled()
            if self._back and (self._leading is None or self._leading.done()):
                # Its own task: the roll's end waits for it rather than cancel it half way.
                self._leading = asyncio.create_task(self._lead(), name="canary-leaders")
            await asyncio.sleep(WATCH_EVERY)

    async def _lead(self) -> None:
        """The nodes back have their partitions of the canary topic led by them again (a
        topic of another shape is left as it is), so that every broker's next restart is felt.
        Only theirs: another broker may be down now, and its partition cannot be led by it."""
        back, self._back = self._back, set()
        topic = self.topic
        if topic is None or topic.problem is not None or not topic.leaders:
            return
        # Without the nodes' ids (not told yet), every partition.
        ids = {self.node_ids[n] for n in back if n in self.node_ids}
        partitions = sorted(p for p, b in topic.leaders.items() if not self.node_ids or b in ids)
        if not partitions:
            return
        try:
            await self.canary.lead(partitions)
        except AdminApiError as exc:  # its next restart is felt less: said, never fatal
            logger.warning("canary %s: preferred leaders not elected: %s", self.name, exc)

    def _settle(self, *, final: bool) -> None:
        """Say each window whose answers are all in (`final`: every one, up to now)."""
        samples, arrivals, unanswered = self.canary.samples()
        now = self.canary.clock()
        for window in self.windows:
            if window.figures is not None or (window.end is None and not final):
                continue
            end = window.end if window.end is not None else now
            if not final and not settled(unanswered, end, now, self.canary.delivery_timeout):
                continue
            window.figures = seen = figures(samples, arrivals, window.start, end)
            back = "" if window.end is not None else " (not back by the roll's end)"
            logger.info("canary %s: %s%s: %s", self.name, window.node, back, seen.text())
            base = self.baseline.fields("baseline") if self.baseline is not None else {}
            with self._lock:
                self._costs[window.node] = {**seen.fields(), **base}
            brokers = brief(by_broker(samples, arrivals, window.start, end, self._leaders()))
            self.events.write(
                window.node,
                Event.CANARY_COST,
                seen.text() + back,
                topic=self.name,
                **seen.fields(),
                **base,
                **({"brokers": brokers} if brokers else {}),
            )

    def _leaders(self) -> Mapping[int, int]:
        return self.topic.leaders if self.topic is not None else {}

    def _by_broker(self) -> None:
        """The whole roll by broker (from the baseline's start), said at its end."""
        samples, arrivals, _ = self.canary.samples()
        found = by_broker(samples, arrivals, self._since, self.canary.clock(), self._leaders())
        if not found:
            return
        self.brokers = found
        text = "; ".join(f"broker {b}: {seen.text()}" for b, seen in found.items())
        self.events.write(None, Event.CANARY_BROKERS, text, topic=self.name, brokers=brief(found))

    def _stalled(self) -> None:
        canary = self.canary
        now = canary.clock()
        since = canary.started_at if canary.started_at is not None else now
        failing = stalled(canary.last_ack, now, canary.delivery_timeout, since)
        if failing and not self._failing:
            why = (
                f"no send acknowledged for {format_duration(canary.delivery_timeout)}: "
                f"{canary.last_error or 'no error said'}"
            )
            self.events.say(
                None, "canary", Event.CANARY_FAILING, why, logging.WARNING, topic=self.name
            )
        elif self._failing and not failing:
            logger.info("canary %s: sends acknowledged again", self.name)
            self.events.forget_said(None, "canary")
        self._failing = failing

    async def stop(self, *, wait: bool = True) -> None:
        """Wait for the answers of the windows still due (the delivery timeout bounds it), say
        them, and stop the clients. Without `wait` (an interrupted roll, whose exit is bounded
        to seconds), say what is in and stop at once."""
        with contextlib.suppress(ValueError):
            self.events.listeners.remove(self.on_event)
        if self._task is not None:
            due = self.canary.clock() + (self.canary.delivery_timeout + 1 if wait else 0)
            while self.canary.clock() < due and any(
                w.figures is None and w.end is not None for w in self.windows
            ):
                await asyncio.sleep(0.1)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if wait and self._leading is not None:  # an election under way: let it end
                await self._leading
            if wait and self._back:  # the last node back: its partition led by it again
                await self._lead()
            self._task = None  # not running: its gate is closed
            if self.baseline is None:  # no restart: the whole roll was idle
                self.on_event({"action": Event.RESTART, "node": ""})
                self._open.clear()
                self.windows.clear()
            self._settle(final=True)
            self._by_broker()
            journal = self._journal
            if wait and journal is not None and journal.last is not None and self._costs:
                # The roll's record is final: the figures said after its last save, in it (an
                # interrupted roll's are in its events).
                try:
                    await asyncio.to_thread(journal.save, journal.last)
                except (RollguardError, OSError) as exc:
                    logger.warning("canary %s: figures not in the journal: %s", self.name, exc)
        if wait:
            await asyncio.to_thread(self.canary.stop)
        else:
            self.canary.stop(wait=False)

    async def __aenter__(self) -> RollCanary:
        try:
            await self.start()
        except BaseException:  # its topic refused, or interrupted before the roll began
            await self.stop(wait=False)
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        await self.stop(wait=kind is None or not issubclass(kind, asyncio.CancelledError))

    def lines(self) -> list[str]:
        """The roll summary's lines: the baseline, each restart's cost, each broker's."""
        said = [f"canary {self.name}: baseline {self.baseline.text()}"] if self.baseline else []
        said += [
            f"canary {self.name}: {w.node}: {w.figures.text()}"
            for w in self.windows
            if w.figures is not None
        ]
        said += [
            f"canary {self.name}: broker {broker}'s partitions over the roll: {seen.text()}"
            for broker, seen in self.brokers.items()
        ]
        return said
