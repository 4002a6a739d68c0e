"""The roll journal holds each node's record as the roll moves it, and reads it back as it was;
a journal of the previous release (version 1: a status per node) is read as the records it
stands for, so that its roll resumes; one this release cannot read is refused, saying what to
do."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rollguard.roller.roll.node.budgets import ReadyWait
from rollguard.roller.roll.node.record import How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.rules.safety import Baseline
from rollguard.roller.roll.stores.journal import FileJournalStore, RollRecord, RollState
from rollguard.shared.errors import ConfigError

EVERY_FIELD = NodeRecord(
    "kafka-1",
    Phase.CATCHING_UP,
    at="2026-12-07T10:00:00.000Z",
    why="runs Kafka 4.0.0; the target is 4.4.0",
    reason="restart",
    how=How.RESTART,
    instance="uid-1",
    base=Baseline(frozenset({"orders-0"}), voter_caught_up=False),
    batch=2,
    kafka_version="4.0.0",
    version_unknown=True,
    live_only=True,
    canary={"sent": 120, "p99Ms": 41.5, "failed": None},
    waiting=Waiting("catch-up", "catching up: 3 partitions not yet in sync", 12.0),
)


def saved(tmp_path: Path, *records: NodeRecord) -> RollRecord | None:
    store = FileJournalStore(tmp_path)
    roll = RollRecord("r1", "2026-12-07T09:00:00.000Z", kafka_version="4.4.0")
    roll.nodes = {r.name: r for r in records}
    store.save(roll)
    return store.load("r1")


def test_a_node_s_record_is_read_back_as_it_was_saved(tmp_path: Path) -> None:
    loaded = saved(tmp_path, EVERY_FIELD, NodeRecord("kafka-2", Phase.PENDING, "t", "--all"))
    assert loaded is not None and loaded.kafka_version == "4.4.0"
    # what the journal keeps of a wait: what it waits for, not since when on this clock
    assert loaded.nodes["kafka-1"] == replace(
        EVERY_FIELD, waiting=replace(EVERY_FIELD.waiting, since=0.0)
    )  # type: ignore[arg-type]
    assert loaded.nodes["kafka-2"] == NodeRecord("kafka-2", Phase.PENDING, "t", "--all")


def test_the_budgets_of_a_wait_stay_in_the_process(tmp_path: Path) -> None:
    """A resumed roll starts them again: it did not see what the node did meanwhile."""
    waiting = replace(EVERY_FIELD, ready=ReadyWait.start(5.0, "uid-2", 900.0))
    loaded = saved(tmp_path, waiting)
    assert loaded is not None and loaded.nodes["kafka-1"].ready is None
    text = json.loads((tmp_path / "roll-r1.json").read_text())
    assert "ready" not in text["nodes"]["kafka-1"] and text["version"] == 2


V1 = {
    "version": 1,
    "rollId": "r0",
    "startedAt": "2026-11-29T10:00:00.000Z",
    "state": "interrupted",
    "reason": "interrupted",
    "nodes": {
        "kafka-0": {"status": "restarted", "at": "a", "instance": "u0", "reason": ""},
        "kafka-1": {
            "status": "restarting",
            "at": "b",
            "instance": "u1",
            "reason": "restart",
            "batch": 1,
            "outOfSyncBefore": ["orders-3"],
            "voterLaggingBefore": True,
        },
        "kafka-2": {"status": "skipped", "at": "c", "instance": None, "reason": "--skip"},
        "kafka-3": {"status": "held", "at": "d", "instance": None, "reason": "held with --hold"},
        "kafka-4": {"status": "configured", "at": "e", "instance": "u4", "reason": "live: x"},
        "kafka-5": {"status": "failed", "at": "f", "instance": "u5", "reason": "its command"},
        "kafka-6": {"status": "configuring", "at": "g", "instance": "u6", "reason": "live: y"},
    },
}


def test_a_journal_of_the_previous_release_is_read_as_the_records_it_stands_for(
    tmp_path: Path,
) -> None:
    (tmp_path / "roll-r0.json").write_text(json.dumps(V1))
    loaded = FileJournalStore(tmp_path).load("r0")
    assert loaded is not None and loaded.state is RollState.INTERRUPTED
    got = {name: (r.phase, r.how) for name, r in loaded.nodes.items()}
    assert got == {
        "kafka-0": (Phase.DONE, How.RESTART),
        "kafka-1": (Phase.RESTARTING, How.RESTART),  # its restart on record: never again
        "kafka-2": (Phase.LEFT_OUT, None),
        "kafka-3": (Phase.HELD, None),
        "kafka-4": (Phase.DONE, How.LIVE),
        "kafka-5": (Phase.FAILED, None),
        "kafka-6": (Phase.CONFIGURING, How.LIVE),
    }
    restarting = loaded.nodes["kafka-1"]
    assert restarting.instance == "u1" and restarting.batch == 1
    assert restarting.base == Baseline(frozenset({"orders-3"}), voter_caught_up=False)
    assert (
        loaded.nodes["kafka-2"].why == "--skip" and loaded.nodes["kafka-5"].reason == "its command"
    )
    assert loaded.next_batch() == 2  # a resumed roll numbers its batches on


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (
            3,
            "version 3 is a newer rollguard's (this one reads 2 and 1): resume it with the "
            "rollguard that wrote it, or start a new roll",
        ),
        ("x", "version 'x' is not one rollguard writes"),
        (None, "version None is not one rollguard writes"),
    ],
)
def test_a_journal_this_release_cannot_read_is_refused_saying_what_to_do(
    tmp_path: Path, version: object, said: str
) -> None:
    (tmp_path / "roll-r9.json").write_text(json.dumps({**V1, "version": version}))
    with pytest.raises(
        ConfigError, match="roll journal " + said.replace("(", r"\(").replace(")", r"\)")
    ):
        FileJournalStore(tmp_path).load("r9")


def test_a_malformed_record_names_what_is_wrong(tmp_path: Path) -> None:
    bad = {**V1, "version": 2, "nodes": {"kafka-0": {"phase": "sideways", "at": "a"}}}
    (tmp_path / "roll-r8.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="roll journal is malformed: ValueError 'sideways'"):
        FileJournalStore(tmp_path).load("r8")
