"""The controller's Prometheus metrics (`--metrics-listen`): every running roll's own metrics
(`roll.metrics.RollMetrics`, exactly as `rollguard roll --metrics-listen` serves them), each
sample labelled with its cluster's `namespace` and `cluster`, and the controller's own:

    rollguard_controller_leader           1 on the replica that acts, 0 on a standby
    rollguard_controller_cluster_phase    1 for each cluster's phase now (its status annotation's:
                                          Idle, Rolling, Paused, Waiting, Completed, Failed,
                                          Refused, Ignored), labelled namespace, cluster, phase

A roll's metrics are served while it runs; its outcome stays in its cluster's phase.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rollguard.roller.controller.status import ControllerPhase
from rollguard.roller.roll.metrics import RollMetrics

__all__ = ["ControllerMetrics"]

Key = tuple[str, str]  # (namespace, cluster)


class ControllerMetrics(Collector):
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.leading = False
        self._lock = threading.Lock()
        self._rolls: dict[Key, RollMetrics] = {}
        self._phases: dict[Key, ControllerPhase] = {}
        self.registry.register(self)

    def rolling(self, key: Key, metrics: RollMetrics | None) -> None:
        """The cluster's roll's metrics while it runs (None: it ended)."""
        with self._lock:
            if metrics is None:
                self._rolls.pop(key, None)
            else:
                self._rolls[key] = metrics

    def phase(self, key: Key, phase: ControllerPhase) -> None:
        with self._lock:
            self._phases[key] = phase

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            rolls, phases = dict(self._rolls), dict(self._phases)
        yield GaugeMetricFamily(
            "rollguard_controller_leader",
            "1 on the controller replica that acts, 0 on a standby",
            value=1 if self.leading else 0,
        )
        family = GaugeMetricFamily(
            "rollguard_controller_cluster_phase",
            "1 for each cluster's phase now (its rollguard.io/status annotation's)",
            labels=["namespace", "cluster", "phase"],
        )
        for (namespace, cluster), phase in sorted(phases.items()):
            for each in ControllerPhase:
                family.add_metric([namespace, cluster, each.value], 1 if each is phase else 0)
        yield family
        merged: dict[str, Metric] = {}
        for (namespace, cluster), metrics in sorted(rolls.items()):
            for found in metrics.collect():
                into = merged.setdefault(
                    found.name, Metric(found.name, found.documentation, found.type, found.unit)
                )
                for sample in found.samples:
                    labels = {"namespace": namespace, "cluster": cluster, **sample.labels}
                    into.samples.append(sample._replace(labels=labels))
        yield from merged.values()
