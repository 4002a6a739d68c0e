"""`rollguard collect` against real agents (processes, mTLS, real journals) and a dead one and a
hung one: concurrency, cursors, resumption after crashes, gaps, journal resets, roller events."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rollguard.roller.collect.collector import Dataset
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.timeline import NO_RECOVERY, PREFIX, SUFFIX, TimelineRecord
from rollguard.shared.wire import RecoveryPhase

from helpers import (
    Agent,
    Broker,
    Pki,
    SilentJmxPort,
    free_port,
    inventory,
    rollguard,
    wait_until,
)

T0 = 1_790_000_000_000  # 2026-09-21, so records fall on two dates


class Killed(Exception):
    """The collector process dying at this point."""


def seed_journal(
    folder: Path, node: str, count: int, *, first: int = 1, per_file: int = 4000
) -> None:
    """Timeline segment files as the agent writes them: a recovery, then RUNNING heartbeats;
    in odd boots with the phase (the recovery's, then "none"), in even ones as an agent older
    than the field wrote them (no `recoveryPhase` key). (Written directly: 10,000 fsynced
    appends would be slow and prove nothing more.)"""
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for seq in range(first, first + count):
        recovering = seq % 1000 < 600
        phase = RecoveryPhase.RECOVERING if recovering else NO_RECOVERY
        record = TimelineRecord(
            node,
            f"boot-{seq // 1000}",
            seq,
            T0 + seq * 60_000,
            2 if recovering else 3,
            100 if recovering else None,
            max(0, 6000 - seq % 1000 * 10) if recovering else None,
            recovery_phase=phase if seq // 1000 % 2 == 1 else None,
        )
        body = record.to_wire()
        if seq // 1000 % 2 == 0:
            del body["recoveryPhase"]
        lines.append(json.dumps(body, separators=(",", ":")))
    for start in range(0, len(lines), per_file):
        name = f"{PREFIX}{first + start:020d}{SUFFIX}"
        (folder / name).write_text("\n".join(lines[start : start + per_file]) + "\n")


def collect(
    pki: Pki, inv: Path, out: Path, *extra: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`rollguard collect` of cluster prod, its agents given a second and one retry."""
    return rollguard("collect", "--inventory", str(inv), "--out", str(out), "--cluster", "prod",
                     "--timeout", "1", "--retry-max-retries", "1",
                     "--retry-initial-backoff-ms", "50", *pki.client_flags(), *extra,
                     timeout=timeout)  # fmt: skip


def rows(out: Path, table: str = "timeline") -> list[dict[str, Any]]:
    files = sorted((out / table).rglob("*.parquet"))
    found: list[dict[str, Any]] = []
    for path in files:
        parts = dict(p.split("=", 1) for p in path.parent.relative_to(out / table).parts)
        found.extend({**r, **parts} for r in pq.read_table(path).to_pylist())
    return found


def assert_complete(found: list[dict[str, Any]], node: str, latest: int) -> None:
    seqs = sorted(r["seq"] for r in found if r["node"] == node)
    assert seqs == list(range(1, latest + 1)), f"{node}: duplicates or gaps"


def test_collects_every_agent_in_pages_and_partitions_by_cluster_and_date(
    pki: Pki, tmp_path: Path, broker: Broker
) -> None:
    seed_journal(tmp_path / "a", "kafka-0", 12_000)
    seed_journal(tmp_path / "b", "kafka-1", 300)
    args = ("--heartbeat-interval", "3600")
    with (
        Agent(
            pki, broker.address, "--data-dir", str(tmp_path / "a"), "--node-id", "kafka-0", *args
        ) as a,
        Agent(
            pki, broker.address, "--data-dir", str(tmp_path / "b"), "--node-id", "kafka-1", *args
        ) as b,
    ):
        inv = inventory(tmp_path / "prod.yaml", [a.api, b.api])
        out = tmp_path / "ds"
        done = collect(pki, inv, out, "--page-size", "5000")
        assert done.returncode == 0, done.stderr
        found = rows(out)
        latest_a = max(r["seq"] for r in found if r["node"] == "kafka-0")
        assert latest_a >= 12_000  # the seeded records and the agent's own
        assert_complete(found, "kafka-0", latest_a)
        assert_complete(found, "kafka-1", max(r["seq"] for r in found if r["node"] == "kafka-1"))
        assert {r["cluster"] for r in found} == {"prod"}
        dates = {r["date"] for r in found}
        assert "2026-09-21" in dates and len(dates) >= 3
        for r in found:  # the date partition is the record's UTC date
            assert time.strftime("%Y-%m-%d", time.gmtime(r["ts"] / 1000)) == r["date"]
        assert "kafka-0" in done.stdout and "ok: " in done.stdout
        assert "collected" in done.stderr and "0 not caught up" in done.stderr
        # the schema Spark reads
        table = pq.read_table(next((out / "timeline").rglob("*.parquet")))
        assert str(table.schema.field("seq").type) == "int64"
        assert str(table.schema.field("journal").type) == "int32"
        assert str(table.schema.field("recoveryPhase").type) == "string"
        # the phase where the agent recorded one ("none": a sample without a recovery object);
        # null from an older agent
        seeded = [r for r in found if r["node"] == "kafka-0" and r["seq"] <= 12_000]
        phases = {(int(r["bootId"][5:]) % 2, r["brokerState"], r["recoveryPhase"]) for r in seeded}
        assert phases == {(1, 2, "recovering"), (1, 3, "none"), (0, 2, None), (0, 3, None)}


def test_a_down_and_a_hung_agent_delay_nobody_and_are_reported(
    pki: Pki, tmp_path: Path, broker: Broker
) -> None:
    seed_journal(tmp_path / "a", "kafka-0", 500)
    hung = SilentJmxPort()  # accepts TCP, never completes TLS
    try:
        with Agent(
            pki, broker.address, "--data-dir", str(tmp_path / "a"), "--node-id", "kafka-0"
        ) as a:
            dead, silent = f"https://127.0.0.1:{free_port()}", f"https://127.0.0.1:{hung.port}"
            inv = inventory(tmp_path / "prod.yaml", [a.api, dead, silent])
            out = tmp_path / "ds"
            started = time.monotonic()
            done = collect(pki, inv, out, "--agent-deadline", "3", "--timeout", "30")
            took = time.monotonic() - started
        assert done.returncode == 1, done.stderr
        lines = {line.split()[0]: line for line in done.stdout.splitlines()}
        assert "ok:" in lines["kafka-0"]
        assert "unavailable" in lines["kafka-1"] and "unreachable" in lines["kafka-1"]
        assert "timed-out" in lines["kafka-2"]
        assert "2 not caught up: kafka-1, kafka-2" in done.stderr
        assert took < 15, took  # bounded by the deadline, not by the hung agent
        found = rows(out)
        assert {r["node"] for r in found} == {"kafka-0"}
        assert_complete(found, "kafka-0", max(r["seq"] for r in found))
    finally:
        hung.close()


def test_runs_resume_from_cursors_and_survive_crashes_at_each_commit_step(
    pki: Pki, tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from rollguard.roller.agent_client import AgentClient
    from rollguard.roller.collect import collector as collect_module
    from rollguard.roller.model import Node, Role
    from rollguard.shared.retry import RetryPolicy
    from rollguard.shared.tls import client_context

    seed_journal(tmp_path / "a", "kafka-0", 2500)
    with Agent(
        pki,
        broker.address,
        "--data-dir",
        str(tmp_path / "a"),
        "--node-id",
        "kafka-0",
        "--heartbeat-interval",
        "0.2",
    ) as a:
        node = Node(0, "kafka-0", frozenset({Role.BROKER}), a.api)
        out = tmp_path / "ds"

        def run() -> collect_module.CollectResult:
            async def go() -> collect_module.CollectResult:
                tls = client_context(pki.ca, pki.client_cert, pki.client_key)
                async with AgentClient(tls, RetryPolicy(max_retries=1)) as client:
                    return await collect_module.collect(
                        client,
                        [node],
                        Dataset(out, "prod"),
                        events=[],
                        concurrency=4,
                        page_size=700,
                        deadline=20,
                    )

            return asyncio.run(go())

        first = run()
        assert first.nodes[0].records >= 2500 and first.nodes[0].pages >= 4

        # Killed after the staged files were written, before the state was saved: the staged
        # files are dropped and the same records pulled again next time.
        wait_until(
            lambda: a.state(f"/v1/recovery-timeline?after={first.nodes[0].after}").json()[
                "records"
            ],
            timeout=10,
            what="new records",
        )  # type: ignore[index]
        real_write = collect_module.atomic_write

        def crash(*args: object, **kwargs: object) -> None:
            raise Killed

        monkeypatch.setattr(collect_module, "atomic_write", crash)
        with pytest.raises(Killed):
            run()
        assert any((out / "_collector").rglob("*.parquet"))  # staged, not committed
        monkeypatch.setattr(collect_module, "atomic_write", real_write)

        # Killed after the state was saved, before the files were moved: the next run moves
        # them, and does not pull those records again.
        wait_until(
            lambda: a.state(f"/v1/recovery-timeline?after={first.nodes[0].after + 2}").json()[
                "records"
            ],
            timeout=10,
            what="more records",
        )  # type: ignore[index]
        real_move = Dataset._move
        calls = {"n": 0}

        def crash_move(self: Dataset, pending: object) -> None:
            calls["n"] += 1
            if calls["n"] == 1:
                raise Killed
            real_move(self, pending)  # type: ignore[arg-type]

        monkeypatch.setattr(Dataset, "_move", crash_move)
        with pytest.raises(Killed):
            run()
        state = json.loads((out / "_collector" / "prod.json").read_text())
        assert state["pending"]
        monkeypatch.setattr(Dataset, "_move", real_move)

        last = run()
        assert not list((out / "_collector").rglob("*.parquet"))
        found = rows(out)
        assert_complete(found, "kafka-0", last.nodes[0].after)
        assert len(found) == last.nodes[0].after


def test_gaps_and_journal_resets_are_reported_not_hidden(
    pki: Pki, tmp_path: Path, broker: Broker
) -> None:
    data = tmp_path / "a"
    seed_journal(data, "kafka-0", 3000, per_file=1000)
    out = tmp_path / "ds"
    args = ("--data-dir", str(data), "--node-id", "kafka-0", "--heartbeat-interval", "3600")
    with Agent(pki, broker.address, *args) as a:
        inv = inventory(tmp_path / "prod.yaml", [a.api])
        assert collect(pki, inv, out).returncode == 0
    # Records expire on the agent before the collector comes back (here: the agent's journal
    # now begins at 5000)...
    shutil.rmtree(data)
    seed_journal(data, "kafka-0", 2000, first=5000, per_file=1000)
    with Agent(pki, broker.address, *args) as a:
        inv = inventory(tmp_path / "prod.yaml", [a.api])
        done = collect(pki, inv, out)
    assert done.returncode == 0, done.stderr
    assert "GAP: records 3" in done.stdout and "-4999 expired" in done.stdout
    # ...and a journal that starts again (data lost) is read from the start as journal 1.
    shutil.rmtree(data)
    with Agent(pki, broker.address, *args) as a:
        inv = inventory(tmp_path / "prod.yaml", [a.api])
        wait_until(
            lambda: a.state("/v1/recovery-timeline").json()["latest"] >= 1,
            timeout=10,
            what="a record",
        )  # type: ignore[index]
        done = collect(pki, inv, out)
    assert done.returncode == 0, done.stderr
    assert "journal started again" in done.stdout
    found = rows(out)
    assert {r["journal"] for r in found if r["seq"] == 1} == {0, 1}


def test_roller_event_journals_are_imported_once(pki: Pki, tmp_path: Path, broker: Broker) -> None:
    state_dir = tmp_path / "state"
    log = EventLog(state_dir / "events-r1.jsonl", "r1")
    log.write("kafka-0", "restart", "config change")
    log.write("kafka-0", "wait-recovery", "progressing", remainingSegmentsToRecover=10)
    out = tmp_path / "ds"
    with Agent(pki, broker.address, "--data-dir", str(tmp_path / "a"), "--node-id", "kafka-0") as a:
        inv = inventory(tmp_path / "prod.yaml", [a.api])
        assert collect(pki, inv, out, "--events", str(state_dir)).returncode == 0
        with (state_dir / "events-r1.jsonl").open("a") as handle:
            handle.write("not json\n")
        log.write("kafka-0", "ready", "restarted and ready")
        log.write("kafka-0", "canary-cost", "send p50 5.0ms ...", seconds=12.5, sent=120,
                  failed=2, p50Ms=5.0, p99Ms=410.0, maxMs=812.3, longestGapS=1.2,
                  baselineP99Ms=14.0, brokers={"0": {"sent": 40}})  # fmt: skip
        with (state_dir / "events-r1.jsonl").open("a") as handle:
            handle.write('{"ts": "2026-11-22T')  # being written: left for next time
        done = collect(pki, inv, out, "--events", str(state_dir))
    assert done.returncode == 0, done.stderr
    assert "malformed event skipped" in done.stderr and "line 1" in done.stderr
    events = rows(out, "events")
    assert [e["action"] for e in sorted(events, key=lambda e: e["ts"])] == [
        "restart",
        "wait-recovery",
        "ready",
        "canary-cost",
    ]
    assert {e["rollId"] for e in events} == {"r1"} and all(e["node"] == "kafka-0" for e in events)
    # The canary's figures are columns of their own; the other events have none.
    [cost] = [e for e in events if e["action"] == "canary-cost"]
    figures = ("seconds", "sent", "failed", "p50Ms", "p99Ms", "maxMs", "longestGapS")
    assert [cost[k] for k in (*figures, "baselineP99Ms")] == [
        12.5, 120, 2, 5.0, 410.0, 812.3, 1.2, 14.0
    ]  # fmt: skip
    assert all(e[k] is None for e in events if e is not cost for k in figures)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--page-size", "0"], "--page-size"),
        (["--concurrency", "x"], "--concurrency"),
        (["--cluster", "a/b"], "cluster name"),
        (["--events", "/nonexistent"], "/nonexistent"),
    ],
)
def test_bad_flags_exit_2_with_a_message(
    pki: Pki, tmp_path: Path, flags: list[str], message: str
) -> None:
    inv = inventory(tmp_path / "prod.yaml", [f"https://127.0.0.1:{free_port()}"])
    out = str(tmp_path / "o")
    done = rollguard("collect", "--inventory", str(inv), "--out", out, *pki.client_flags(), *flags)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_records_an_agent_could_not_write_are_reported_as_a_gap(
    pki: Pki, tmp_path: Path, broker: Broker
) -> None:
    from rollguard.shared.timeline import Gap

    data = tmp_path / "a"
    seed_journal(data, "kafka-0", 20)
    # The agent's gap marker after its disk was full: 37 records between those times were lost.
    marker = TimelineRecord("kafka-0", "boot-0", 21, T0 + 21 * 60_000, 3,
                            unwritten=Gap(T0 + 20 * 60_000, T0 + 21 * 60_000 - 1, 37))  # fmt: skip
    with (data / f"{PREFIX}{1:020d}{SUFFIX}").open("a") as journal:
        journal.write(json.dumps(marker.to_wire(), separators=(",", ":")) + "\n")
    args = ("--data-dir", str(data), "--node-id", "kafka-0", "--heartbeat-interval", "3600")
    with Agent(pki, broker.address, *args) as a:
        inv = inventory(tmp_path / "prod.yaml", [a.api])
        done = collect(pki, inv, tmp_path / "ds")
    assert done.returncode == 0, done.stderr
    assert "GAP: 37 records from 2026-09-21T" in done.stdout
    assert "were never written (the agent's disk was failing)" in done.stdout
