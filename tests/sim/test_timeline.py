"""The recovery timeline: the store on disk, kill -9, rotation, expiry, the agent's endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rollguard.agent.readings import FailureReason
from rollguard.agent.sampler import Sample, Unavailable, unavailable
from rollguard.agent.timeline_recorder import TimelineRecorder
from rollguard.agent.timeline_store import TimelineStore
from rollguard.shared.errors import WireFormatError
from rollguard.shared.states import BrokerState
from rollguard.shared.timeline import (
    NO_RECOVERY,
    Gap,
    Page,
    TimelineRecord,
    segment_name,
    segment_seq,
)
from rollguard.shared.wire import BrokerStateReport, RecoveryPhase, RecoveryProgress

from helpers import Agent, Broker, Pki, free_port, wait_until


def test_records_get_increasing_seqs_that_continue_after_reopening(tmp_path: Path) -> None:
    store = TimelineStore(tmp_path)
    assert store.append("kafka-0", "boot1", 1000, 1, None, None).seq == 1
    assert store.append("kafka-0", "boot1", 2000, 2, 5, 50).seq == 2
    again = TimelineStore(tmp_path)
    assert again.append("kafka-0", "boot2", 3000, 3, None, None).seq == 3
    page = again.read(0, 10)
    assert [(r.seq, r.boot_id, r.broker_state) for r in page.records] == [
        (1, "boot1", 1),
        (2, "boot1", 2),
        (3, "boot2", 3),
    ]
    assert page.records[1].remaining_segments == 50 and page.records[0].remaining_logs is None
    assert (page.next_cursor, page.earliest, page.latest, page.expired) == (3, 1, 3, None)


def test_records_carry_the_recovery_phase_and_read_records_of_older_agents() -> None:
    record = TimelineRecord("n", "b", 1, 1000, 1, 5, 0, recovery_phase=RecoveryPhase.LOADING)
    wire = record.to_wire()
    assert wire["recoveryPhase"] == "loading"
    assert TimelineRecord.from_wire(json.loads(json.dumps(wire))) == record
    assert TimelineRecord("n", "b", 2, 2000, 3).to_wire()["recoveryPhase"] is None
    # a phase-aware agent's sample without a recovery object: "none", not null
    running = TimelineRecord("n", "b", 2, 2000, 3, recovery_phase=NO_RECOVERY)
    assert running.to_wire()["recoveryPhase"] == "none"
    assert TimelineRecord.from_wire(json.loads(json.dumps(running.to_wire()))) == running
    older = {k: v for k, v in wire.items() if k != "recoveryPhase"}  # an agent before the field
    assert TimelineRecord.from_wire(older).recovery_phase is None
    assert not running.same_state(TimelineRecord("n", "b", 5, 5000, 3))  # "none" is not null
    # a phase this reader does not know: the one that claims more, as the wire reader does
    newer = TimelineRecord.from_wire({**wire, "recoveryPhase": "replaying"})
    assert newer.recovery_phase is RecoveryPhase.RECOVERING
    with pytest.raises(WireFormatError, match="recoveryPhase"):
        TimelineRecord.from_wire({**wire, "recoveryPhase": 1})
    # the same counters in another phase are another state of the broker
    recovering = TimelineRecord("n", "b", 3, 3000, 1, 5, 0, recovery_phase=RecoveryPhase.RECOVERING)
    assert not recovering.same_state(record)
    assert record.same_state(
        TimelineRecord("n", "b", 4, 4000, 1, 5, 0, None, RecoveryPhase.LOADING)
    )


def sample(state: BrokerState, recovery: RecoveryProgress | None = None) -> Sample:
    return Sample(BrokerStateReport(state, recovery), b"{}", 0.0)


def test_the_recorder_writes_the_phase_and_a_change_of_phase_alone_is_a_record(
    tmp_path: Path,
) -> None:
    store = TimelineStore(tmp_path)
    now = [1000.0]
    recorder = TimelineRecorder(store, "kafka-0", heartbeat=300.0, clock=lambda: now[0])
    outcomes: list[Sample | Unavailable] = [
        sample(BrokerState.STARTING),
        sample(BrokerState.STARTING, RecoveryProgress(7, 0, RecoveryPhase.LOADING)),
        sample(BrokerState.STARTING, RecoveryProgress(7, 0, RecoveryPhase.LOADING)),  # same
        sample(BrokerState.STARTING, RecoveryProgress(7, 0, RecoveryPhase.RECOVERING)),
        sample(BrokerState.STARTING),  # loaded: STARTING until the registration is accepted
        sample(BrokerState.RECOVERY),  # RECOVERY without figures: said to be no recovery
        unavailable(FailureReason.JMX_UNREACHABLE, "gone"),
    ]
    previous: Sample | Unavailable = unavailable(FailureReason.NO_SAMPLE_YET, "")
    for outcome in outcomes:
        recorder.update(previous, outcome)
        previous, now[0] = outcome, now[0] + 1
    asyncio.run(recorder.close())
    records = store.read(0, 100).records
    # a sample without a recovery object is "none" (a phase-aware agent: not loading); only
    # the lost sample, which knows nothing, is null, like the records of an older agent
    assert [(r.broker_state, r.remaining_logs, r.recovery_phase) for r in records] == [
        (1, None, NO_RECOVERY),
        (1, 7, RecoveryPhase.LOADING),
        (1, 7, RecoveryPhase.RECOVERING),
        (1, None, NO_RECOVERY),
        (2, None, NO_RECOVERY),
        (None, None, None),
    ]
    lines = [json.loads(line) for line in lines_of(tmp_path)]
    assert [line["recoveryPhase"] for line in lines] == [
        "none",
        "loading",
        "recovering",
        "none",
        "none",
        None,
    ]


def test_a_torn_last_line_is_cut_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    store = TimelineStore(tmp_path)
    for i in range(5):
        store.append("n", "b", i, 2, 10 - i, 100 - i)
    ((_, path),) = store.segments()
    with path.open("ab") as handle:
        handle.write(b'{"nodeId":"n","bootId":"b","seq":6,"ts":')  # kill -9 mid-write
    reopened = TimelineStore(tmp_path)
    assert reopened.last_seq == 5
    assert path.read_bytes().endswith(b"}\n")
    assert reopened.append("n", "b2", 9, 3, None, None).seq == 6


def test_pages_follow_the_cursor_across_rotated_segments(tmp_path: Path) -> None:
    store = TimelineStore(tmp_path, segment_bytes=400)
    now = int(time.time() * 1000)
    for i in range(1, 31):
        store.append("n", "b", now + i, 2, i, i)
    assert len(store.segments()) > 3
    seen, cursor = [], 0
    while True:
        page = store.read(cursor, 7)
        if not page.records:
            break
        seen += [r.seq for r in page.records]
        cursor = page.next_cursor
    assert seen == list(range(1, 31))


def test_segment_names_carry_their_first_seq_and_nothing_else_counts(tmp_path: Path) -> None:
    assert segment_name(42) == "timeline-00000000000000000042.jsonl"
    assert segment_seq(segment_name(42)) == 42
    for name in ("timeline-.jsonl", "timeline-12x.jsonl", "timeline-1.json", "other-1.jsonl"):
        assert segment_seq(name) is None
    store = TimelineStore(tmp_path)
    store.append("n", "b", 1, 3, None, None)
    (tmp_path / "timeline-notes.jsonl").write_text("not a segment\n")
    assert [first for first, _ in store.segments()] == [1]


def test_old_segments_expire_whole_and_a_reader_behind_them_is_told(tmp_path: Path) -> None:
    now = [1_000_000.0]
    store = TimelineStore(tmp_path, segment_bytes=300, retention_seconds=3600, clock=lambda: now[0])
    for _ in range(10):  # ten records written long ago
        store.append("n", "b", int((now[0] - 7200) * 1000), 3, None, None)
    for _ in range(10):
        store.append("n", "b", int(now[0] * 1000), 3, None, None)
    earliest = store.segments()[0][0]
    assert earliest > 1, "old segments were not expired"
    page = store.read(0, 100)
    assert page.expired == (1, earliest - 1)
    assert page.records[0].seq == earliest and page.records[-1].seq == 20


WRITER = """
import sys
import time
from pathlib import Path
from rollguard.agent.timeline_store import TimelineStore
store = TimelineStore(Path(sys.argv[1]), segment_bytes=2000)
i = 0
while True:
    i += 1
    record = store.append("n", sys.argv[2], int(time.time() * 1000), 2, i, i)
    print(record.seq, flush=True)  # acknowledged: fsynced before this line
"""


def test_kill_9_during_writes_loses_nothing_acknowledged(tmp_path: Path) -> None:
    acknowledged = 0
    for boot in ("boot1", "boot2", "boot3"):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), boot], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        for _ in range(200 + acknowledged % 37):
            acknowledged = int(writer.stdout.readline())
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        page = TimelineStore(tmp_path).read(0, 100_000)
        seqs = [r.seq for r in page.records]
        assert seqs == list(range(1, len(seqs) + 1)), "seq must be gapless and increasing"
        assert seqs[-1] >= acknowledged


def running(agent: Agent) -> bool:
    answer = agent.state()
    return answer.status == 200 and answer.json()["brokerState"] == 3  # type: ignore[index]


def test_the_agent_records_a_recovery_and_serves_it_with_a_cursor(pki: Pki, tmp_path: Path) -> None:
    data = tmp_path / "data"
    flags = ("--starting-ms", "1000", "--recovery-ms", "3000", "--dirs", "2", "--threads", "2")
    args = ("--data-dir", str(data), "--node-id", "kafka-7")
    # The agent is sampling before the broker starts (null states: no JMX yet), so STARTING is
    # recorded however long the agent itself takes to start on a busy machine.
    port = free_port()
    with contextlib.ExitStack() as stack:
        agent = stack.enter_context(Agent(pki, f"127.0.0.1:{port}", *args))
        broker = stack.enter_context(Broker(*flags, port=port))
        wait_until(lambda: running(agent), timeout=30, what="RUNNING")
        body = agent.state("/v1/recovery-timeline?after=0").json()
        assert isinstance(body, dict)
        records = body["records"]
        states = [r["brokerState"] for r in records]
        known = [state for state in states if state is not None]
        assert states == [None] * (len(states) - len(known)) + known  # no JMX, then the broker
        assert known[0] == 1 and known[-1] == 3 and known == sorted(known)
        # the recovery runs in STARTING (as in most restarts of a real Kafka 4.x broker): on
        # record with its figures, the logs left counting down
        recovering = [
            r
            for r in records
            if r["brokerState"] == 1 and r["remainingSegmentsToRecover"] is not None
        ]
        assert recovering and recovering[0]["remainingLogsToRecover"] <= 20
        logs = [r["remainingLogsToRecover"] for r in recovering]
        # gauges are registered one dir at a time: a first sample may see one dir's logs only
        counting = logs[logs.index(max(logs)) :]
        assert counting == sorted(counting, reverse=True) and counting[-1] < counting[0]
        assert max(r["remainingSegmentsToRecover"] for r in recovering) > 10
        # every sample says its phase ("none" without figures); only the lost ones say nothing
        for r in records:
            if r["brokerState"] is None:
                assert r["recoveryPhase"] is None
            elif r["remainingLogsToRecover"] is None:
                assert r["recoveryPhase"] == "none"
            else:
                assert r["recoveryPhase"] in {"loading", "recovering"}
        assert {r["recoveryPhase"] for r in recovering} >= {"recovering"}
        assert records[-1]["recoveryPhase"] == "none"  # RUNNING
        assert {r["nodeId"] for r in records} == {"kafka-7"}
        # one id per agent start, the same in the timeline and in every report
        assert {r["bootId"] for r in records} == {agent.state().json()["agentBootId"]}  # type: ignore[index]
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        last = body["next"]
        assert last == records[-1]["seq"] == body["latest"]
        page = agent.state(f"/v1/recovery-timeline?after={last - 1}&limit=1").json()
        assert [r["seq"] for r in page["records"]] == [last]  # type: ignore[index]
        for bad in ("after=-1", "after=x", "limit=0", "limit=10001"):
            answer = agent.state(f"/v1/recovery-timeline?{bad}")
            assert answer.status == 400 and answer.json()["error"] == "bad-parameter"  # type: ignore[index]
        agent.stop()
        # a new agent start continues the sequence under a new bootId
        with Agent(pki, broker.address, *args) as again:

            def next_boot() -> list[dict[str, object]] | None:
                answer = again.state(f"/v1/recovery-timeline?after={last}")
                records = answer.json()["records"] if answer.status == 200 else []  # type: ignore[index]
                return records or None

            fresh = wait_until(next_boot, timeout=20, what="a record of the new boot")
            assert fresh[0]["seq"] == last + 1 and fresh[0]["bootId"] not in {
                r["bootId"] for r in records
            }


def test_without_a_data_dir_the_timeline_is_404(pki: Pki) -> None:
    with Broker("--state", "3") as broker, Agent(pki, broker.address) as agent:
        answer = agent.state("/v1/recovery-timeline")
        assert answer.status == 404 and answer.json()["error"] == "no-timeline"  # type: ignore[index]


def test_an_unusable_data_dir_exits_2(pki: Pki, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "rollguard-agent"),
            "--cert",
            str(pki.server_cert),
            "--key",
            str(pki.server_key),
            "--cacert",
            str(pki.ca),
            "--listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
            "--data-dir",
            str(blocker / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "--data-dir" in done.stderr
    assert json.dumps(done.stderr).count("\\n") == 1


# ---- a full disk ---------------------------------------------------------------------------


def lines_of(folder: Path) -> list[bytes]:
    """The store's lines as they are on disk (opening a store would repair them)."""
    return [line for path in sorted(folder.glob("timeline-*.jsonl"))
            for line in path.read_bytes().splitlines(True)]  # fmt: skip


def test_a_partial_write_is_cut_and_its_records_become_a_gap_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TimelineStore(tmp_path)
    for i in range(1, 4):
        store.append("n", "b", 1000 * i, 2, 10 - i, 100 - i)
    before = lines_of(tmp_path)
    real_write = os.write

    def half(fd: int, data: bytes) -> int:  # a full disk: part of the line, then nothing
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(os, "write", half)
    for ts in (4000, 5000):
        with pytest.raises(OSError) as failed:
            store.append("n", "b", ts, 2, 6, 60)
        assert failed.value.errno == errno.ENOSPC
    monkeypatch.undo()
    # the torn halves were cut: what was acknowledged is there, byte for byte, and nothing else
    assert lines_of(tmp_path) == before and store.last_seq == 3
    page = store.read(0, 100)
    assert page.unwritten == Gap(4000, 5000, 2)
    assert page.to_wire()["unwritten"] == {"fromTs": 4000, "toTs": 5000, "records": 2}
    assert [r.seq for r in page.records] == [1, 2, 3]

    record = store.append("n", "b", 6000, 3, None, None)  # space is back
    assert record.seq == 5
    page = TimelineStore(tmp_path).read(0, 100)  # as a restarted agent would serve it
    marker = page.records[3]
    assert (marker.seq, marker.ts, marker.broker_state) == (4, 4000, None)
    assert marker.unwritten == Gap(4000, 5000, 2)
    assert [r.seq for r in page.records] == [1, 2, 3, 4, 5] and page.unwritten is None
    wire = Page.from_wire(json.loads(json.dumps(page.to_wire())))
    assert wire.records[3].unwritten == Gap(4000, 5000, 2)


def test_bytes_a_failed_write_could_not_cut_are_cut_before_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TimelineStore(tmp_path)
    store.append("n", "b", 1000, 3, None, None)
    real_write = os.write

    def broken_truncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:7]))
    monkeypatch.setattr(os, "ftruncate", broken_truncate)
    with pytest.raises(OSError):
        store.append("n", "b", 2000, 3, None, None)
    monkeypatch.undo()
    assert lines_of(tmp_path)[-1] == b'{"nodeI'  # still there: the disk refused the cut too
    store.append("n", "b", 3000, 3, None, None)
    records = [json.loads(line) for line in lines_of(tmp_path)]  # every line is whole
    assert [(r["seq"], r["ts"], "unwritten" in r) for r in records] == [
        (1, 1000, False), (2, 2000, True), (3, 3000, False)
    ]  # fmt: skip


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs of its own, so the test can fill it without touching anything else."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        why = mounted.stderr.strip() or f"mount exited {mounted.returncode}"
        pytest.skip(f"cannot mount a small tmpfs here (the disk-full test's own disk): {why}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk`; returns the file that holds them."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_the_agent_on_a_full_disk_keeps_serving_marks_the_gap_and_resumes(
    pki: Pki, small_disk: Path
) -> None:
    data = small_disk / "timeline"
    with (
        Broker("--state", "3") as broker,
        Agent(
            pki, broker.address, "--data-dir", str(data), "--heartbeat-interval", "0.1s"
        ) as agent,
    ):

        def page() -> dict[str, Any]:
            answer = agent.state("/v1/recovery-timeline?after=0&limit=10000")
            assert answer.status == 200, answer.body
            body = answer.json()
            assert isinstance(body, dict)
            return body

        def metric() -> float:
            text = urllib.request.urlopen(agent.probe + "/metrics").read().decode()
            return float(re.search(r"^rollguard_timeline_write_errors_total (\S+)$", text, re.M)[1])  # type: ignore[index]

        wait_until(lambda: page()["latest"] >= 5, timeout=20, what="five records")
        filler = fill(small_disk)
        wait_until(lambda: metric() >= 5, timeout=20, what="failed writes")
        failing = page()
        assert failing["unwritten"]["records"] >= 1
        acknowledged = failing["records"]
        assert [r["seq"] for r in acknowledged] == list(range(1, len(acknowledged) + 1))
        # the broker's state does not depend on the disk
        assert all(agent.state().status == 200 for _ in range(3))
        assert agent.output.text().count("cannot write the recovery timeline") == 1

        filler.unlink()
        resumed = wait_until(
            lambda: (
                (body := page())
                and "unwritten" not in body
                and body["latest"] > len(acknowledged) + 1
                and body
            ),
            timeout=20,
            what="writes to resume",
        )
        records = resumed["records"]
        assert records[: len(acknowledged)] == acknowledged  # nothing acknowledged was lost
        marker = records[len(acknowledged)]
        assert marker["brokerState"] is None and marker["unwritten"]["records"] >= 5
        assert marker["ts"] == marker["unwritten"]["fromTs"] <= marker["unwritten"]["toTs"]
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        assert records[-1]["brokerState"] == 3
        for path in data.iterdir():  # every line on disk is a whole record
            for line in path.read_bytes().splitlines():
                json.loads(line)
        wait_until(lambda: "is written again" in agent.output.text(), timeout=5, what="a line")
        assert agent.output.text().count("is written again") == 1
