"""What the controller does with a cluster now (pure, table-tested): one function of what it
saw, run whenever anything about the cluster changes; `reconciler.py` does the I/O.

In this order, each rule with its reason:

1. A StatefulSet whose updateStrategy is not OnDelete: Kubernetes itself restarts its pods,
   without rollguard's checks; a roll beside it would be a second roller on the same pods. It
   gets a warning, and nothing else is done with its cluster (`Ignore`).
2. A roll of the cluster runs in this process: it goes on (`Busy`); what changed meanwhile is
   looked at once it ends (a pod it restarts is made from the newest template anyway).
3. Settings that do not validate, or templates naming two Kafka versions: nothing is rolled,
   the reason is said (`Refuse`), and looked at again when anything changes.
4. The StatefulSet controller has not yet seen the last change (its update revision would be
   the old one), or no pod exists yet: wait for it (`Hold`).
5. The cluster's trigger (`clusters.trigger`) is the one last rolled to completion: nothing to
   do (`Idle`). The journal of the trigger's roll says completed: record it (`Done`).
6. A roll of this trigger that failed, or was refused, with the same settings: tried again
   after a backoff (1 min, doubling to 30 min), at once when a setting or the trigger changed.
7. Otherwise a roll (`Start`): resumed when its journal exists (a controller killed mid-roll,
   or a failed roll tried again: a node whose restart is on record is never restarted again),
   else a new one. A cluster seen for the first time is rolled too: with nothing to change it
   restarts nothing, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollguard.roller.controller.clusters import ClusterView, Trigger, roll_id
from rollguard.roller.controller.status import ControllerPhase, Status

__all__ = [
    "Busy",
    "Decision",
    "Done",
    "Hold",
    "Idle",
    "Ignore",
    "Refuse",
    "Seen",
    "Start",
    "backoff",
    "decide",
    "upgrade_target",
]

COMPLETED = "completed"  # RollState.COMPLETED: the journal of a roll that completed
FIRST_RETRY = 60.0
LONGEST_RETRY = 1800.0


@dataclass(frozen=True, slots=True)
class Seen:
    """What the reconciler saw of a cluster, and knows of it."""

    view: ClusterView
    trigger: Trigger
    status: Status | None  # its StatefulSets' annotation (None: never written)
    fingerprint: str  # the trigger's key and the settings: a refused roll is known by it
    # the state of the trigger's roll's journal (a `RollState`: its value), None: no journal
    journal: str | None = None
    running: bool = False  # a roll of the cluster runs in this process
    refused: str | None = None  # why its settings or versions cannot be rolled
    since: float | None = None  # when the status's phase began (POSIX seconds)
    now: float = 0.0


@dataclass(frozen=True, slots=True)
class Ignore:
    statefulsets: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Busy:
    pass


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str


@dataclass(frozen=True, slots=True)
class Hold:
    reason: str
    retry_at: float | None = None  # POSIX seconds; None: when something changes


@dataclass(frozen=True, slots=True)
class Idle:
    pass


@dataclass(frozen=True, slots=True)
class Done:
    roll_id: str


@dataclass(frozen=True, slots=True)
class Start:
    roll_id: str
    resume: bool
    why: str


Decision = Ignore | Busy | Refuse | Hold | Idle | Done | Start


def backoff(attempts: int) -> float:
    """Seconds before a refused or failed roll is tried again, after `attempts` tries."""
    return min(LONGEST_RETRY, FIRST_RETRY * 2.0 ** max(0, attempts - 1))


def decide(seen: Seen) -> Decision:
    view, status = seen.view, seen.status
    ignored = view.rolling_update()
    if ignored:
        return Ignore(tuple(ignored))
    if seen.running:
        return Busy()
    if seen.refused is not None:
        return Refuse(seen.refused)
    waiting = view.not_observed()
    if waiting:
        return Hold(
            f"the StatefulSet controller has not yet seen the last change of {', '.join(waiting)}"
        )
    if not view.pods:
        return Hold(f"cluster {view.name} has no pods yet")
    key = seen.trigger.key
    if status is not None and status.rolled == key:
        return Idle()
    rid = roll_id(view.name, key)
    if seen.journal == COMPLETED:
        return Done(rid)
    tried = status is not None and status.phase in (ControllerPhase.FAILED, ControllerPhase.REFUSED)
    if tried and status is not None and status.attempt == seen.fingerprint:
        retry_at = (seen.since or seen.now) + backoff(status.attempts)
        if seen.now < retry_at:
            return Hold(f"tried {status.attempts} time(s): {status.reason}", retry_at)
    resume = seen.journal is not None
    return Start(rid, resume, _why(view, status, seen.trigger, resume))


def upgrade_target(version: str | None, status: Status | None, resume: bool) -> str | None:
    """The `--kafka-version` of the cluster's next roll: the templates' version when it is not
    the one the last completed roll brought the cluster to (an upgrade, or a rollback: each
    restarted pod is verified on it). None otherwise: the roll's other changes (a template, a
    ConfigMap) are not held to a version, and a node already on the target would be left out of
    its configuration's change; none for a first look either (what the cluster ran before is
    not known), nor for a resumed roll (its journal keeps its own)."""
    if resume or version is None or status is None or not status.kafka_version:
        return None
    return version if version != status.kafka_version else None


def _why(view: ClusterView, status: Status | None, trigger: Trigger, resume: bool) -> str:
    if resume:
        return "resumed from its journal"
    if status is None or not status.rolled:
        return "first look at the cluster: its pods against their template and ConfigMaps"
    stale = view.out_of_date()
    if stale:
        return f"template changed: {', '.join(stale)} out of date"
    if trigger.configs:
        names = ", ".join(name for name, _ in trigger.configs)
        return f"the properties in ConfigMap {names} against what each broker runs"
    return f"changed: {trigger.describe()}"
