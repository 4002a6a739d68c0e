"""What one look at a node chooses, as frozen values: the actions of the roll's rules
(`Restart`, `Defer`, `AwaitRecovery`, ...), what `decide` answers a library user, and what
`step` turns into the node's record and its effect (`outcome.py`).

Before its restart: `Restart` (forced or not), `Defer` (not safe now: the blockers say why, by
kind), `Fail` (the roll cannot go on), or a wait: `AwaitReady`, `AwaitRecovery`, `AwaitUnknown`.
After it: the same waits, `Back` (a new process ready), then `AwaitQuorum` and `AwaitIsr`, then
`Done`. A look judged by the rules is a `Look`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from rollguard.roller.roll.node.budgets import Verdict
from rollguard.roller.roll.node.record import NodeRecord
from rollguard.roller.roll.rules.safety import Blocker

FORCE = "force"  # how every forced restart's reason begins: the events tell them by it


@dataclass(frozen=True, slots=True)
class Restart:
    reason: str  # a forced one begins with FORCE
    force: bool = False  # without the availability and quorum checks


class DeferKind(StrEnum):
    """Why a node is deferred, in a word: the `kind` of its `defer` events and a metrics label
    (a small fixed set, never the free text of the reason; never rename one)."""

    AVAILABILITY = "availability"  # a partition would go below min.insync.replicas or offline,
    # or is being reassigned
    QUORUM = "quorum"  # the KRaft quorum would lose its majority, or cannot be described
    ADMIN_API = "admin-api"  # the cluster cannot be observed through Kafka's Admin API
    GATE = "gate"  # a health gate of the whole roll is closed
    # another node of the roll is in log recovery: no node is restarted until it is back
    RECOVERING_PEER = "recovering-peer"
    OTHER = "other"  # no blocker said why (a batch holding the node back)


_SUBJECT_KINDS = {
    "quorum": DeferKind.QUORUM,
    "cluster": DeferKind.ADMIN_API,
    "gate": DeferKind.GATE,
    "recovery": DeferKind.RECOVERING_PEER,
}


@dataclass(frozen=True, slots=True)
class Defer:
    reason: str  # not safe now; other nodes go first, this one is tried again later
    blockers: tuple[Blocker, ...] = field(default=())

    @property
    def kind(self) -> DeferKind:
        """Its first blocker's kind: a partition's subject is its name (`orders-3`)."""
        if not self.blockers:
            return DeferKind.OTHER
        return _SUBJECT_KINDS.get(self.blockers[0].subject, DeferKind.AVAILABILITY)


@dataclass(frozen=True, slots=True)
class Fail:
    reason: str  # fatal for the roll
    # The node is up and well, but not what the roll was for (back on another Kafka version):
    # on record as failed, so a resumed roll takes it again, once its install is fixed.
    again: bool = False


# A wait's `kind`: its events' figure and a metrics label (never rename one).


@dataclass(frozen=True, slots=True)
class AwaitReady:
    reason: str  # not ready, within the operation timeout: keep polling
    # its agent reports it STARTING or RECOVERY (on its way back, fenced): like a recovery, it
    # holds every other restart of the roll until it is back
    starting: bool = False
    kind: ClassVar[str] = "not-ready"


@dataclass(frozen=True, slots=True)
class AwaitRecovery:
    reason: str  # in log recovery: wait while it progresses, never restart it
    kind: ClassVar[str] = "recovery"


@dataclass(frozen=True, slots=True)
class AwaitUnknown:
    reason: str  # its agent cannot be read: wait within the safety budget, never force
    kind: ClassVar[str] = "agent-unreachable"


@dataclass(frozen=True, slots=True)
class Back:
    reason: str  # after its restart: a new process, ready


@dataclass(frozen=True, slots=True)
class AwaitQuorum:
    reason: str  # a restarted controller catching up with the quorum leader
    lag: int | None  # records behind the leader, when reported
    kind: ClassVar[str] = "quorum"


@dataclass(frozen=True, slots=True)
class AwaitIsr:
    reason: str  # a restarted broker not yet back in every ISR it was in before
    lagging: int  # partitions left (0: the cluster cannot be seen)
    already: str = ""  # at this look: what it was already out of before its restart
    kind: ClassVar[str] = "catch-up"


@dataclass(frozen=True, slots=True)
class Done:
    """Back where it was before its restart."""

    note: str = ""  # what it was already out of before its restart, if anything
    already: str = ""  # said at this look (the note, when it still holds)


Action = Restart | Defer | Fail | AwaitReady | AwaitRecovery | AwaitUnknown
AfterRestart = Back | Fail | AwaitReady | AwaitRecovery | AwaitUnknown


@dataclass(frozen=True, slots=True)
class Look:
    """One look judged by the rules, before it is turned into the node's `Outcome`: the action,
    the record for the next look (a pending node's without a wait, when nothing is waited
    for), `failure` when the node cannot go on (why, naming it: it is not restarted),
    `verdict` (its recovery's, with AwaitRecovery), `at_once`: look again now (a phase ended,
    a recovery ended)."""

    action: Action | AfterRestart | AwaitQuorum | AwaitIsr | Done
    record: NodeRecord
    failure: str | None = None
    verdict: Verdict | None = None
    at_once: bool = False
