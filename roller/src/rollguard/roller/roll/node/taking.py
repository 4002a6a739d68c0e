"""Which nodes a roll takes, and what holds one back that the rules would restart (pure,
table-tested).

Which nodes a roll takes (`wanted`): not those named by `--skip` or opted out by annotation;
with `--only`, exactly those named; else those out of date or stuck (all with `--all`, whatever
their desired configuration says); with a target version (`--kafka-version`), those not known to
run it. With a desired configuration, a node taken for no other reason than an inventory's (no
revision) or left out as up to date is taken for its configuration's changes (`take`), live
where Kafka allows. `--hold` keeps a taken node for later. With a target version, a node whose
version was not known when it was taken (not started yet) is looked at again just before its
restart (`recheck`). A node the rules would restart waits while another node of the roll is in
log recovery or starting (`held_by_recovery`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rollguard.roller.model import Node, PlatformView
from rollguard.roller.roll.node.actions import Defer
from rollguard.roller.roll.node.outcome import Do, Effect, Outcome, Seen
from rollguard.roller.roll.node.record import NodeRecord, Phase
from rollguard.roller.roll.rules.safety import Blocker
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.wire import KafkaBuild

__all__ = ["HELD", "NO_REVISION", "UP_TO_DATE", "held_by_recovery", "recheck", "take", "wanted"]

NO_REVISION = "inventory (no revision to compare)"  # why an inventory's node is taken
UP_TO_DATE = "already runs the desired revision"  # why a pod is not: its ConfigMap may say
HELD = "held with --hold: `rollguard roll --resume ID` without it takes it later"


def take(record: NodeRecord, seen: Seen, s: RollSettings) -> Outcome:
    """A node's first look in a roll: taken (pending), left out, or held for later, on record
    with why. `seen.running`: what its agent says it runs (asked with a target version)."""
    assert seen.view is not None
    taken, why = wanted(seen.node, seen.view, s, revisions=seen.revisions, running=seen.running)
    plan, live_only = seen.config, False
    if plan is not None and why in (NO_REVISION, UP_TO_DATE):  # its configuration decides
        taken, why = plan.changes, plan.why()
        live_only = taken and not plan.restart  # else restarted, its live keys set first
    record = replace(
        record,
        at=seen.wall,
        why=why,
        kafka_version=seen.running.version if seen.running is not None else None,
        version_unknown=taken and s.kafka_version is not None and seen.running is None,
        live_only=live_only,
    )
    if not taken:
        return Outcome(replace(record, phase=Phase.LEFT_OUT), Effect(Do.LEAVE_OUT, why))
    if seen.unknown is not None and seen.node.is_broker:
        reason = (
            f"{seen.node.name}: its desired configuration cannot be compared with what it runs "
            f"({seen.unknown}); not rolling: which of its changes need a restart is not known"
        )
        return Outcome(
            replace(record, phase=Phase.FAILED, reason=reason), Effect(Do.FAIL_ROLL, reason)
        )
    if seen.refused is not None:
        refused = seen.refused  # naming the node, its key and how to remove what is in the way
        return Outcome(
            replace(record, phase=Phase.FAILED, reason=refused), Effect(Do.REFUSE, refused)
        )
    if seen.node.name in s.hold:
        return Outcome(replace(record, phase=Phase.HELD), Effect(Do.HOLD, HELD))
    return Outcome(replace(record, phase=Phase.PENDING), Effect(Do.TAKE))


def recheck(record: NodeRecord, seen: Seen, s: RollSettings) -> str | None:
    """A node about to be restarted that the roll took without knowing what it ran (not started
    at the roll's start: its agent says its version once it has): why it is left out now, as
    those known to run the target were (None: it is restarted)."""
    if not record.version_unknown:
        return None
    assert seen.view is not None
    taken, why = wanted(seen.node, seen.view, s, revisions=seen.revisions, running=seen.running)
    return None if taken else why


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
        if revisions:
            return True, "outdated pod revision"
        # An inventory's node, taken at every roll: with --all whatever its desired
        # configuration says (without it, its configuration may leave it out: `take`).
        return True, "--all" if settings.all_nodes else NO_REVISION
    if target is not None and (running is None or running.version != target):
        runs = f"runs Kafka {running.version}" if running else "its Kafka version is not known"
        return True, f"{runs}; the target is {target}"
    if settings.all_nodes:
        return True, "--all"
    if target is not None:
        return False, f"already runs Kafka {target}"
    return False, UP_TO_DATE


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
