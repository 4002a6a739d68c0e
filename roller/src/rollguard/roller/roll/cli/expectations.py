"""Rolls planned from recovery history (`--expectations FILE`, issue 19): per-node recovery wait
budgets and a predicted roll duration, from the `expectations.json` that `rollguard-report`
writes (format and formulas: `rollguard.shared.expectations`).

- Which cluster's entries: the file's only cluster; with several, the one named as the
  collector names this cluster's dataset (`PlatformOptions.cluster_name`: the inventory's
  `cluster:`, else the inventory file's stem, the selector's `strimzi.io/cluster`, or the
  namespace, said once). A file with none of this
  cluster's nodes is a usage error (exit 2): a budget from another cluster's history would be
  a guess.
- The budget replaces `--max-recovery-wait` for that node, never above it
  (`recovery_budget`); a node without enough history keeps `--max-recovery-wait`.
- The prediction takes the plan's order and batches (one node a batch in a serial roll), each
  restart costing `--restart-estimate` plus the node's median recovery (p90 for the upper
  figure). It is printed before the roll, written to the events (`roll-predicted`, with
  `seconds`), and the roll's end says the actual duration against it; the next report shows both.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rollguard.roller.model import Node
from rollguard.roller.roll.planning import PlanEntry
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError
from rollguard.shared.expectations import (
    Budget,
    NodeExpectation,
    RollPrediction,
    load,
    predict_roll,
    recovery_budget,
)


def for_nodes(
    path: Path, cluster_hint: str | None, nodes: Sequence[Node]
) -> dict[str, NodeExpectation]:
    """This cluster's entries of the file at `path`; ConfigError when there are none."""
    expectations = load(path)
    clusters = sorted({n.cluster for n in expectations.nodes})
    if len(clusters) == 1:
        chosen = clusters[0]
    elif cluster_hint in clusters:
        chosen = cluster_hint
    else:
        raise ConfigError(
            f"--expectations {path}: holds clusters {', '.join(clusters) or '(none)'}; none is "
            f"this cluster ({cluster_hint or 'unnamed'})"
        )
    entries = expectations.for_cluster(chosen)
    names = {n.name for n in nodes}
    if not names & set(entries):
        raise ConfigError(
            f"--expectations {path}: cluster {chosen} has none of this cluster's nodes "
            f"({', '.join(sorted(names))})"
        )
    return entries


def budgets(
    entries: Mapping[str, NodeExpectation], nodes: Sequence[Node], max_wait: float
) -> dict[str, Budget]:
    return {n.name: recovery_budget(entries.get(n.name), max_wait) for n in nodes}


def batches(plan: Sequence[PlanEntry]) -> list[list[str]]:
    """The plan's restarts in order, grouped by batch (a node alone when it has none)."""
    out: list[list[str]] = []
    numbers: dict[int, list[str]] = {}
    for entry in plan:
        if entry.action in ("skip", "fail"):
            continue
        if entry.batch is None:
            out.append([entry.node.name])
        elif entry.batch in numbers:
            numbers[entry.batch].append(entry.node.name)
        else:
            numbers[entry.batch] = [entry.node.name]
            out.append(numbers[entry.batch])
    return out


def predict(
    plan: Sequence[PlanEntry], entries: Mapping[str, NodeExpectation], restart_estimate: float
) -> RollPrediction:
    return predict_roll(batches(plan), entries, restart_estimate)


def describe(prediction: RollPrediction, budgets: Mapping[str, Budget]) -> list[str]:
    """The lines printed before a roll: the total, then each node's figure and budget."""
    lines = [
        f"predicted roll duration {format_duration(round(prediction.seconds))} (upper "
        f"{format_duration(round(prediction.upper_seconds))}), {len(prediction.batches)} "
        f"restarts{' or batches' if any(len(b.nodes) > 1 for b in prediction.batches) else ''}"
        + (
            f"; without history: {', '.join(prediction.without_history)}"
            if prediction.without_history
            else ""
        )
    ]
    for node in prediction.nodes:
        budget = budgets.get(node.node)
        wait = (
            f"recovery budget {format_duration(round(budget.seconds))} ({budget.reason})"
            if budget is not None
            else ""
        )
        lines.append(f"  {node.node}: {format_duration(round(node.seconds))}; {wait}")
    return lines


def prediction_json(prediction: RollPrediction, budgets: Mapping[str, Budget]) -> dict[str, object]:
    return {
        "prediction": {
            "seconds": prediction.seconds,
            "upperSeconds": prediction.upper_seconds,
            "withoutHistory": list(prediction.without_history),
            "nodes": [
                {
                    "node": n.node,
                    "seconds": n.seconds,
                    "upperSeconds": n.upper_seconds,
                    "fromHistory": n.from_history,
                    "recoveryBudgetSeconds": budgets[n.node].seconds if n.node in budgets else None,
                }
                for n in prediction.nodes
            ],
        }
    }


@dataclass
class History:
    """What --expectations gave this run: the cluster's entries, each node's budget, and the
    prediction once announced."""

    entries: dict[str, NodeExpectation]
    budgets: dict[str, Budget]
    started: float = field(default_factory=time.monotonic)
    predicted: float | None = None

    def announce(
        self, plan: list[PlanEntry], restart_estimate: float, output: str, events: EventLog
    ) -> None:
        """Print the prediction (stdout as JSON with `--output json`, else stderr) and record
        it as a `roll-predicted` event."""
        prediction = predict(plan, self.entries, restart_estimate)
        self.predicted = prediction.seconds
        self.started = time.monotonic()
        if output == "json":
            print(json.dumps(prediction_json(prediction, self.budgets)), flush=True)
        else:
            for line in describe(prediction, self.budgets):
                print(line, file=sys.stderr)
        events.write(
            None,
            Event.ROLL_PREDICTED,
            f"{len(prediction.batches)} restarts; without history: "
            f"{', '.join(prediction.without_history) or '-'}",
            seconds=prediction.seconds,
            upperSeconds=prediction.upper_seconds,
        )


def history_for(
    path: Path, cluster_hint: str | None, nodes: list[Node], max_recovery_wait: float
) -> History:
    """What `--expectations path` gives a roll of `nodes`."""
    entries = for_nodes(path, cluster_hint, nodes)
    return History(entries, budgets(entries, nodes, max_recovery_wait))
