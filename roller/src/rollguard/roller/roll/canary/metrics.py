"""The roll canary's figures in the roll's Prometheus metrics (`--canary` with
`--metrics-listen`): what the `canary-baseline` and `canary-cost` events say, kept per window
(`baseline`, then each node whose restart was measured) and rendered at each scrape by
`metrics.RollMetrics`. Labels stay bounded: a window is the baseline or one of the cluster's
nodes, a quantile one of three.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from rollguard.shared.dataset import Event

BASELINE = "baseline"
# Each quantile and the event's figures of it (milliseconds): send, end to end; "1" the worst.
QUANTILES = (
    ("0.5", "p50Ms", "e2eP50Ms"),
    ("0.99", "p99Ms", "e2eP99Ms"),
    ("1", "maxMs", "e2eMaxMs"),
)


class CanaryMetrics:
    """The latest figures of each canary window, from the roll's events."""

    def __init__(self) -> None:
        self._windows: dict[str, Mapping[str, Any]] = {}

    def heard(self, entry: Mapping[str, Any]) -> bool:
        """Keep a canary event's figures; whether `entry` was one."""
        action, node = entry.get("action"), entry.get("node")
        if action == Event.CANARY_BASELINE:
            self._windows[BASELINE] = entry
        elif action == Event.CANARY_COST and isinstance(node, str):
            self._windows[node] = entry
        else:
            return action in (Event.CANARY_TOPIC, Event.CANARY_FAILING)
        return True

    def collect(self) -> Iterator[Metric]:
        if not self._windows:
            return
        send, e2e = (
            GaugeMetricFamily(name, text, labels=["window", "quantile"])
            for name, text in (
                (
                    "rollguard_roll_canary_send_seconds",
                    "The roll canary's send latency (acks=all) in each window: the idle "
                    "baseline before the first restart, then each node's restart until it was "
                    "back; quantile 1 is the worst",
                ),
                (
                    "rollguard_roll_canary_end_to_end_seconds",
                    "From the canary's send to its consumer reading the record, in each window",
                ),
            )
        )
        sends, failed, gap = (
            GaugeMetricFamily(name, text, labels=["window"])
            for name, text in (
                ("rollguard_roll_canary_sends", "The canary's sends answered, in each window"),
                ("rollguard_roll_canary_failed_sends", "The canary's failed sends, in each window"),
                (
                    "rollguard_roll_canary_consumer_gap_seconds",
                    "The canary consumer's longest time without a record, in each window",
                ),
            )
        )
        for window, said in sorted(self._windows.items()):
            for quantile, *keys in QUANTILES:
                for family, key in zip((send, e2e), keys, strict=True):
                    figure = said.get(key)
                    if isinstance(figure, int | float):
                        family.add_metric([window, quantile], figure / 1000)
            for family, key in ((sends, "sent"), (failed, "failed"), (gap, "longestGapS")):
                figure = said.get(key)
                if isinstance(figure, int | float):
                    family.add_metric([window], figure)
        yield from (send, e2e, sends, failed, gap)
