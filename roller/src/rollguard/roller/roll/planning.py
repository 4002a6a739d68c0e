"""A plan as data, for `rollguard plan` and for library users (an operator, a notebook).

`plan()` observes the cluster, the platform and the agents exactly as a roll does (through the
same `Observer`) and returns what a roll would do now, node by node in roll order, with the
reasons; it writes nothing (no journal, no events, no lease), so it is safe to call from a
reconcile loop as often as the cluster can bear the Admin API calls.

Each entry explains itself with the roll's own rules, never a copy of them: why the roll takes
the node or leaves it out (`taking.wanted`), its place in the order and why (`safety.roll_order`
and `order_reason`, or the batch it would restart in, `batch.plan_batches`), and what would hold
it now (`node_wait.decide`, and the `Blocker`s of `safety`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import AgentAnswer, ClusterView, Node, kafka_build
from rollguard.roller.platform import Platform
from rollguard.roller.roll.configs.live import NodeConfig
from rollguard.roller.roll.gates.keeper import Gates
from rollguard.roller.roll.gates.keeper import describe as describe_gates
from rollguard.roller.roll.observer import ClusterObserver, Observer
from rollguard.roller.roll.rules.batch import Held, batchable, plan_batches
from rollguard.roller.roll.rules.node_state import (
    Action,
    AwaitRecovery,
    AwaitUnknown,
    Defer,
    Fail,
    Restart,
)
from rollguard.roller.roll.rules.node_wait import agent_unknown, decide
from rollguard.roller.roll.rules.safety import Blocker, order_reason, roll_order
from rollguard.roller.roll.rules.settings import RollFailed, RollSettings
from rollguard.roller.roll.rules.taking import wanted
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.suggest import closest


@dataclass(frozen=True, slots=True)
class Hold:
    """What keeps a node from being restarted now, as the roll's decision says it.

    `kind`: `unsafe` (a safety rule: a partition's ISR, the quorum, a reassignment),
    `recovering` (log recovery, never interrupted), `not-ready`, `agent-unknown` (not ready, and
    its agent cannot say why), `gate` (safe, but a gate holds the whole roll: an alert, a
    consumer group's lag, outside every window, paused; each gate a blocker) or `fatal` (the
    roll would fail on it)."""

    kind: str
    reason: str
    blockers: tuple[Blocker, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`blockers`: the first BLOCKERS_SHOWN (a broker of a large cluster may have thousands
        of partitions at min ISR), `moreBlockers` how many more there are."""
        shown = self.blockers[:BLOCKERS_SHOWN]
        return {
            "kind": self.kind,
            "reason": self.reason,
            "blockers": [
                {"subject": b.subject, "reason": b.reason, "waitingOn": list(b.waiting_on)}
                for b in shown
            ],
            "moreBlockers": len(self.blockers) - len(shown),
        }


BLOCKERS_SHOWN = 20


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One line of `rollguard plan`: what a roll would do with a node now, and why."""

    node: Node
    action: str  # restart, configure (live), force-restart, defer, wait, fail, skip, hold
    reason: str
    batch: int | None = None  # with --max-batch-size above 1: the batch it would restart in
    rack: str | None = None  # the batch's one rack, when it has one
    why: str = ""  # why the roll takes the node, or leaves it out (`skip`)
    order: str = ""  # `place: why` in the roll order; "" for a node left out
    # 1, 2...: its place in the roll order (a batch's members share theirs); None: left out.
    # A place, not a schedule: a deferred node is passed by those after it, and tried again.
    position: int | None = None
    hold: Hold | None = None  # what would hold it now; None: nothing does, or it is left out
    # With a target version (--kafka-version): what its agent says it runs (None: not known),
    # and the target; both None otherwise.
    kafka_version: str | None = None
    target_kafka_version: str | None = None
    # With a desired configuration (an inventory's `config`/`config-command`): its changes.
    configs: NodeConfig | None = None

    def to_json(self) -> dict[str, Any]:
        entry = {
            "node": self.node.name,
            "nodeId": self.node.node_id,
            "roles": sorted(self.node.roles),
            "action": self.action,
            "reason": self.reason,
            "why": self.why,
            "position": self.position,
            "order": self.order or None,
            "hold": self.hold.to_json() if self.hold is not None else None,
        }
        if self.batch is not None:
            entry.update(batch=self.batch, rack=self.rack)
        if self.target_kafka_version is not None:
            entry.update(
                kafkaVersion=self.kafka_version, targetKafkaVersion=self.target_kafka_version
            )
        if self.configs is not None:
            entry.update(config=self.configs.to_json())
        return entry

    def versions(self) -> str:
        """`4.0.0 -> 4.4.0`, or the one version when it runs the target ("" without one)."""
        if self.target_kafka_version is None:
            return ""
        if self.kafka_version == self.target_kafka_version:
            return self.kafka_version
        return f"{self.kafka_version or '?'} -> {self.target_kafka_version}"

    def text(self) -> str:
        text = f"{self.action}: {self.reason}" if self.reason else self.action
        if self.batch is not None:
            where = f", rack {self.rack}" if self.rack is not None else ""
            text = f"batch {self.batch}{where}: {text}"
        return text


NAMES_SHOWN = 12  # node names listed in a message before "and N more"


HELD = "held with --hold: `rollguard roll --resume ID` without it takes it later"


def check_names(nodes: list[Node], settings: RollSettings) -> None:
    """ConfigError (exit 2, before anything is done) for a name in `--only`/`--skip`/`--hold`
    that no node has: it suggests the name meant, or lists the nodes there are."""
    known = sorted(n.name for n in nodes)
    names = (("--only", settings.only), ("--skip", settings.skip), ("--hold", settings.hold))
    for flag, given in names:
        unknown = sorted(given - set(known))
        if not unknown:
            continue
        what = f"{flag} {','.join(unknown)}: no such node{'s' if len(unknown) > 1 else ''}"
        meant = _meant(unknown[0], known) if len(unknown) == 1 else None
        if meant is not None:
            raise ConfigError(f"{what}; did you mean {meant}?")
        listed = ", ".join(known[:NAMES_SHOWN])
        if len(known) > NAMES_SHOWN:
            listed += f" and {len(known) - NAMES_SHOWN} more"
        raise ConfigError(f"{what} (the nodes are {listed or 'none'})")


def _meant(name: str, known: list[str]) -> str | None:
    """The node `name` was a typo of. Not one whose name differs only in its numbers:
    `kafka-9` for `kafka-0` is another node (one that was removed, say), not a typo."""
    typos = [k for k in known if _shape(k) != _shape(name) or k.lower() == name.lower()]
    return closest(name, typos)


def _shape(name: str) -> str:
    return "".join("#" if c.isdigit() else c for c in name.lower())


async def plan_with(
    observer: Observer, agents: AgentClient, settings: RollSettings, gates: Gates | None = None
) -> list[PlanEntry]:
    """What a roll would do now, in order, with the reason for each node; no action.
    RollFailed when the cluster cannot be observed: a plan without it would be a guess.
    `gates`: asked once; a closed one holds every node the roll would restart now."""
    nodes = await observer.nodes()
    check_names(nodes, settings)
    cluster = await observer.cluster()
    if cluster is None:
        raise RollFailed(
            "the Kafka Admin API cannot be reached: no plan can be made without the cluster"
        )
    views = await observer.views(nodes, cluster)
    ready = {n.node_id: views[n.name].ready for n in nodes}
    # An inventory has no revisions: every node of it is out of date, and the plan says why.
    revisions = getattr(observer.platform, "revisions", True)
    entries = []
    brokers: list[Node] = []
    reasons: dict[str, tuple[str, str]] = {}  # a batched broker's (why, order)
    target = settings.kafka_version
    answers: dict[str, AgentAnswer | None] = {}
    if target is not None:  # what each node runs, to compare with the target
        for node in nodes:
            answers[node.name] = await agents.ask(node)
    runs = {name: kafka_build(answer) for name, answer in answers.items()}
    for node in roll_order(nodes, ready, cluster.active_controller):
        view = views[node.name]
        running = runs.get(node.name)
        taken, why = wanted(node, view, settings, revisions=revisions, running=running)
        if not taken:
            entries.append(PlanEntry(node, "skip", why, why=why))
            continue
        if node.name in settings.hold:
            entries.append(PlanEntry(node, "hold", HELD, why=why))
            continue
        order = order_reason(node, view.ready, cluster.active_controller)
        if settings.max_batch_size > 1 and batchable(node, view):
            brokers.append(node)
            reasons[node.name] = why, order
            continue
        if view.ready:
            answer = None
        elif node.name in answers:
            answer = answers[node.name]
        else:
            answer = await agents.ask(node)
        action = decide(node, view, cluster, agent=answer, timeout=settings.operation_timeout)
        entries.append(replace(_entry(node, action, answer), why=why, order=order))
    if brokers:
        entries += _batches(brokers, cluster, settings, reasons)
    if target is not None:
        entries = [
            replace(
                e,
                kafka_version=running.version if (running := runs.get(e.node.name)) else None,
                target_kafka_version=target,
            )
            for e in entries
        ]
    closed = await gates.closed() if gates else []
    if closed:
        blockers = tuple(Blocker(c.reason, f"{c.kind} gate {c.name}", deficit=c.deficit)
                         for c in closed)  # fmt: skip
        gated = Hold("gate", describe_gates(closed), blockers)
        entries = [
            replace(e, hold=gated) if e.action in ("restart", "force-restart") else e
            for e in entries
        ]
    return numbered(entries)


def _batches(
    brokers: list[Node],
    cluster: ClusterView,
    settings: RollSettings,
    reasons: dict[str, tuple[str, str]],
) -> list[PlanEntry]:
    """The batches the ready brokers would restart in, each assumed back in sync before
    the next, and the ones held back now (waiting for the cluster), with the reasons."""
    batches, held = plan_batches(
        brokers, cluster, max_size=settings.max_batch_size, rack_aware=settings.rack_aware
    )
    entries = []
    for number, batch in enumerate(batches, 1):
        rack = f", rack {batch.rack}" if batch.rack is not None else ""
        order = f"batch {number}{rack}: {batch.reason}"
        for member in batch.members:
            why = reasons[member.name][0]
            entries.append(
                PlanEntry(member, "restart", batch.reason, number, batch.rack, why, order)
            )
    entries += [_held(h, *reasons[h.node.name]) for h in held]
    return entries


def _held(held: Held, why: str, order: str) -> PlanEntry:
    hold = Hold("unsafe", held.reason, held.blockers)
    return PlanEntry(held.node, "defer", held.reason, why=why, order=order, hold=hold)


def _entry(node: Node, action: Action, answer: AgentAnswer | None) -> PlanEntry:
    if isinstance(action, Restart):
        return PlanEntry(node, "force-restart" if action.force else "restart", action.reason)
    if isinstance(action, Defer):
        hold = Hold("unsafe", action.reason, action.blockers)
        return PlanEntry(node, "defer", action.reason, hold=hold)
    if isinstance(action, Fail):
        return PlanEntry(node, "fail", action.reason, hold=Hold("fatal", action.reason))
    if isinstance(action, AwaitRecovery):
        kind = "recovering"
    elif isinstance(action, AwaitUnknown) or agent_unknown(node, answer):
        kind = "agent-unknown"
    else:
        kind = "not-ready"
    return PlanEntry(node, "wait", action.reason, hold=Hold(kind, action.reason))


def numbered(entries: list[PlanEntry]) -> list[PlanEntry]:
    """Each taken node's place: one after the other, a batch's members together."""
    numbered, position, batch = [], 0, None
    for entry in entries:
        if entry.action in ("skip", "hold"):
            numbered.append(entry)
            continue
        if entry.batch is None or entry.batch != batch:
            position += 1
        batch = entry.batch
        numbered.append(replace(entry, position=position))
    return numbered


ACTIONS = (
    "restart",
    "configure",
    "force-restart",
    "defer",
    "wait",
    "fail",
    "hold",
    "skip",
)  # summary order


def plan_lines(entries: list[PlanEntry]) -> list[str]:
    """`rollguard plan`'s text: a summary line, a table (one row per node, in roll order), and
    what each place in the order means."""
    counts = Counter(e.action for e in entries)
    summary = ", ".join(f"{counts[a]} {a}" for a in ACTIONS if counts[a]) or "nothing"
    versions = any(e.target_kafka_version is not None for e in entries)
    rows = [["#", "NODE", "ROLE", *(["KAFKA"] if versions else []), "ACTION", "IN THE PLAN",
             "ORDER", "NOW"]]  # fmt: skip
    meanings: dict[str, str] = {}
    for e in entries:
        place, _, meaning = e.order.partition(": ")
        if place:
            meanings.setdefault(place, meaning)
        number = str(e.position) if e.position is not None else "-"
        kafka = [e.versions()] if versions else []
        rows.append([number, e.node.name, _role(e.node), *kafka, e.action, e.why, place or "-",
                     _now(e)])  # fmt: skip
    # Every column as wide as its widest cell, but the last: it may be long, and it wraps.
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [f"{len(entries)} node{'s' if len(entries) != 1 else ''}: {summary}"]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]))
    if meanings:
        lines += ["", *(f"{place}: {meaning}" for place, meaning in meanings.items())]
    configured = [e for e in entries if e.configs is not None]
    if configured:
        lines += ["", "Configuration: the desired file against what Kafka says each node runs"]
        for e in configured:
            assert e.configs is not None
            lines.append(f"{e.node.name}: {e.configs.summary()}")
            lines += [f"  {c.text()}" for c in e.configs.changes]
    return lines


def _role(node: Node) -> str:
    if node.is_broker and node.is_controller:
        return "combined"
    return "controller" if node.is_controller else "broker"


def _now(entry: PlanEntry) -> str:
    """What would hold it now, in a word or the roll's own reason."""
    if entry.hold is not None:
        return entry.hold.reason
    if entry.action == "skip":
        return "-"
    if entry.action in ("force-restart", "hold"):
        return entry.reason
    return "nothing holds it"


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
    without it would be a guess), and `ConfigError` for names in `settings.only`/`skip` that no
    node has.
    `policy` retries the Admin API's transient errors (default: `RetryPolicy()`)."""
    observer = Observer(platform, observe_cluster, EventLog(None, "plan"), policy=policy)
    return await plan_with(observer, agents, settings or RollSettings())
