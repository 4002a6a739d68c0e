"""`--expectations`: recovery budgets from history and a predicted roll (issue 19, item 4).

The budgets on the virtual clock with the production roller (a node whose recovery outlasts its
history's budget fails the roll there, not hours later); the plan's batches and the prediction;
the cluster a file's entries are taken from; and `rollguard plan --expectations` as a process.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.harness import kafka_peer
from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import (
    SimCluster,
    SimNode,
    VirtualClock,
    default_settings,
    internal_topics,
    spread_rejoins,
)
from rollguard.roller.model import Node, Role
from rollguard.roller.roll.cli import expectations
from rollguard.roller.roll.node.step import recovery_budget_of
from rollguard.roller.roll.planning import PlanEntry
from rollguard.shared.errors import ConfigError
from rollguard.shared.expectations import node_expectation

from helpers import HttpsPeer, Pki, inventory, run, running_agent

COMBINED = frozenset({Role.BROKER, Role.CONTROLLER})


def history(
    cluster: str, node: str, p50: float, p99: float, episodes: int = 8
) -> dict[str, object]:
    return node_expectation(
        cluster, node, episodes=episodes, p50=p50, p90=p99 * 0.8, p99=p99,
        rated_episodes=episodes, rate=100.0,
    ).to_json()  # fmt: skip


def write(path: Path, *entries: dict[str, object]) -> Path:
    body = {"version": 1, "generatedAt": "2026-11-23T00:00:00.000Z", "minEpisodes": 5,
            "nodes": list(entries)}  # fmt: skip
    path.write_text(json.dumps(body))
    return path


def recovering_cluster(seconds: float) -> SimCluster:
    """Three combined nodes; kafka-1 comes back from its restart into `seconds` of recovery."""
    nodes = [
        SimNode(Node(i, f"kafka-{i}", COMBINED, f"https://kafka-{i}"), restart_seconds=30)
        for i in range(3)
    ]
    nodes[1].recovery_after_restart = seconds
    cluster = SimCluster(nodes, internal_topics(random.Random(0), [0, 1, 2]), VirtualClock())
    spread_rejoins(cluster)
    return cluster


def test_a_recovery_past_its_budget_from_history_fails_the_roll_without_a_restart() -> None:
    cluster = recovering_cluster(3600)  # an hour: far beyond kafka-1's history
    budgets = {"kafka-1": 600.0}  # p99 360 s * 1.5 + 60 s
    done = SimRoll(cluster).roll(recovery_budgets=budgets)
    assert done.returncode == 1
    said = "kafka-1 is still performing log recovery after 10m00s (its budget from history)"
    assert said in done.stderr
    assert cluster.nodes["kafka-1"].restarts == 1  # restarted once, never again while recovering
    # without the file, the same recovery is waited for (the 6 h default)
    without = SimRoll(recovering_cluster(3600)).roll()
    assert without.returncode == 0, without.stderr


def test_a_budget_never_exceeds_the_maximum_wait() -> None:
    from dataclasses import replace

    settings = replace(default_settings(), max_recovery_wait=300, recovery_budgets={"a": 900.0})
    assert recovery_budget_of("a", settings) == 300
    assert recovery_budget_of("b", settings) == 300


def node(name: str, node_id: int) -> Node:
    return Node(node_id, name, frozenset({Role.BROKER}), f"https://{name}")


def test_batches_follow_the_plan_and_skip_what_is_not_restarted() -> None:
    plan = [
        PlanEntry(node("a", 0), "restart", "", batch=1),
        PlanEntry(node("b", 1), "restart", "", batch=1),
        PlanEntry(node("c", 2), "skip", "up to date"),
        PlanEntry(node("d", 3), "defer", "min ISR"),
        PlanEntry(node("e", 4), "restart", "", batch=2),
    ]
    assert expectations.batches(plan) == [["a", "b"], ["d"], ["e"]]


def test_the_prediction_is_the_sum_of_batches_each_as_slow_as_its_slowest(tmp_path: Path) -> None:
    path = write(tmp_path / "e.json", history("prod", "a", 100, 200), history("prod", "b", 40, 80))
    nodes = [node("a", 0), node("b", 1), node("c", 2)]
    entries = expectations.for_nodes(path, None, nodes)
    plan = [PlanEntry(n, "restart", "", batch=1 if n.name in "ab" else None) for n in nodes]
    predicted = expectations.predict(plan, entries, restart_estimate=60)
    assert predicted.seconds == (60 + 100) + 60  # batch {a, b}: a's; c alone: no history
    assert predicted.without_history == ("c",)
    budgets = expectations.budgets(entries, nodes, max_wait=6 * 3600)
    assert budgets["a"].seconds == 200 * 1.5 + 60 and budgets["a"].from_history
    assert not budgets["c"].from_history and budgets["c"].seconds == 6 * 3600
    lines = expectations.describe(predicted, budgets)
    assert lines[0].startswith("predicted roll duration 3m40s")
    assert "without history: c" in lines[0]


def test_the_clusters_entries_are_chosen_or_the_file_is_refused(tmp_path: Path) -> None:
    two = write(tmp_path / "two.json", history("east", "a", 10, 20), history("west", "a", 5, 9))
    nodes = [node("a", 0)]
    assert expectations.for_nodes(two, "west", nodes)["a"].p50_seconds == 5
    with pytest.raises(ConfigError, match="holds clusters east, west; none is this cluster"):
        expectations.for_nodes(two, "north", nodes)
    other = write(tmp_path / "other.json", history("east", "zz", 10, 20))
    with pytest.raises(ConfigError, match="has none of this cluster's nodes"):
        expectations.for_nodes(other, None, nodes)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match=r"bad\.json: not JSON"):
        expectations.for_nodes(tmp_path / "bad.json", None, nodes)


def test_plan_with_expectations_prints_the_prediction_and_writes_nothing(
    tmp_path: Path, pki: Pki
) -> None:
    with kafka_peer() as kafka, HttpsPeer(running_agent, pki) as agent:
        # The inventory's `cluster:` picks this cluster's entries, whatever its file is called.
        path = inventory(tmp_path / "inventory.yaml", [agent.url] * 3, cluster="prod")
        expected = write(
            tmp_path / "e.json",
            history("prod", "kafka-0", 30, 90),
            history("inventory", "kafka-1", 600, 900),
        )
        done = run(
            rollguard_args("plan", inventory=path, bootstrap=kafka.bootstrap, tls=pki,
                           state_dir=tmp_path / "state",
                           extra=["--expectations", str(expected), "--restart-estimate", "1m",
                                  "--output", "json", "--retry-max-retries", "0"]),
            timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    (prediction,) = [line["prediction"] for line in lines if "prediction" in line]
    assert {n["node"] for n in prediction["nodes"]} == {"kafka-0", "kafka-1", "kafka-2"}
    assert prediction["withoutHistory"] == ["kafka-1", "kafka-2"] or set(
        prediction["withoutHistory"]
    ) == {"kafka-1", "kafka-2"}
    assert prediction["seconds"] == 60 + 30 + 60 + 60
    kafka_0 = next(n for n in prediction["nodes"] if n["node"] == "kafka-0")
    assert kafka_0["recoveryBudgetSeconds"] == 90 * 1.5 + 60
    assert not (tmp_path / "state").exists()  # a plan writes nothing
