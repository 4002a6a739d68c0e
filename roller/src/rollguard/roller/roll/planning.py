"""A plan as data, for `rollguard plan` and for library users (an operator, a notebook).

`plan()` observes the cluster, the platform and the agents exactly as a roll does (through the
same `Observer`) and returns what a roll would do now, node by node in roll order, with the
reasons; it writes nothing (no journal, no events, no lease), so it is safe to call from a
reconcile loop as often as the cluster can bear the Admin API calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import ClusterView, Node
from rollguard.roller.platform import Platform
from rollguard.roller.roll.batch import batchable, plan_batches
from rollguard.roller.roll.decide import Action, Defer, Fail, Restart, decide, wanted
from rollguard.roller.roll.journal import EventLog
from rollguard.roller.roll.observer import ClusterObserver, Observer
from rollguard.roller.roll.safety import roll_order
from rollguard.roller.roll.settings import RollFailed, RollSettings
from rollguard.shared.retry import RetryPolicy


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One line of `rollguard plan`: what a roll would do with a node now, and why."""

    node: Node
    action: str  # restart, force-restart, defer, wait, fail, skip
    reason: str
    batch: int | None = None  # with --max-batch-size above 1: the batch it would restart in
    rack: str | None = None  # the batch's one rack, when it has one

    def to_json(self) -> dict[str, Any]:
        entry = {
            "node": self.node.name,
            "nodeId": self.node.node_id,
            "roles": sorted(self.node.roles),
            "action": self.action,
            "reason": self.reason,
        }
        if self.batch is not None:
            entry.update(batch=self.batch, rack=self.rack)
        return entry

    def text(self) -> str:
        text = f"{self.action}: {self.reason}" if self.reason else self.action
        if self.batch is not None:
            where = f", rack {self.rack}" if self.rack is not None else ""
            text = f"batch {self.batch}{where}: {text}"
        return text


def check_names(nodes: list[Node], settings: RollSettings) -> None:
    """RollFailed for names in `--only`/`--skip` that no node has."""
    known = {n.name for n in nodes}
    unknown = sorted((settings.only | settings.skip) - known)
    if unknown:
        raise RollFailed(
            f"no node named {', '.join(unknown)} (the nodes are {', '.join(sorted(known))})"
        )


async def plan_with(observer: Observer, settings: RollSettings) -> list[PlanEntry]:
    """What a roll would do now, in order, with the reason for each node; no action.
    RollFailed when the cluster cannot be observed: a plan without it would be a guess."""
    nodes = await observer.nodes()
    check_names(nodes, settings)
    cluster = await observer.cluster()
    if cluster is None:
        raise RollFailed(
            "the Kafka Admin API cannot be reached: no plan can be made without the cluster"
        )
    views = await observer.views(nodes, cluster)
    ready = {n.node_id: views[n.name].ready for n in nodes}
    entries = []
    brokers: list[Node] = []
    for node in roll_order(nodes, ready, cluster.active_controller):
        taken, why = wanted(node, views[node.name], settings)
        if not taken:
            entries.append(PlanEntry(node, "skip", why))
            continue
        if settings.max_batch_size > 1 and batchable(node, views[node.name]):
            brokers.append(node)
            continue
        answer = None if views[node.name].ready else await observer.ask(node, log=False)
        action = decide(
            node, views[node.name], cluster, agent=answer, timeout=settings.operation_timeout
        )
        entries.append(_entry(node, action))
    if brokers:
        entries += _batches(brokers, cluster, settings)
    return entries


def _batches(brokers: list[Node], cluster: ClusterView, settings: RollSettings) -> list[PlanEntry]:
    """The batches the ready brokers would restart in, each assumed back in sync before
    the next, and the ones held back now (waiting for the cluster), with the reasons."""
    batches, held = plan_batches(
        brokers, cluster, max_size=settings.max_batch_size, rack_aware=settings.rack_aware
    )
    entries = [
        PlanEntry(member, "restart", batch.reason, number, batch.rack)
        for number, batch in enumerate(batches, 1)
        for member in batch.members
    ]
    entries += [PlanEntry(h.node, "defer", h.reason) for h in held]
    return entries


def _entry(node: Node, action: Action) -> PlanEntry:
    if isinstance(action, Restart):
        return PlanEntry(node, "force-restart" if action.force else "restart", action.reason)
    if isinstance(action, Defer):
        return PlanEntry(node, "defer", action.reason)
    if isinstance(action, Fail):
        return PlanEntry(node, "fail", action.reason)
    return PlanEntry(node, "wait", action.reason)


async def plan(
    platform: Platform,
    observe_cluster: ClusterObserver,
    agents: AgentClient,
    settings: RollSettings | None = None,
    *,
    policy: RetryPolicy | None = None,
) -> list[PlanEntry]:
    """What a roll with `settings` would do now, node by node in roll order, with reasons.

    `observe_cluster` is a `KafkaObserver(...).observe`; `agents` an `AgentClient` with the
    roller's client certificate. Raises `RollFailed` when the cluster cannot be observed (a plan
    without it would be a guess) and for names in `settings.only`/`skip` that no node has.
    `policy` retries the Admin API's transient errors (default: `RetryPolicy()`)."""
    observer = Observer(platform, observe_cluster, agents, EventLog(None, "plan"), policy=policy)
    return await plan_with(observer, settings or RollSettings())
