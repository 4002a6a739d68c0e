"""The roll's Prometheus metrics (`--metrics-listen`): what a scrape shows, and what feeds it.

Nothing here looks at the cluster a second time: the metrics are what the roll itself says and
holds, rendered when Prometheus asks, from their own registry (never the process's global one).

- each node's record (`node.record.NodeRecord`), the very one the roll moves, from the roll
  journal the roll saves (`WatchedJournal`: the roll's record, whose nodes the loop keeps up to
  date): which nodes are done, skipped, held or restarting (a resumed roll's earlier ones
  included), what each waits for and since when (the roll's clock, which the metrics share),
  the recovery figures of a node in log recovery;
- every event of the roll (`EventLog.listeners`): restarts and deferrals counted, the gates,
  the prediction, the roll's start and end;
- the lease as the roll takes, renews and gives it up (`WatchedLease`).

Both wrappers do what the object they wrap does, no more. Labels stay bounded: reasons are the
small fixed sets below (never a reason's text), nodes are the cluster's, gates the ones given.

They are served by `metrics_server.MetricsServer` while the roll runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rollguard.roller.roll.canary.metrics import CanaryMetrics
from rollguard.roller.roll.node.actions import AwaitReady, AwaitRecovery, AwaitUnknown, DeferKind
from rollguard.roller.roll.node.record import How, NodeRecord, Phase
from rollguard.roller.roll.node.speech import CATCH_UP, RESTARTED
from rollguard.roller.roll.stores.journal import JournalStore, RollRecord
from rollguard.roller.roll.stores.lease import Lease
from rollguard.roller.roll.voice import EventLog
from rollguard.roller.roll.watched import WatchedJournal, WatchedLease
from rollguard.shared.dataset import ROLL_OUTCOMES, Event

__all__ = ["RollMetrics", "WatchedJournal", "WatchedLease"]

# What a node waits for, a label (its record's `waiting.kind`): before its restart (its
# readiness, its agent, its recovery, a safety rule by kind), then after it (`restart`: its new
# process not yet ready; its recovery; `catch-up`: back into the quorum and its partitions'
# ISRs). Never rename one: dashboards and alerts use them.
WAIT_REASONS = (
    AwaitReady.kind,
    AwaitUnknown.kind,
    AwaitRecovery.kind,
    *(k.value for k in DeferKind),
    RESTARTED,
    CATCH_UP,
)
_DEFER_KINDS = frozenset(k.value for k in DeferKind)
NODE_STATES = ("total", "done", "configured", "skipped", "held", "pending", "restarting", "waiting")


class RollMetrics(Collector):
    """One roll's metrics: `on_event` is the event log's listener; `collect` renders them."""

    def __init__(
        self,
        roll_id: str,
        cluster: str | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: the roll's own (its records' waits are on it)."""
        self.roll_id = roll_id
        self.cluster = cluster or ""
        self.registry = CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._lock = threading.Lock()  # events may come from a worker thread (journal saves)
        self._nodes: tuple[str, ...] = ()
        self._roll: RollRecord | None = None  # the roll's record, its nodes' as the loop moves them
        self._restarts = 0
        self._forced = 0
        self._configured = 0  # live configuration steps
        self._deferrals = dict.fromkeys(sorted(_DEFER_KINDS), 0)
        self._gates: set[tuple[str, str]] = set()
        self._predicted: tuple[float, float | None] | None = None
        self._started: float | None = None
        self._took: float | None = None  # the roll's own figure, once it ended
        self._lease: WatchedLease | None = None
        self._budget: Callable[[str], float] | None = None
        self._canary = CanaryMetrics()  # --canary: each window's figures
        self.registry.register(self)

    # ---- what feeds it ------------------------------------------------------------------------

    def watch(
        self, events: EventLog, journal: JournalStore, lease: Lease
    ) -> tuple[WatchedJournal, WatchedLease]:
        """Listen to `events`; the journal and the lease to give the roll in place of these."""
        events.listeners.append(self.on_event)
        self._lease = WatchedLease(lease, clock=self._clock)
        return WatchedJournal(journal, self.saved), self._lease

    def follow(self, nodes: Iterable[str], budget: Callable[[str], float] | None = None) -> None:
        """The roll's nodes (`total`), and each node's recovery budget (read at each scrape)."""
        with self._lock:
            self._nodes = tuple(nodes)
            self._budget = budget

    def saved(self, record: RollRecord) -> None:
        """The roll's record, as saved: the metrics read its nodes' records, kept up to date by
        the roll loop, at every scrape."""
        with self._lock:
            self._roll = record

    def _records(self) -> list[NodeRecord]:
        return list(self._roll.nodes.values()) if self._roll is not None else []

    def on_event(self, entry: Mapping[str, Any]) -> None:
        with self._lock:
            self._on_event(entry)

    def _on_event(self, entry: Mapping[str, Any]) -> None:
        action = entry.get("action")
        if self._canary.heard(entry):
            return
        if action == Event.ROLL_PREDICTED:
            seconds = _number(entry.get("seconds"))
            if seconds is not None:
                self._predicted = (seconds, _number(entry.get("upperSeconds")))
        elif action == Event.ROLL_START:
            self._started, self._took = self._clock(), None
        elif action in ROLL_OUTCOMES:
            self._took = _number(entry.get("seconds"))  # nothing waits once the roll is over
        elif action == Event.GATE_CLOSED:
            self._gates.add((str(entry.get("gate", "")), str(entry.get("name", ""))))
        elif action == Event.GATE_OPEN:
            self._gates.clear()  # said once every gate is open again
        elif action == Event.DEFER and not entry.get("repeated"):
            kind = str(entry.get("kind", DeferKind.OTHER))
            self._deferrals[kind if kind in _DEFER_KINDS else DeferKind.OTHER] += 1
        elif action == Event.RESTART:
            self._restarts += 1
            self._forced += entry.get("forced") is True
        elif action == Event.CONFIGURE:
            self._configured += 1

    def _waiting_now(self) -> dict[str, NodeRecord]:
        """Each node waited for now (none once the roll is over), by name."""
        if self._took is not None:
            return {}
        return {r.name: r for r in self._records() if r.waiting is not None}

    # ---- what Prometheus reads ----------------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        with self._lock:  # whole before the first is rendered: a consistent scrape
            families = list(self._collect(self._clock()))
        yield from families

    def _collect(self, now: float) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "rollguard_roll_info",
            "The roll being run: its id and cluster",
            labels=["roll_id", "cluster"],
        )
        info.add_metric([self.roll_id, self.cluster], 1)
        yield info
        yield self._node_counts()
        by_reason = GaugeMetricFamily(
            "rollguard_roll_waiting_nodes",
            "Nodes waited for now, by what they wait for",
            labels=["reason"],
        )
        waiting = self._waiting_now()
        for reason in WAIT_REASONS:
            count = sum(1 for r in waiting.values() if r.waiting and r.waiting.kind == reason)
            by_reason.add_metric([reason], count)
        yield by_reason
        yield from self._waiting(now)
        yield CounterMetricFamily(
            "rollguard_roll_restarts", "Restarts begun by this roller process", value=self._restarts
        )
        yield CounterMetricFamily(
            "rollguard_roll_live_configurations",
            "Live configuration steps begun by this roller process (a node changed with "
            "IncrementalAlterConfigs, not restarted; or its live keys set before its restart)",
            value=self._configured,
        )
        yield CounterMetricFamily(
            "rollguard_roll_forced_restarts",
            "Restarts begun without the safety checks (stuck, or not ready past the timeout)",
            value=self._forced,
        )
        deferrals = CounterMetricFamily(
            "rollguard_roll_deferrals",
            "Times a node was held back for a new reason, by kind",
            labels=["reason"],
        )
        for kind, count in self._deferrals.items():
            deferrals.add_metric([kind], count)
        yield deferrals
        gates = GaugeMetricFamily(
            "rollguard_roll_gate_closed",
            "1 while a gate holds the roll (until every gate is open again)",
            labels=["gate", "name"],
        )
        for gate, name in sorted(self._gates):
            gates.add_metric([gate, name], 1)
        yield gates
        yield from self._timing(now)
        yield from self._canary.collect()

    def _node_counts(self) -> Metric:
        records = self._records()
        names = set(self._nodes) | {r.name for r in records}
        done = sum(1 for r in records if r.phase is Phase.DONE)
        configured = sum(1 for r in records if r.phase is Phase.DONE and r.how is How.LIVE)
        skipped = sum(1 for r in records if r.phase is Phase.LEFT_OUT)
        held = sum(1 for r in records if r.phase is Phase.HELD)
        restarting = sum(1 for r in records if r.on_its_way_back and r.how is How.RESTART)
        counts = {
            "total": len(names),
            "done": done,
            "configured": configured,
            "skipped": skipped,
            "held": held,
            "pending": len(names) - done - skipped - held,
            "restarting": restarting,
            "waiting": len(self._waiting_now()),
        }
        family = GaugeMetricFamily(
            "rollguard_roll_nodes",
            "The roll's nodes: total, done (restarted, or configured live, and back), configured "
            "(of those done: changed live, not restarted), skipped, held (--hold), pending (none "
            "of those yet), restarting, waiting (being waited for now)",
            labels=["state"],
        )
        for state in NODE_STATES:
            family.add_metric([state], counts[state])
        return family

    def _waiting(self, now: float) -> Iterator[Metric]:
        seconds = GaugeMetricFamily(
            "rollguard_roll_wait_seconds",
            "How long each node waited for now has been waited for, by what it waits for",
            labels=["node", "reason"],
        )
        logs, segments, eta, budget = (
            GaugeMetricFamily(name, text, labels=["node"])
            for name, text in (
                (
                    "rollguard_roll_recovery_remaining_logs",
                    "Logs the node waited for still has to recover",
                ),
                (
                    "rollguard_roll_recovery_remaining_segments",
                    "Segments left in the logs being recovered of the node waited for",
                ),
                (
                    "rollguard_roll_recovery_eta_seconds",
                    "When the recovery of the node waited for should end, at its rate",
                ),
                (
                    "rollguard_roll_recovery_budget_seconds",
                    "How long the roll waits for that recovery before it fails "
                    "(--max-recovery-wait, or from history with --expectations)",
                ),
            )
        )
        for node, record in sorted(self._waiting_now().items()):
            assert record.waiting is not None
            seconds.add_metric([node, record.waiting.kind], max(0.0, now - record.waiting.since))
            if record.waiting.kind != AwaitRecovery.kind:
                continue
            tracker = record.recovery
            if tracker is not None and tracker.points:
                logs.add_metric([node], tracker.points[-1].logs)
                segments.add_metric([node], tracker.points[-1].segments)
                if (left := tracker.eta()) is not None:
                    eta.add_metric([node], left)
            if self._budget is not None:
                budget.add_metric([node], self._budget(node))
        yield from (seconds, logs, segments, eta, budget)

    def _timing(self, now: float) -> Iterator[Metric]:
        if self._predicted is not None:
            seconds, upper = self._predicted
            yield GaugeMetricFamily(
                "rollguard_roll_predicted_seconds",
                "The roll's predicted duration, from recovery history (--expectations)",
                value=seconds,
            )
            if upper is not None:
                yield GaugeMetricFamily(
                    "rollguard_roll_predicted_upper_seconds",
                    "The roll's predicted duration at the p90 recoveries",
                    value=upper,
                )
        if self._started is not None:
            took = self._took if self._took is not None else now - self._started
            yield GaugeMetricFamily(
                "rollguard_roll_elapsed_seconds", "Since the roll started (or resumed)", value=took
            )
        if self._lease is not None:
            yield GaugeMetricFamily(
                "rollguard_roll_lease_held",
                "1 while this roller holds the cluster's roll lease",
                value=1 if self._lease.held else 0,
            )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
