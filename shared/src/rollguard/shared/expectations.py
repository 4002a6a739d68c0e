"""Expectations for the next roll: what each node's recovery history says, as a file.

The Spark report (`rollguard-report`) writes `expectations.json`; the roller reads it (issue 19,
item 4) to set a recovery wait budget per node and to predict how long a roll takes. The file
format lives here, in `shared`, so that both sides agree on it without importing each other:

    {
      "version": 1,
      "generatedAt": "2026-11-23T14:00:00.000Z",
      "minEpisodes": 5,
      "nodes": [
        {"cluster": "demo", "node": "kafka-1",
         "episodes": 12, "p50Seconds": 41.0, "p90Seconds": 88.5, "p99Seconds": 120.2,
         "ratedEpisodes": 11, "segmentsPerSecond": 212.4, "enoughHistory": true}
      ]
    }

`episodes` counts the node's completed recoveries, behind the duration quantiles;
`ratedEpisodes` the episodes with a measured rate, behind the median rate `segmentsPerSecond`.
`enoughHistory` is `episodes >= minEpisodes`: below it a p99 is one or two samples, not a
distribution, and nothing here trusts it (the figures are still given, for people).

Pure: no I/O beyond `load`, no clock, standard library only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.shared.errors import ConfigError

VERSION = 1
MIN_EPISODES = 5

# recovery_budget: p99 * BUDGET_FACTOR + BUDGET_MARGIN seconds, at most max_wait.
BUDGET_FACTOR = 1.5
BUDGET_MARGIN = 60.0


class ExpectationsError(ConfigError):
    """An expectations file that cannot be used: the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class NodeExpectation:
    cluster: str
    node: str
    episodes: int
    p50_seconds: float | None
    p90_seconds: float | None
    p99_seconds: float | None
    rated_episodes: int
    segments_per_second: float | None
    enough_history: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "node": self.node,
            "episodes": self.episodes,
            "p50Seconds": self.p50_seconds,
            "p90Seconds": self.p90_seconds,
            "p99Seconds": self.p99_seconds,
            "ratedEpisodes": self.rated_episodes,
            "segmentsPerSecond": self.segments_per_second,
            "enoughHistory": self.enough_history,
        }


@dataclass(frozen=True, slots=True)
class Expectations:
    generated_at: str
    min_episodes: int
    nodes: tuple[NodeExpectation, ...]
    version: int = VERSION

    def for_cluster(self, cluster: str) -> dict[str, NodeExpectation]:
        """The cluster's nodes by name: what `predict_roll` takes."""
        return {n.node: n for n in self.nodes if n.cluster == cluster}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "generatedAt": self.generated_at,
            "minEpisodes": self.min_episodes,
            "nodes": [n.to_json() for n in self.nodes],
        }


def node_expectation(
    cluster: str,
    node: str,
    *,
    episodes: int,
    p50: float | None,
    p90: float | None,
    p99: float | None,
    rated_episodes: int,
    rate: float | None,
    min_episodes: int = MIN_EPISODES,
) -> NodeExpectation:
    """One node's entry, with `enoughHistory` decided here (the writer's single rule)."""
    enough = episodes >= min_episodes and p99 is not None
    return NodeExpectation(
        cluster, node, episodes, p50, p90, p99, rated_episodes, rate, enough_history=enough
    )


# ---- reading --------------------------------------------------------------------------------


def load(path: Path) -> Expectations:
    """The file at `path`, validated; ExpectationsError naming the path and the field."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ExpectationsError(f"expectations {path}: cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise ExpectationsError(f"expectations {path}: not JSON ({exc})") from None
    return parse(data, str(path))


def parse(data: object, where: str = "expectations") -> Expectations:
    """`data` (decoded JSON) as Expectations; ExpectationsError naming `where` and the field."""
    top = _object(data, where, "the top level")
    version = top.get("version")
    if version != VERSION:
        raise ExpectationsError(
            f"{where}: version {version!r}, this rollguard reads version {VERSION}"
        )
    generated = _field(top, where, "generatedAt", str)
    min_episodes = _count(top, where, "minEpisodes")
    raw_nodes = top.get("nodes")
    if not isinstance(raw_nodes, list):
        raise ExpectationsError(f"{where}: nodes: expected a list, got {_show(raw_nodes)}")
    nodes = tuple(_node(raw, where, f"nodes[{i}]") for i, raw in enumerate(raw_nodes))
    seen: set[tuple[str, str]] = set()
    for i, n in enumerate(nodes):
        if (n.cluster, n.node) in seen:
            raise ExpectationsError(f"{where}: nodes[{i}]: {n.cluster}/{n.node} is listed twice")
        seen.add((n.cluster, n.node))
    return Expectations(generated, min_episodes, nodes, version)


def _node(raw: object, where: str, at: str) -> NodeExpectation:
    entry = _object(raw, where, at)
    p50, p90, p99 = (_seconds(entry, where, f"{at}.{k}") for k in _QUANTILES)
    known = [q for q in (p50, p90, p99) if q is not None]
    if known != sorted(known):
        raise ExpectationsError(
            f"{where}: {at}: p50Seconds <= p90Seconds <= p99Seconds does not hold ({known})"
        )
    enough = _field(entry, where, f"{at}.enoughHistory", bool)
    if enough and p99 is None:
        raise ExpectationsError(f"{where}: {at}.p99Seconds: null, but enoughHistory is true")
    return NodeExpectation(
        cluster=_field(entry, where, f"{at}.cluster", str),
        node=_field(entry, where, f"{at}.node", str),
        episodes=_count(entry, where, f"{at}.episodes"),
        p50_seconds=p50,
        p90_seconds=p90,
        p99_seconds=p99,
        rated_episodes=_count(entry, where, f"{at}.ratedEpisodes"),
        segments_per_second=_seconds(entry, where, f"{at}.segmentsPerSecond"),
        enough_history=enough,
    )


_QUANTILES = ("p50Seconds", "p90Seconds", "p99Seconds")


def _object(raw: object, where: str, at: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ExpectationsError(f"{where}: {at}: expected an object, got {_show(raw)}")
    return raw


def _key(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _field(entry: Mapping[str, Any], where: str, path: str, kind: type) -> Any:
    value = entry.get(_key(path))
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ExpectationsError(f"{where}: {path}: expected {kind.__name__}, got {_show(value)}")
    return value


def _count(entry: Mapping[str, Any], where: str, path: str) -> int:
    value = entry.get(_key(path))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ExpectationsError(
            f"{where}: {path}: expected a whole number >= 0, got {_show(value)}"
        )
    return value


def _seconds(entry: Mapping[str, Any], where: str, path: str) -> float | None:
    """A finite number >= 0, or null (no figure)."""
    value = entry.get(_key(path))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExpectationsError(f"{where}: {path}: expected a number or null, got {_show(value)}")
    if not math.isfinite(value) or value < 0:
        raise ExpectationsError(f"{where}: {path}: expected a number >= 0, got {value!r}")
    return float(value)


def _show(value: object) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"


# ---- what the roller does with it -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Budget:
    seconds: float
    from_history: bool  # False: max_wait, for want of history
    reason: str


def recovery_budget(
    expectation: NodeExpectation | None,
    max_wait: float,
    *,
    factor: float = BUDGET_FACTOR,
    margin: float = BUDGET_MARGIN,
) -> Budget:
    """How long to wait for this node's log recovery before giving up on the roll.

    budget = min(max_wait, p99 * factor + margin), defaults factor 1.5, margin 60 s.

    Why p99 and not p90: the budget is where the roll stops, so only a recovery slower than
    almost all of this node's past ones should hit it; the factor covers a recovery with more
    data than usual (durations grow with the segments to recover), the margin a fast node whose
    p99 is seconds, where polling and JVM start-up dominate. `max_wait` (the roller's
    --max-recovery-wait) stays the ceiling: history may shorten the wait, never lengthen it.
    Without enough history (no entry, fewer than minEpisodes completed episodes, no p99), the
    budget is `max_wait`, as without an expectations file.
    """
    if expectation is None:
        return Budget(max_wait, False, "no history for this node")
    if not expectation.enough_history or expectation.p99_seconds is None:
        return Budget(
            max_wait, False, f"not enough history ({expectation.episodes} completed episodes)"
        )
    derived = expectation.p99_seconds * factor + margin
    if derived >= max_wait:
        return Budget(max_wait, True, f"p99 * {factor:g} + {margin:g}s is over the maximum")
    return Budget(
        derived,
        True,
        f"p99 {expectation.p99_seconds:.0f}s * {factor:g} + {margin:g}s "
        f"({expectation.episodes} episodes)",
    )


@dataclass(frozen=True, slots=True)
class NodePrediction:
    node: str
    seconds: float  # restart overhead + the node's median recovery
    upper_seconds: float  # restart overhead + its p90 recovery
    from_history: bool


@dataclass(frozen=True, slots=True)
class BatchPrediction:
    nodes: tuple[str, ...]
    seconds: float
    upper_seconds: float


@dataclass(frozen=True, slots=True)
class RollPrediction:
    nodes: tuple[NodePrediction, ...]
    batches: tuple[BatchPrediction, ...]
    seconds: float
    upper_seconds: float
    without_history: tuple[str, ...]  # their recovery is not in the figures


def predict_roll(
    batches: Sequence[Sequence[str]],
    expectations: Mapping[str, NodeExpectation],
    restart_overhead: float,
) -> RollPrediction:
    """Predicted roll duration, per node and in total, for batches restarted one after another.

    A node takes restart_overhead (stop, start, readiness and ISR catch-up: the roller's
    setting, not history) plus its recovery: the median (p50) for `seconds`, the p90 for
    `upper_seconds`. The nodes of a batch restart together, so a batch takes as long as its
    slowest node; the roll is the sum of its batches (a node alone is a batch of one). A node
    without enough history counts with the overhead alone and is named in `without_history`,
    so that a prediction never looks more certain than it is. Every restart is assumed to be
    followed by a recovery like the past ones: a clean shutdown usually needs none, so this
    predicts a roll that meets the usual recoveries, an upper figure for a calm one.
    """
    if restart_overhead < 0:
        raise ValueError("restart_overhead must be >= 0")
    nodes: list[NodePrediction] = []
    out_batches: list[BatchPrediction] = []
    missing: list[str] = []
    for batch in batches:
        here: list[NodePrediction] = []
        for name in batch:
            e = expectations.get(name)
            if e is None or not e.enough_history or e.p50_seconds is None:
                here.append(NodePrediction(name, restart_overhead, restart_overhead, False))
                missing.append(name)
                continue
            upper = e.p90_seconds if e.p90_seconds is not None else e.p50_seconds
            here.append(
                NodePrediction(
                    name, restart_overhead + e.p50_seconds, restart_overhead + upper, True
                )
            )
        nodes.extend(here)
        if here:
            out_batches.append(
                BatchPrediction(
                    tuple(n.node for n in here),
                    max(n.seconds for n in here),
                    max(n.upper_seconds for n in here),
                )
            )
    return RollPrediction(
        tuple(nodes),
        tuple(out_batches),
        sum(b.seconds for b in out_batches),
        sum(b.upper_seconds for b in out_batches),
        tuple(missing),
    )
