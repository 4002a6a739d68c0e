"""The controller's metrics (`controller.metrics`): every running roll's own, each sample
labelled with its cluster, beside each cluster's phase and the replica's leadership; a roll's
metrics gone once it ends, its phase kept."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from rollguard.roller.controller.metrics import ControllerMetrics
from rollguard.roller.controller.status import ControllerPhase
from rollguard.roller.roll.metrics import RollMetrics


def samples(metrics: ControllerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.render().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_two_clusters_rolls_are_served_side_by_side_each_labelled_with_its_cluster() -> None:
    metrics = ControllerMetrics()
    metrics.leading = True
    for cluster in ("prod", "audit"):
        roll = RollMetrics(f"{cluster}-1", cluster)
        roll.follow([f"{cluster}-{i}" for i in range(3)])
        metrics.rolling(("kafka", cluster), roll)
        metrics.phase(("kafka", cluster), ControllerPhase.ROLLING)
    found = samples(metrics)
    assert found[("rollguard_controller_leader", ())] == 1
    for cluster in ("prod", "audit"):
        labels = (("cluster", cluster), ("namespace", "kafka"), ("state", "total"))
        assert found[("rollguard_roll_nodes", labels)] == 3
        phase = (("cluster", cluster), ("namespace", "kafka"), ("phase", "Rolling"))
        assert found[("rollguard_controller_cluster_phase", phase)] == 1
    metrics.rolling(("kafka", "audit"), None)
    metrics.phase(("kafka", "audit"), ControllerPhase.COMPLETED)
    metrics.leading = False
    found = samples(metrics)
    assert found[("rollguard_controller_leader", ())] == 0
    names = {labels for name, labels in found if name == "rollguard_roll_nodes"}
    assert all(("cluster", "prod") in labels for labels in names)
    done = (("cluster", "audit"), ("namespace", "kafka"), ("phase", "Completed"))
    assert found[("rollguard_controller_cluster_phase", done)] == 1
