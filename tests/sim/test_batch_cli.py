"""The batch options of `rollguard roll` and `plan`, and how `plan` shows batches."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_cli_flags import COMMANDS, refused, roll_values

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import VirtualClock, rack_cluster
from rollguard.roller.model import Node, Role
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.planning import PlanEntry
from rollguard.roller.roll.rules.settings import RollSettings

from helpers import run


@pytest.mark.parametrize(
    ("argv", "environ", "name", "value"),
    [
        ([], {}, "max-batch-size", 1),
        (["--max-batch-size", "3"], {}, "max-batch-size", 3),
        ([], {"ROLLGUARD_MAX_BATCH_SIZE": "10"}, "max-batch-size", 10),
        ([], {}, "rack-aware", None),
        (["--rack-aware", "false"], {}, "rack-aware", False),
        (["--rack-aware", "true"], {}, "rack-aware", True),
        ([], {"ROLLGUARD_RACK_AWARE": "no"}, "rack-aware", False),
        ([], {}, "elect-preferred-leaders", True),
        (["--elect-preferred-leaders", "false"], {}, "elect-preferred-leaders", False),
    ],
)
def test_batch_flags_mean_what_they_say(
    argv: list[str], environ: dict[str, str], name: str, value: object
) -> None:
    assert roll_values(*argv, environ=environ)[name] == value


def test_the_defaults_are_the_serial_roll() -> None:
    flags = {f.name: f.default for f in RollOptions.flags()}
    assert flags["max-batch-size"] == "1"
    assert RollSettings().max_batch_size == 1
    assert RollSettings().rack_aware is None


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["--max-batch-size", "0"], "--max-batch-size: '0' is not a whole number from 1"),
        (["--max-batch-size", "two"], "--max-batch-size: 'two' is not a whole number"),
        (["--rack-aware", "maybe"], "--rack-aware: 'maybe' is not true or false"),
        (["--elect-preferred-leaders", "sometimes"], "--elect-preferred-leaders: 'sometimes'"),
    ],
)
def test_bad_batch_flags_are_refused_in_one_line(
    argv: list[str], text: str, tmp_path: Path
) -> None:
    refused(run([*COMMANDS["roll"], *argv], tmp_path), text)


def test_a_plan_entry_shows_its_batch_and_rack() -> None:
    node = Node(3, "kafka-3", frozenset({Role.BROKER}))
    entry = PlanEntry(node, "restart", "2 brokers of rack a: ...", 1, "a")
    assert entry.text() == "batch 1, rack a: restart: 2 brokers of rack a: ..."
    assert entry.to_json()["batch"] == 1
    assert entry.to_json()["rack"] == "a"
    serial = PlanEntry(node, "restart", "restart")
    assert "batch" not in serial.to_json()
    assert serial.text() == "restart: restart"


def test_plan_lists_the_batches_with_rack_and_reason_and_the_held_back(tmp_path: Path) -> None:
    cluster = rack_cluster(random.Random(4), VirtualClock(), 6, racks=3, min_isr=(2, 2))
    # A partition of brokers 1 and 4 (rack b) at min ISR: both are held back, with the reason.
    lagging = next(i for i, p in enumerate(cluster.partitions) if p.replicas[-1] not in (1, 4)
                   and {1, 4} & set(p.replicas[:-1]))  # fmt: skip
    cluster.by_id[cluster.partitions[lagging].replicas[-1]].rejoin[lagging] = 1e9
    entries = SimRoll(cluster, tmp_path).entries(max_batch_size=2, rack_aware=True)
    texts = {e.node.name: e.text() for e in entries}
    assert texts["controller-6"].startswith("restart")  # controllers: alone, as before
    batched = [e for e in entries if e.batch is not None]
    assert batched and all(e.rack is not None for e in batched)
    assert texts[batched[0].node.name].startswith(f"batch 1, rack {batched[0].rack}: restart:")
    held = [e for e in entries if e.action == "defer"]
    assert held and all("min.insync.replicas" in e.reason for e in held)
    assert all(e.to_json()["action"] in ("restart", "defer") for e in entries)
