"""rollguard.shared.expectations: the file format, its loader's errors, the recovery budget and
the roll prediction, as tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollguard.shared.expectations import (
    Budget,
    Expectations,
    ExpectationsError,
    NodeExpectation,
    load,
    node_expectation,
    parse,
    predict_roll,
    recovery_budget,
)


def entry(**changes: Any) -> dict[str, Any]:
    base = {
        "cluster": "c",
        "node": "kafka-0",
        "episodes": 12,
        "p50Seconds": 40.0,
        "p90Seconds": 90.0,
        "p99Seconds": 120.0,
        "ratedEpisodes": 11,
        "segmentsPerSecond": 200.5,
        "enoughHistory": True,
    }
    return base | changes


def document(*nodes: dict[str, Any], **changes: Any) -> dict[str, Any]:
    base = {"version": 1, "generatedAt": "2026-11-23T14:00:00.000Z", "minEpisodes": 5}
    return base | {"nodes": list(nodes)} | changes


def known(node: str, p50: float, p90: float, p99: float, episodes: int = 10) -> NodeExpectation:
    return node_expectation(
        "c", node, episodes=episodes, p50=p50, p90=p90, p99=p99, rated_episodes=episodes, rate=1.0
    )


def test_a_file_written_reads_back_the_same(tmp_path: Path) -> None:
    written = Expectations(
        "2026-11-23T14:00:00.000Z",
        5,
        (known("kafka-0", 40, 90, 120), known("kafka-1", 1, 2, 3, episodes=2)),
    )
    path = tmp_path / "expectations.json"
    path.write_text(json.dumps(written.to_json()))
    read = load(path)
    assert read == written
    assert read.for_cluster("c")["kafka-1"].enough_history is False
    assert read.for_cluster("other") == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "f.json: the top level: expected an object, got list '[]'"),
        (document(version=2), "f.json: version 2, this rollguard reads version 1"),
        (document(minEpisodes=-1), "f.json: minEpisodes: expected a whole number >= 0, got int"),
        (document(nodes={}), "f.json: nodes: expected a list, got dict"),
        (document(entry(episodes="3")), "f.json: nodes[0].episodes: expected a whole number"),
        (document(entry(node=None)), "f.json: nodes[0].node: expected str, got nothing"),
        (document(entry(), entry(p90Seconds="x")), "f.json: nodes[1].p90Seconds: expected a num"),
        (document(entry(p99Seconds=-1)), "f.json: nodes[0].p99Seconds: expected a number >= 0"),
        (document(entry(p50Seconds=100.0)), "f.json: nodes[0]: p50Seconds <= p90Seconds <="),
        (document(entry(enoughHistory=1)), "f.json: nodes[0].enoughHistory: expected bool"),
        (document(entry(p99Seconds=None)), "f.json: nodes[0].p99Seconds: null, but enough"),
        (document(entry(), entry()), "f.json: nodes[1]: c/kafka-0 is listed twice"),
        (document(entry(segmentsPerSecond=True)), "f.json: nodes[0].segmentsPerSecond: expec"),
    ],
)
def test_the_loader_names_the_file_and_the_field(data: object, message: str) -> None:
    with pytest.raises(ExpectationsError) as caught:
        parse(data, "f.json")
    assert str(caught.value).startswith(message)


def test_unreadable_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ExpectationsError, match=r"missing.json: cannot be read \(No such file"):
        load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ExpectationsError, match=r"bad.json: not JSON"):
        load(tmp_path / "bad.json")


def test_not_enough_history_below_min_episodes_or_without_a_p99() -> None:
    assert known("a", 1, 2, 3, episodes=5).enough_history
    assert not known("a", 1, 2, 3, episodes=4).enough_history
    none = node_expectation(
        "c", "a", episodes=9, p50=None, p90=None, p99=None, rated_episodes=0, rate=None
    )
    assert not none.enough_history


@pytest.mark.parametrize(
    ("expectation", "max_wait", "budget"),
    [
        (None, 1800, Budget(1800, False, "no history for this node")),
        (
            known("a", 10, 20, 30, episodes=3),
            1800,
            Budget(1800, False, "not enough history (3 completed episodes)"),
        ),
        (known("a", 10, 20, 30), 1800, Budget(105, True, "p99 30s * 1.5 + 60s (10 episodes)")),
        (known("a", 10, 20, 0), 1800, Budget(60, True, "p99 0s * 1.5 + 60s (10 episodes)")),
        (
            known("a", 600, 1000, 1200),
            1800,
            Budget(1800, True, "p99 * 1.5 + 60s is over the maximum"),
        ),
        (known("a", 10, 20, 30), 100, Budget(100, True, "p99 * 1.5 + 60s is over the maximum")),
    ],
)
def test_recovery_budget(
    expectation: NodeExpectation | None, max_wait: float, budget: Budget
) -> None:
    assert recovery_budget(expectation, max_wait) == budget


def test_recovery_budget_with_other_factor_and_margin() -> None:
    assert recovery_budget(known("a", 1, 2, 100), 1e6, factor=2, margin=0).seconds == 200


HISTORY = {
    "a": known("a", 10, 30, 40),
    "b": known("b", 100, 200, 300),
    "c": known("c", 5, 6, 7, episodes=1),  # not enough history
}


@pytest.mark.parametrize(
    ("batches", "overhead", "per_node", "total", "upper", "without"),
    [
        ([], 20, {}, 0, 0, ()),
        ([["a"], ["b"]], 20, {"a": (30, 50), "b": (120, 220)}, 150, 270, ()),
        ([["a", "b"]], 20, {"a": (30, 50), "b": (120, 220)}, 120, 220, ()),
        (
            [["a", "c"], ["b"]],
            10,
            {"a": (20, 40), "c": (10, 10), "b": (110, 210)},
            130,
            250,
            ("c",),
        ),
        ([["x"]], 15, {"x": (15, 15)}, 15, 15, ("x",)),
        ([[], ["a"]], 0, {"a": (10, 30)}, 10, 30, ()),
    ],
)
def test_predict_roll(
    batches: list[list[str]],
    overhead: float,
    per_node: dict[str, tuple[float, float]],
    total: float,
    upper: float,
    without: tuple[str, ...],
) -> None:
    prediction = predict_roll(batches, HISTORY, overhead)
    assert {n.node: (n.seconds, n.upper_seconds) for n in prediction.nodes} == per_node
    assert (prediction.seconds, prediction.upper_seconds) == (total, upper)
    assert prediction.without_history == without
    assert [b.nodes for b in prediction.batches] == [tuple(b) for b in batches if b]


def test_predict_roll_refuses_a_negative_overhead() -> None:
    with pytest.raises(ValueError, match="restart_overhead"):
        predict_roll([["a"]], HISTORY, -1)
