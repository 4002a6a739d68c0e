"""A plan as data, for `rollguard plan` and for library users (an operator, a notebook).

A plan is the roll's own first look and first poll (`Roller.plan`), with their effects noted
here (`Planned`) instead of applied: the same observations, the same step of each node's record,
the same gates and batches, so that it says what a roll would do now, refusals included. It
writes nothing (no journal, no events, no lease), so it is safe to call from a reconcile loop as
often as the cluster can bear the Admin API calls. Where the roll stops at its first restart, a
plan goes on: every node's entry, every batch (each assumed back in sync before the next).

Each entry explains itself with the roll's own words: why the roll takes the node or leaves it
out (`node.taking`), its place in the order and why (`safety.roll_order` and `order_reason`, or
the batch it would restart in), and what would hold it now (its record's wait, and the
`Blocker`s of `safety`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rollguard.roller.model import ClusterView, Node, PlatformView
from rollguard.roller.roll.configs.live import NodeConfig
from rollguard.roller.roll.gates.keeper import Closed
from rollguard.roller.roll.gates.keeper import describe as describe_gates
from rollguard.roller.roll.node.outcome import Do, Effect
from rollguard.roller.roll.node.record import NodeRecord, Phase
from rollguard.roller.roll.node.taking import HELD
from rollguard.roller.roll.rules.batch import Batch
from rollguard.roller.roll.rules.safety import Blocker, order_reason, roll_order
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.errors import ConfigError
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


class Planned:
    """A plan's applier: what the roll's first look and poll would do, noted (see the module).
    The roll loop hands it each effect it would apply; `entries` is the plan."""

    dry = True

    def __init__(self) -> None:
        self._started: dict[str, tuple[str, str]] = {}  # name -> (action, reason): alone
        self._batches: list[Batch] = []
        self._failed: dict[str, str] = {}
        self._gated: dict[str, Hold] = {}
        self._candidates: list[str] = []  # brokers for a batch: their entries after the batches
        self._views: dict[str, PlatformView] = {}

    def saw(self, node: Node, view: PlatformView) -> None:
        self._views[node.name] = view

    def candidate(self, node: Node) -> None:
        self._candidates.append(node.name)

    async def leave_out(self, node: Node, why: str, roll: object, *, held: bool) -> None:
        """The plan shows it (its record says why)."""

    def fail(self, node: Node, reason: str) -> None:
        self._failed[node.name] = reason

    async def start(
        self,
        members: Sequence[Node],
        views: object,
        cluster: object,
        roll: object,
        effect: Effect,
        batch: Batch | None = None,
    ) -> None:
        """Noted, not begun: the roll goes on looking as if it had not restarted it."""
        self.started(members, effect, batch)

    def started(self, members: Sequence[Node], effect: Effect, batch: Batch | None) -> None:
        if batch is not None:
            self._batches.append(batch)
            return
        action = {Do.CONFIGURE: "configure"}.get(effect.do, "restart")
        if effect.force:
            action = "force-restart"
        self._started[members[0].name] = action, effect.reason

    def gated(self, node: Node, effect: Effect, closed: Sequence[Closed]) -> None:
        blockers = tuple(
            Blocker(c.reason, f"{c.kind} gate {c.name}", deficit=c.deficit) for c in closed
        )
        self._gated[node.name] = Hold("gate", describe_gates(closed), blockers)
        if effect.do is Do.BATCH or node.name in self._candidates:
            return
        self.started([node], effect, None)

    def entries(
        self,
        nodes: Sequence[Node],
        records: Mapping[str, NodeRecord],
        cluster: ClusterView,
        settings: RollSettings,
    ) -> list[PlanEntry]:
        """Each node's entry, in roll order: those the roll restarts alone, waits for, defers,
        fails on or leaves out, then its batches and the brokers no batch takes now."""
        ready = {n.node_id: self._ready(n) for n in nodes}
        entries, later = [], []
        for node in roll_order(nodes, ready, cluster.active_controller):
            record = records[node.name]
            order = order_reason(node, ready[node.node_id], cluster.active_controller)
            entry = self._entry(node, record)
            if entry.action not in ("skip", "hold"):
                entry = replace(entry, order=order)
            if node.name in self._candidates:
                later.append(entry)
            else:
                entries.append(entry)
        for number, batch in enumerate(self._batches, 1):
            rack = f", rack {batch.rack}" if batch.rack is not None else ""
            order = f"batch {number}{rack}: {batch.reason}"
            for member in batch.members:
                why = records[member.name].why
                entries.append(
                    PlanEntry(
                        member,
                        "restart",
                        batch.reason,
                        number,
                        batch.rack,
                        why,
                        order,
                        hold=self._gated.get(member.name),
                    )
                )
        batched = {m.name for b in self._batches for m in b.members}
        entries += [e for e in later if e.node.name not in batched]
        if settings.kafka_version is not None:
            entries = [
                replace(
                    e,
                    kafka_version=records[e.node.name].kafka_version,
                    target_kafka_version=settings.kafka_version,
                )
                for e in entries
            ]
        return numbered(entries)

    def _ready(self, node: Node) -> bool:
        view = self._views.get(node.name)
        return view is not None and view.ready

    def _entry(self, node: Node, record: NodeRecord) -> PlanEntry:
        why, name = record.why, node.name
        if record.phase is Phase.LEFT_OUT:
            return PlanEntry(node, "skip", why, why=why)
        if record.phase is Phase.HELD:
            return PlanEntry(node, "hold", HELD, why=why)
        if name in self._failed:
            reason = self._failed[name]
            return PlanEntry(node, "fail", reason, why=why, hold=Hold("fatal", reason))
        if name in self._started:
            action, reason = self._started[name]
            return PlanEntry(node, action, reason, why=why, hold=self._gated.get(name))
        waiting = record.waiting
        if waiting is None:  # a broker for a batch that the batch rule did not reach
            return PlanEntry(node, "restart", "restart", why=why)
        if waiting.deferral:
            hold = Hold("unsafe", waiting.reason, waiting.blockers)
            return PlanEntry(node, "defer", waiting.reason, why=why, hold=hold)
        kind = {"recovery": "recovering", "agent-unreachable": "agent-unknown"}.get(
            waiting.kind, "agent-unknown" if waiting.unknown else "not-ready"
        )
        return PlanEntry(node, "wait", waiting.reason, why=why, hold=Hold(kind, waiting.reason))


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
    rows = [
        [
            "#",
            "NODE",
            "ROLE",
            *(["KAFKA"] if versions else []),
            "ACTION",
            "IN THE PLAN",
            "ORDER",
            "NOW",
        ]
    ]
    meanings: dict[str, str] = {}
    for e in entries:
        place, _, meaning = e.order.partition(": ")
        if place:
            meanings.setdefault(place, meaning)
        number = str(e.position) if e.position is not None else "-"
        kafka = [e.versions()] if versions else []
        rows.append(
            [number, e.node.name, _role(e.node), *kafka, e.action, e.why, place or "-", _now(e)]
        )
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
