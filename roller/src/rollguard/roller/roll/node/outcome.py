"""One look at a node, in and out: what the roll saw of it (`Seen`), and what the look comes to
(`Outcome`): the node's record after it, the one effect the roll must apply, and what is said.

The effect is a value with a `do` the loop reads (`Do`): look again (at the next poll, or at
once), a restart or a live step the roll may now begin (its gates and batches decide when), the
node left out or held, back where it was, failed (the roll goes on waiting for the rest of its
restart, then stops), or the roll stopped now. Applying it is the loop's (`roll/effects.py`).

What is said (`Said`) is what the node's look means to people, in the order it is said: an
event written, a wait said once per change of its reason, the live view's line, a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rollguard.roller.model import AgentAnswer, ClusterView, Node, PlatformView
from rollguard.roller.roll.configs.plan import NodePlan
from rollguard.roller.roll.node.budgets import RecoveryTracker
from rollguard.roller.roll.node.record import NodeRecord
from rollguard.shared.dataset import Event
from rollguard.shared.wire import KafkaBuild


@dataclass(frozen=True, slots=True)
class Seen:
    """What the roll saw of one node at a look, and of the roll around it."""

    node: Node
    now: float  # the roll's clock (monotonic seconds)
    wall: str  # the wall clock, for the record's `at`
    view: PlatformView | None = None  # the platform's (None: not asked, a recovery watched)
    answer: AgentAnswer | None = None  # its agent's (None: not asked, or it has none)
    cluster: ClusterView | None = None  # Kafka's (None: not asked, or it cannot be seen)
    # With a target version: what its agent says it runs, when asked to compare (taking it,
    # or looking again before the restart of a node taken without knowing).
    running: KafkaBuild | None = None
    config: NodePlan | None = None  # its desired configuration's plan, when it has one
    # Why the roll cannot bring its desired configuration about (a dynamic value shadowing
    # the file across a restart, naming the node), or cannot know what it needs (a broker
    # Kafka cannot describe now): `refused`, the roll refuses to start (exit 2); `unknown`, it
    # fails (exit 1).
    refused: str | None = None
    unknown: str | None = None
    revisions: bool = True  # the platform knows which revision a node should run
    # Other nodes of the roll in log recovery, or starting, seen earlier at this poll: while
    # there are any, nothing else is restarted.
    recovering: tuple[str, ...] = ()
    starting: tuple[str, ...] = ()
    batching: bool = False  # a ready broker is a candidate for a batch (--max-batch-size > 1)


class Do(StrEnum):
    LOOK = "look"  # nothing to apply: look again at the next poll
    LOOK_NOW = "look-now"  # look again at once (a phase ended, a recovery ended)
    TAKE = "take"  # taken: pending now
    LEAVE_OUT = "leave-out"  # not taken (skipped), on record
    HOLD = "hold"  # kept for later (--hold), on record
    RESTART = "restart"  # may be restarted now, alone (the gates decide when)
    BATCH = "batch"  # a ready broker that may restart in a batch (the batch rule decides)
    CONFIGURE = "configure"  # may be configured live now (the gates decide when)
    BACK = "back"  # back where it was: on record, said
    FAIL_NODE = "fail-node"  # this node failed; the roll stops once the rest of its restart is back
    FAIL_ROLL = "fail-roll"  # the roll stops now
    REFUSE = "refuse"  # the roll does not start: what it is asked cannot be done (exit 2)


@dataclass(frozen=True, slots=True)
class Effect:
    do: Do
    reason: str = ""  # a restart's or a failure's, a left-out node's why, a live step's note
    force: bool = False  # a restart without the availability and quorum checks


LOOK = Effect(Do.LOOK)
LOOK_NOW = Effect(Do.LOOK_NOW)


class Speak(StrEnum):
    WRITE = "write"  # an event, written
    SAY = "say"  # an event said once per change of its reason (under `key`)
    PROGRESS = "progress"  # the live view's line for the node
    LOG = "log"  # a log line (INFO)


@dataclass(frozen=True, slots=True)
class Said:
    how: Speak
    text: str
    event: Event | None = None  # WRITE and SAY
    key: str = ""  # SAY: what tells the node's waits apart
    figures: Mapping[str, Any] = field(default_factory=dict)
    tracker: RecoveryTracker | None = None  # PROGRESS: a recovery's figures for the live view


@dataclass(frozen=True, slots=True)
class Outcome:
    record: NodeRecord
    effect: Effect = LOOK
    said: tuple[Said, ...] = ()


def write(event: Event, text: str = "", **figures: Any) -> Said:
    return Said(Speak.WRITE, text, event, figures=figures)


def say(key: str, event: Event, text: str, **figures: Any) -> Said:
    return Said(Speak.SAY, text, event, key, figures)


def progress(text: str, tracker: RecoveryTracker | None = None) -> Said:
    return Said(Speak.PROGRESS, text, tracker=tracker)


def log(text: str) -> Said:
    return Said(Speak.LOG, text)
