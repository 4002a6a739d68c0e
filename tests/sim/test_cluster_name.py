"""The inventory's `cluster:` names the cluster everywhere: in the roll's events, in the dataset
`rollguard collect` writes, and for `--expectations`; without it the name is guessed (the
inventory file's stem, the selector's strimzi.io/cluster, the namespace) and the guess is said
once. Events of another cluster in a shared --state-dir are left out of this cluster's dataset."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_collect import rows

from rollguard.roller.collect.events import FileCursor, read_events
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.dataset import Event

from helpers import HttpsPeer, Pki, answer, inventory, rollguard


def event(roll: str, cluster: str | None) -> str:
    entry = {"ts": "2026-11-26T10:00:00Z", "rollId": roll, "node": "kafka-0", "action": "restart"}
    if cluster is not None:
        entry["cluster"] = cluster
    return json.dumps(entry) + "\n"


def test_the_roll_writes_its_cluster_into_every_event(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events-r1.jsonl", "r1", cluster="prod-eu")
    log.write(None, Event.ROLL_START)
    log.write("kafka-0", Event.RESTART, "outdated")
    written = [json.loads(line) for line in (tmp_path / "events-r1.jsonl").read_text().splitlines()]
    assert [e["cluster"] for e in written] == ["prod-eu", "prod-eu"]


def test_events_of_another_cluster_are_left_out_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "events-r1.jsonl"
    path.write_text(event("r1", "prod-eu") + event("r2", "staging") + event("r3", None))
    found: list[dict[str, object]] = []
    result = read_events([path], {}, found, "prod-eu")
    # An older roller's event names no cluster: it is this cluster's, as before.
    assert [r["rollId"] for r in found] == ["r1", "r3"]
    assert result.other_clusters == {"staging": 1} and result.events == 2
    everything: list[dict[str, object]] = []
    read_events([path], {str(path.resolve()): FileCursor()}, everything)
    assert len(everything) == 3  # no cluster asked for: all of them


async def empty_timeline(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    """An agent whose recovery timeline has nothing yet."""
    body = {"records": [], "next": 0, "earliest": None, "latest": 0}
    await answer(send, 200, body)


@pytest.fixture(scope="module")
def agent(pki: Pki) -> Iterator[HttpsPeer]:
    with HttpsPeer(empty_timeline, pki) as peer:
        yield peer


def collect(path: Path, events: Path, out: Path, pki: Pki) -> subprocess.CompletedProcess[str]:
    return rollguard("collect", "--inventory", str(path), "--out", str(out),
                     "--events", str(events), *pki.client_flags())  # fmt: skip


@pytest.fixture
def shared_state_dir(tmp_path: Path) -> Path:
    """A --state-dir two clusters' rolls wrote to."""
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "events-r1.jsonl").write_text(event("r1", "prod-eu") + event("r1", "prod-eu"))
    (folder / "events-r2.jsonl").write_text(event("r2", "staging"))
    return folder


def test_collect_names_the_dataset_after_the_inventorys_cluster(
    tmp_path: Path, pki: Pki, agent: HttpsPeer, shared_state_dir: Path
) -> None:
    path = inventory(tmp_path / "inventory.yaml", [agent.url], cluster="prod-eu")
    done = collect(path, shared_state_dir, tmp_path / "out", pki)
    assert done.returncode == 0, done.stderr
    found = rows(tmp_path / "out", "events")
    assert {r["cluster"] for r in found} == {"prod-eu"} and len(found) == 2
    assert "1 events of cluster staging left out" in done.stderr
    assert "named" not in done.stderr  # nothing guessed, nothing said


def test_without_a_cluster_key_the_guess_is_said_once(
    tmp_path: Path, pki: Pki, agent: HttpsPeer, shared_state_dir: Path
) -> None:
    path = inventory(tmp_path / "inventory.yaml", [agent.url])
    done = collect(path, shared_state_dir, tmp_path / "out", pki)
    assert done.returncode == 0, done.stderr
    said = "the cluster is named 'inventory' after the inventory file inventory.yaml"
    assert done.stderr.count(said) == 1, done.stderr
    assert "cluster: NAME" in done.stderr
    # Both clusters' events name another cluster than "inventory": none is taken for its own.
    assert rows(tmp_path / "out", "events") == []
