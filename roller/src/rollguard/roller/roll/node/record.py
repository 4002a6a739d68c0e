"""Everything a roll knows about one node, in one record: its phase, why the roll took it or
left it out, its identity and standing before its restart, the facts that decide how it is
rolled (the Kafka version it ran, a configuration Kafka takes live), what it waits for now, and
the budgets of that wait. The roll loop moves it with one pure step (`step.py`), the journal
stores it as it is and a resumed roll reads it back as it was (`stores/journal.py`), the metrics
and the plan show it.

A node's life in a roll, by its `Phase` (every move, and when: `TRANSITIONS`):

    new --take--> left-out | held | pending
    pending <--> waiting | recovering        (before its restart: not ready, or in log recovery)
    pending --restart--> restarting <--> recovering --ready--> catching-up --> done
    pending --configure--> configuring --back in its ISRs--> done
    ... --> failed                            (its restart command failed, or it came back wrong)

`how` tells a restarted node from one configured live; a record whose `how` is set has its
restart (or live step) on record: never restarted again in this roll. The budgets of a wait
(`ready`, `recovery`, `unknown_since`, `budget`, `waiting.since`) are on the roll's own clock:
they live in the process and are not written to the journal; a resumed roll starts them again,
since it could not see what the node did while no roller was watching (judging that gap as "no
progress" would fail a healthy node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from rollguard.roller.roll.node.budgets import ReadyWait, RecoveryTracker
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.safety import Baseline, Blocker

IN_SYNC = Baseline()  # in every ISR, its voter caught up: all a restart can take away


class Phase(StrEnum):
    """Where a node is in a roll (the journal's and the metrics' word for it; never rename)."""

    NEW = "new"  # not looked at yet
    PENDING = "pending"  # taken, ready: waits for its turn and for a restart to be safe
    WAITING = "waiting"  # taken, not ready: waited for before its restart
    RECOVERING = "recovering"  # in log recovery, before or after its restart: never restarted
    HELD = "held"  # kept for later (--hold): a resumed roll takes it once no longer held
    LEFT_OUT = "left-out"  # not taken: `why` says why
    RESTARTING = "restarting"  # its restart on record: until its new process is ready
    CONFIGURING = "configuring"  # its live change on record: until back in its ISRs
    CATCHING_UP = "catching-up"  # ready again: until caught up with the quorum, in its ISRs
    DONE = "done"  # back where it was: restarted, or configured live (`how`)
    FAILED = "failed"  # its restart failed, or it came back on the wrong version

    @property
    def settled(self) -> bool:
        """Nothing left to do with the node in this roll: a resumed roll passes it by."""
        return self in (Phase.DONE, Phase.LEFT_OUT)


# Every move a node's record makes in a roll, and when: what the roll's own step does (a test
# holds the simulated rolls to it), and the picture of a node's life in the docs is drawn from.
TRANSITIONS: tuple[tuple[Phase, Phase, str], ...] = (
    (Phase.NEW, Phase.PENDING, "taken"),
    (Phase.NEW, Phase.LEFT_OUT, "nothing to do, --skip, not --only"),
    (Phase.NEW, Phase.HELD, "--hold"),
    (Phase.NEW, Phase.FAILED, "its configuration refused"),
    (Phase.PENDING, Phase.WAITING, "found not ready"),
    (Phase.PENDING, Phase.RECOVERING, "found in log recovery"),
    (Phase.WAITING, Phase.PENDING, "ready"),
    (Phase.WAITING, Phase.RECOVERING, "in log recovery"),
    (Phase.RECOVERING, Phase.PENDING, "its recovery over, ready"),
    (Phase.RECOVERING, Phase.WAITING, "its recovery over"),
    (Phase.PENDING, Phase.LEFT_OUT, "runs the target already"),
    (Phase.PENDING, Phase.RESTARTING, "safe, or forced: restarted"),
    (Phase.PENDING, Phase.CONFIGURING, "safe: changed live"),
    (Phase.PENDING, Phase.FAILED, "its restart failed"),
    (Phase.WAITING, Phase.FAILED, "stuck, or its agent unreadable too long"),
    (Phase.RECOVERING, Phase.FAILED, "its recovery stalled or too long"),
    (Phase.RESTARTING, Phase.RECOVERING, "in log recovery"),
    (Phase.RECOVERING, Phase.RESTARTING, "its recovery over"),
    (Phase.RESTARTING, Phase.CATCHING_UP, "its new process ready"),
    (Phase.RESTARTING, Phase.DONE, "ready again (a controller alone)"),
    (Phase.RESTARTING, Phase.FAILED, "back on another version"),
    (Phase.CATCHING_UP, Phase.DONE, "caught up, back in every ISR"),
    (Phase.CONFIGURING, Phase.DONE, "back in every ISR"),
    (Phase.CONFIGURING, Phase.FAILED, "Kafka did not take it"),
    (Phase.HELD, Phase.NEW, "roll --resume without --hold"),
    (Phase.FAILED, Phase.NEW, "roll --resume"),
)


class How(StrEnum):
    RESTART = "restart"  # restarted
    LIVE = "live"  # its configuration changed live, not restarted


class CatchUp(StrEnum):
    """What a node ready again after its restart waits for before it is done."""

    QUORUM = "quorum"  # a controller: until its voter caught up with the leader again
    ISR = "isr"  # a broker: until it is back in every ISR it was in before


@dataclass(frozen=True, slots=True)
class Waiting:
    """What the node waits for now, and since when: a metrics label (`kind`: an action's kind,
    a deferral's, `restart` or `catch-up`; never its free text) and the reason said."""

    kind: str
    reason: str
    since: float  # on the roll's clock
    blockers: tuple[Blocker, ...] = ()  # a deferral's: what it waits on, and how far
    starting: bool = False  # its agent says STARTING or RECOVERY: it holds the roll too
    deferral: bool = False  # held back by a rule of the roll (not a wait of its own)
    unknown: bool = False  # not ready, and its agent cannot say why


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node's record (see the module)."""

    name: str
    phase: Phase = Phase.NEW
    at: str = ""  # when its phase last changed (ISO 8601 UTC, the wall clock)
    why: str = ""  # why the roll takes it, or leaves it out
    reason: str = ""  # its restart's (or live step's) reason, or its failure
    how: How | None = None  # its restart or live step on record (None: not yet)
    instance: str | None = None  # its identity before its restart (pod UID, JVM start)
    base: Baseline = IN_SYNC  # where it stood in the cluster before its restart
    batch: int | None = None  # the batch it restarted in (`--max-batch-size` above 1)
    kafka_version: str | None = None  # what its agent said it ran when the roll took it
    version_unknown: bool = False  # taken without knowing: looked at again before its restart
    live_only: bool = False  # its desired configuration changes only keys Kafka takes live
    canary: Mapping[str, float | int | None] | None = None  # what its restart cost the canary
    waiting: Waiting | None = None  # what it waits for now
    # The budgets of its wait (the roll's clock; not in the journal).
    ready: ReadyWait | None = None  # readiness: since when, its last progress
    recovery: RecoveryTracker | None = None  # its log recovery's figures, rate, verdict
    unknown_since: float | None = None  # its agent unreadable at every look since
    budget: Budget | None = None  # catching up: the cluster's progress
    catch_up: CatchUp | None = None
    since_ms: int | None = None  # QUORUM: the leader's caught-up time when the node was back
    note: str = ""  # ISR: what it was already out of before its restart

    @property
    def restarted(self) -> bool:
        """Its restart (or live step) is on record: never restarted again in this roll."""
        return self.how is not None

    @property
    def taken(self) -> bool:
        return self.phase not in (Phase.NEW, Phase.LEFT_OUT, Phase.HELD)

    @property
    def on_its_way_back(self) -> bool:
        """Restarted (or configured live) and not yet back, nor failed."""
        return self.restarted and self.phase not in (Phase.DONE, Phase.FAILED)

    @property
    def watching_recovery(self) -> bool:
        """Restarted and in log recovery: only its agent is asked until it ends."""
        return self.restarted and self.recovery is not None and self.catch_up is None

    @property
    def asks_agent(self) -> bool:
        """Its agent is asked at each look after its restart (until it is ready again)."""
        return self.catch_up is None
