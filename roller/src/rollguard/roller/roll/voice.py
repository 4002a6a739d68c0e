"""What the roll says, and where: the live view, the log, and the roll's events.

The events: one JSON object a line (`events-<rollId>.jsonl`), each a row of the dataset's
events table (`rollguard.shared.dataset`), read by `rollguard collect` and the report; the
roll's metrics listen to them (`EventLog`). A wait is said once per change of its reason
(`EventLog.say`), and heard by the listeners at every poll. Events feed people and reports; the
roll journal (`stores/journal.py`) is the record of intent and outcome.

What each look at a node says (`Voice`): the roll loop (`roller.py`) observes, the node's
`node.step` judges and says what the look means (`node.speech`), and the loop hands that here
to be said: events written, waits said once per change of their reason, the live view's
lines, log lines. Nothing here decides or writes the roll journal.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollguard.roller.model import Node
from rollguard.roller.roll.node.budgets import RecoveryTracker
from rollguard.roller.roll.node.outcome import Said, Speak
from rollguard.shared.dataset import Event
from rollguard.shared.wire import format_time

logger = logging.getLogger(__name__)

Wall = Callable[[], datetime]  # the wall clock: what the journal and the events stamp


def utc_now() -> datetime:
    return datetime.now(UTC)


def now_text(wall: Wall = utc_now) -> str:
    return format_time(wall())


class EventLog:
    """Appends one JSON object a line, flushed at once; thread-safe. Without a path (`rollguard
    plan`, which writes nothing) events are not written.

    `listeners` (the roll's metrics) are called with each event's object, written or not, and
    with each `repeat`: a wait said again unchanged at a later poll, which is not written. A
    listener that raises is logged once and never stops the roll."""

    def __init__(
        self,
        path: Path | None,
        roll_id: str,
        *,
        cluster: str | None = None,
        wall: Wall = utc_now,
        quiet: bool = False,
    ) -> None:
        self.path = path
        self.quiet = quiet  # `plan`'s look: nothing said, not even to the log
        self.wall = wall
        self.roll_id = roll_id
        self.cluster = cluster  # in every event: `rollguard collect` keeps each cluster's own
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._lock = threading.Lock()
        self._failing = False
        self._broken: set[Callable[[dict[str, Any]], None]] = set()  # listeners that raised
        self._said: dict[tuple[str, str], str] = {}  # (node, kind) -> the last reason said
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def _entry(
        self, node: str | None, action: Event, reason: str, figures: dict[str, Any]
    ) -> dict[str, Any]:
        known = {k: v for k, v in figures.items() if v is not None}
        return {
            "ts": now_text(self.wall),
            "rollId": self.roll_id,
            **({"cluster": self.cluster} if self.cluster else {}),
            "node": node,
            "action": action,
            "reason": reason,
            **known,
        }

    def say(
        self,
        node: str | None,
        kind: str,
        action: Event,
        reason: str,
        level: int = logging.INFO,
        /,  # positional: a figure may be called `kind` (a deferral's kind) too
        **figures: Any,
    ) -> None:
        """Log and record a wait once per change of its reason, not at every poll (the
        listeners hear it again at every poll: `repeat`). `kind` tells a node's waits apart."""
        if self._said.get((node or "", kind)) == reason:
            self.repeat(node, action, reason, **figures)
            return
        self._said[(node or "", kind)] = reason
        if not self.quiet:
            logger.log(level, "%s: %s", node or "cluster", reason)
        self.write(node, action, reason, **figures)

    def forget_said(self, node: str | None, kind: str) -> None:
        """`kind` may be said again, even with the same reason (its wait ended)."""
        self._said.pop((node or "", kind), None)

    def repeat(self, node: str | None, action: Event, reason: str = "", **figures: Any) -> None:
        """An event said before and unchanged (`say`): for the listeners only, marked
        `repeated`, so that they know the wait goes on; never written."""
        if self.listeners:
            self._tell({**self._entry(node, action, reason, figures), "repeated": True})

    def _tell(self, entry: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            try:
                listener(entry)
            except Exception:  # the metrics feed people, not the roll's safety: say it once
                with self._lock:
                    first = listener not in self._broken
                    self._broken.add(listener)
                if first:
                    logger.warning("an event listener failed; it is ignored", exc_info=True)

    def write(self, node: str | None, action: Event, reason: str = "", **figures: Any) -> None:
        """One event; `action` is one of the dataset's event names (`shared.dataset.Event`)."""
        entry = self._entry(node, action, reason, figures)
        if self.path is not None:
            self._append(self.path, entry)
        if self.listeners:
            self._tell(entry)

    def _append(self, path: Path, entry: dict[str, Any]) -> None:
        line = json.dumps(entry) + "\n"
        with self._lock:
            try:
                with path.open("a") as handle:
                    handle.write(line)
                    handle.flush()
            except OSError as exc:
                # The events feed reports, not safety (the roll journal does): say it once.
                if not self._failing:
                    logger.warning("event log %s: %s; events are lost", path, exc)
                self._failing = True
            else:
                self._failing = False


# The live view's line for a node: its text, and its recovery's figures when it recovers.
Progress = Callable[[Node, str, RecoveryTracker | None], None]


class Voice:
    def __init__(self, events: EventLog, on_progress: Progress | None = None) -> None:
        self.events = events
        self.progress: Progress = on_progress or (lambda node, text, tracker: None)

    def speak(self, node: Node, said: Sequence[Said]) -> None:
        """What a look at `node` said (`node.outcome.Said`), in order."""
        for it in said:
            if it.how is Speak.WRITE:
                assert it.event is not None
                self.events.write(node.name, it.event, it.text, **it.figures)
            elif it.how is Speak.SAY:
                assert it.event is not None
                self.events.say(node.name, it.key, it.event, it.text, **it.figures)
            elif it.how is Speak.PROGRESS:
                self.progress(node, it.text, it.tracker)
            else:
                logger.info("%s", it.text)
