"""Which nodes a roll takes, and what holds one back that the rules would restart (pure,
table-tested).

Which nodes a roll takes (`wanted`): not those named by `--skip` or opted out by annotation;
with `--only`, exactly those named; else those out of date or stuck (all with `--all`); with a
target version (`--kafka-version`), those not known to run it. A node the rules would restart
waits while another node of the roll is in log recovery or starting (`held_by_recovery`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rollguard.roller.model import Node, PlatformView
from rollguard.roller.roll.rules.node_state import Defer
from rollguard.roller.roll.rules.safety import Blocker
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.wire import KafkaBuild

__all__ = ["NO_REVISION", "UP_TO_DATE", "held_by_recovery", "wanted"]

NO_REVISION = "inventory (no revision to compare)"  # why an inventory's node is taken
UP_TO_DATE = "already runs the desired revision"  # why a pod is not: its ConfigMap may say


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
