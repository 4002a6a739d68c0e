"""What to do with one node, as a pure function of what was observed (table-tested).

The roll loop (`rollguard.roller.roll.roller`) does the I/O around it: it observes, asks
`decide`, carries the action out, and asks again at every poll with what it learnt (the
platform, the agent's answer, how long it has waited). Nothing here imports a network library.

The rules for a node that is not ready, in order:
1. stuck (a pod that waiting will not cure): restart it if a new revision is the cure, else fail;
2. its agent reports log recovery (figures in STARTING or RECOVERY, or RECOVERY): never
   restart it (that would start the recovery over), wait;
3. within the operation timeout, counted from the last progress seen (`budgets.ReadyWait`: a
   new process, a BrokerState further on, a recovery that ended): wait (and show what the agent
   says, from the first poll);
4. past it, the agent readable and the broker not recovering: force-restart (Strimzi's rule);
5. past it, the agent unreadable: the state is *unknown*, not "not recovering". Force only when
   the platform proves the broker process is gone, or with `--on-agent-unreachable force`;
   otherwise wait within the safety budget.
A ready node is restarted when no safety rule blocks it, else deferred.

After its restart (`after_restart`), a node is back once a new process (by identity) is ready;
until then its log recovery is waited for, never restarted; past the operation timeout (again
counted from the last progress: a recovery of hours ends, the broker takes seconds more to
register, and that is not a failure) a readable agent (or a gone process) fails the roll: it
was restarted once and is not restarted again; an unreadable one is unknown and waited for
within the safety budget.

Which nodes a roll takes (`wanted`): not those named by `--skip` or opted out by annotation;
with `--only`, exactly those named; else those out of date or stuck (all with `--all`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from rollguard.roller.model import (
    BROKER_STATE_MISSING,
    AgentAnswer,
    AgentReport,
    AgentUnavailable,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
    is_starting,
    kafka_build,
)
from rollguard.roller.roll.rules.safety import Blocker, describe_blockers, restart_blockers
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.converters import format_duration
from rollguard.shared.wire import LOADING_STATES, KafkaBuild

__all__ = [
    "Action",
    "AwaitReady",
    "AwaitRecovery",
    "AwaitUnknown",
    "Back",
    "Defer",
    "DeferKind",
    "Fail",
    "Restart",
    "after_restart",
    "agent_unknown",
    "decide",
    "held_by_recovery",
    "wanted",
]


FORCE = "force"  # how every forced restart's reason begins: the events tell them by it
NO_REVISION = "inventory (no revision to compare)"  # why an inventory's node is taken
UP_TO_DATE = "already runs the desired revision"  # why a pod is not: its ConfigMap may say


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


Action = Restart | Defer | Fail | AwaitReady | AwaitRecovery | AwaitUnknown
AfterRestart = Back | Fail | AwaitReady | AwaitRecovery | AwaitUnknown


def wanted(
    node: Node,
    view: PlatformView,
    settings: RollSettings,
    *,
    revisions: bool = True,
    running: KafkaBuild | None = None,
) -> tuple[bool, str]:
    """Whether a roll takes `node`, and why (or why not). `revisions`: the platform knows which
    revision a node should run (Kubernetes); an inventory does not, so it has every node out of
    date at every roll, and the reason says so. With a target version (`--kafka-version`),
    `running` (what its agent says it runs; None: not known) decides for a node whose platform
    has nothing newer for it: one already on the target is left out, one not known to be is
    taken (its restart shows what it runs)."""
    if node.name in settings.skip:
        return False, "skipped with --skip"
    if view.opted_out:
        return False, "opted out by annotation"
    if settings.only:
        named = node.name in settings.only
        return named, "named by --only" if named else "not named by --only"
    if view.stuck:
        return True, f"stuck ({view.stuck})"
    target = settings.kafka_version
    if not view.up_to_date and (revisions or target is None):
        return True, "outdated pod revision" if revisions else NO_REVISION
    if target is not None and (running is None or running.version != target):
        runs = f"runs Kafka {running.version}" if running else "its Kafka version is not known"
        return True, f"{runs}; the target is {target}"
    if settings.all_nodes:
        return True, "--all"
    if target is not None:
        return False, f"already runs Kafka {target}"
    return False, UP_TO_DATE


def agent_unknown(node: Node, answer: AgentAnswer | None) -> bool:
    """True when the agent's answer says nothing about the broker: no agent, no HTTP answer,
    or an error other than a controller-only node's expected `broker-state-missing`."""
    if answer is None:
        return True
    if isinstance(answer, AgentReport):
        return False
    return not (answer.reason == BROKER_STATE_MISSING and not node.is_broker)


def decide(
    node: Node,
    view: PlatformView,
    cluster: ClusterView | None,
    *,
    agent: AgentAnswer | None = None,
    waited: float = 0.0,
    timeout: float = 300.0,
    force_unknown: bool = False,
    since: str = "it was found not ready",
) -> Action:
    """The next action for a node that needs a restart.

    `agent`: what its agent said at this poll (None: no agent, or not asked); `waited`: seconds
    the node has been waited for without becoming ready since its last progress (`since` says
    what that was); `timeout`: the operation timeout; `force_unknown`: `--on-agent-unreachable
    force`.
    """
    if view.stuck:
        if view.up_to_date:
            return Fail(
                f"{node.name} is stuck ({view.stuck}) and already runs the desired "
                "revision: restarting it will not help"
            )
        return Restart(f"{FORCE}: stuck in {view.stuck}", force=True)
    if not view.ready:
        # Never restart a broker in log recovery: that would start the recovery over.
        if is_recovering(agent):
            return AwaitRecovery(
                f"{node.name} is performing log recovery: {describe_answer(agent)}"
            )
        if waited < timeout:
            starting = (
                isinstance(agent, AgentReport) and agent.report.broker_state in LOADING_STATES
            )
            return AwaitReady(
                f"{node.name} is not ready; agent: {describe_answer(agent)}", starting=starting
            )
        if not agent_unknown(node, agent):
            return Restart(
                f"{FORCE}: not ready after {timeout:g}s (since {since}); agent: "
                f"{describe_answer(agent)}",
                force=True,
            )
        if view.process_gone:
            return Restart(
                f"{FORCE}: not ready after {timeout:g}s and the platform shows its process is "
                f"gone; agent: {describe_answer(agent)}",
                force=True,
            )
        if force_unknown:
            return Restart(
                f"{FORCE} (--on-agent-unreachable force): not ready after {timeout:g}s; "
                f"agent: {describe_answer(agent)}",
                force=True,
            )
        return AwaitUnknown(
            f"{node.name} is not ready and its agent cannot be read "
            f"({_unavailable(agent)}): its broker may be recovering, so it is not restarted"
        )
    blockers = restart_blockers(node, cluster)
    if blockers:
        return Defer(describe_blockers(blockers), tuple(blockers))
    return Restart("restart")


def held_by_recovery(recovering: list[str], starting: Sequence[str] = ()) -> Defer:
    """A node that could be restarted, while other nodes of the roll are in log recovery, or
    starting (STARTING or RECOVERY after it: fenced, out of its ISRs): it waits for them. A
    recovering broker is out of its ISRs, and its recovery needs the cluster as it is (the
    controllers it registers with, the replicas it will fetch from): restarting anything else
    meanwhile is a second change on a cluster already short."""
    said = []
    for names, what in ((recovering, "in log recovery"), (starting, "starting")):
        if names:
            said.append(f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {what}")
    blocker = Blocker(
        f"{' and '.join(said)}: no other node is restarted until it is back", "recovery"
    )
    return Defer(blocker.reason, (blocker,))


def _unavailable(answer: AgentAnswer | None) -> str:
    if isinstance(answer, AgentUnavailable):
        return answer.describe()  # with the agent's URL, as every message about an agent
    return describe_answer(answer)


def after_restart(
    node: Node,
    view: PlatformView,
    agent: AgentAnswer | None,
    *,
    before: str | None,
    waited: float,
    timeout: float,
    since: str = "its restart",
    target: str | None = None,
) -> AfterRestart:
    """Where a restarted node stands: `before` is its identity before the restart (None: not
    known, any ready process will do); `waited`: seconds since its last progress, and `since`
    what that was (`budgets.ReadyWait`: the restart, a new process, a BrokerState further on,
    the end of its log recovery)."""
    if is_recovering(agent):
        return AwaitRecovery(f"{node.name} is performing log recovery: {describe_answer(agent)}")
    new = before is None or (view.instance is not None and view.instance != before)
    # A platform may call a controller ready (a pod whose port accepts, a voter caught up) while
    # its agent still sees the server starting: not back until its start is over.
    if view.ready and new and not is_starting(agent):
        # Its new process by identity, or only by readiness (a controller-only node has none:
        # an answer about the old process may still be on its way).
        proven = before is not None and view.instance is not None
        return _on_target(node, agent, target, waited, timeout, proven=proven)
    if waited >= timeout:
        if not agent_unknown(node, agent) or view.process_gone:
            return Fail(
                f"{node.name} is not ready {format_duration(timeout)} after {since} (agent: "
                f"{describe_answer(agent)}); it was restarted once in this roll and is not "
                "restarted again"
            )
        return AwaitUnknown(
            f"{node.name} is not ready after its restart and its agent cannot be read "
            f"({describe_answer(agent)})"
        )
    if new:
        return AwaitReady(f"waiting for readiness: {describe_answer(agent)}")
    # The process from before the restart is still the one that answers.
    return AwaitReady("waiting for the new process to start")


def _on_target(
    node: Node,
    agent: AgentAnswer | None,
    target: str | None,
    waited: float,
    timeout: float,
    *,
    proven: bool,
) -> AfterRestart:
    """A restarted node ready again is back if it runs the roll's target version (if any): one
    back on another version (binaries not switched, the wrong image) stops the roll before the
    next node; one whose agent has not said yet is waited for within the operation timeout. On
    another version without `proven` (its new process not told by identity, as a controller-only
    node's is not): waited for too, the old process's last answer may still be what its agent
    says; another version at the operation timeout is the same failure."""
    running = kafka_build(agent)
    if target is None or (running is not None and running.version == target):
        on = f" on Kafka {target}" if target is not None else ""
        return Back(f"{node.name} is ready again{on}")
    if running is not None and (proven or waited >= timeout):
        return Fail(
            f"{node.name} came back on Kafka {running.version}, not on the target {target}: "
            "its binaries or image were not switched; the roll stops before the next node",
            again=True,
        )
    if running is not None:
        return AwaitReady(
            f"{node.name} says Kafka {running.version}, not yet the target {target}: waiting "
            "for its new process to say"
        )
    if waited >= timeout:
        return Fail(
            f"{node.name} is ready again but has not said which Kafka it runs "
            f"{format_duration(timeout)} after its restart (agent: {describe_answer(agent)}); "
            f"the target is {target}: not going on without seeing it"
        )
    return AwaitReady(f"{node.name} is ready; waiting for its agent to say which Kafka it runs")
