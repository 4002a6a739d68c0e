"""The report job end to end: a dataset written by the collector's own writer, then
`rollguard-report` in local mode, and `spark-submit` of the job file on a real Spark standalone
master and worker started on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest
from PIL import Image

from rollguard.roller.collect import Dataset, State

from helpers import BIN, free_port, signalled, wait_until

ROOT = Path(__file__).resolve().parents[2]
SPARK_BIN = Path(pyspark.__file__).parent / "bin"
T0 = 1_790_000_000_000


def recovery(
    node: str,
    seq: int,
    ts: int,
    boot: str,
    seconds: int,
    segments: int,
    *,
    state: int = 2,
    phase: str | None = None,
    waiting: int = 0,
) -> list[dict[str, Any]]:
    """STARTING, log loading at a steady rate (one record a second) in `state` with `phase`,
    then, for `waiting` seconds, STARTING and RECOVERY without figures (a Kafka 4.x broker
    waiting for its registration to be accepted), then RUNNING. With a phase, the records
    without figures say "none", as a phase-aware agent writes them; without (None), they are
    all an older agent's records."""
    other = None if phase is None else "none"
    rows = [_row(node, seq, ts, boot, 1, None, None, other)]
    for i in range(seconds):
        left = segments - segments * i // seconds
        rows.append(_row(node, seq + len(rows), ts + 1000 * (i + 1), boot, state, 3, left, phase))
    end = ts + 1000 * (seconds + 1)
    if waiting:
        rows.append(_row(node, seq + len(rows), end, boot, 1, None, None, other))
        end += 1000 * waiting
        rows.append(_row(node, seq + len(rows), end, boot, 2, None, None, other))
        end += 100
    rows.append(_row(node, seq + len(rows), end, boot, 3, None, None, other))
    return rows


def _row(
    node: str,
    seq: int,
    ts: int,
    boot: str,
    state: int,
    logs: int | None,
    segs: int | None,
    phase: str | None = None,
) -> dict[str, Any]:
    return {
        "node": node,
        "nodeId": node,
        "journal": 0,
        "bootId": boot,
        "seq": seq,
        "ts": ts,
        "brokerState": state,
        "remainingLogsToRecover": logs,
        "remainingSegmentsToRecover": segs,
        "recoveryPhase": phase,
    }


def without_phases(root: Path, cluster: str) -> None:
    """Rewrite a cluster's timeline files as a collector older than `recoveryPhase` wrote them."""
    for path in (root / "timeline" / f"cluster={cluster}").rglob("*.parquet"):
        table = pq.ParquetFile(path).read()
        pq.write_table(table.drop_columns(["recoveryPhase"]), path)


def roll_events(roll: str, t: int) -> list[dict[str, Any]]:
    """A roll of east-kafka-0 (into its second, 20 s recovery) and east-kafka-1 (deferred
    first), as the roller writes it."""

    def event(seconds: float, node: str | None, action: str, reason: str = "") -> dict[str, Any]:
        return {"ts": t + int(seconds * 1000), "rollId": roll, "node": node, "action": action,
                "reason": reason}  # fmt: skip

    k0, k1 = "east-kafka-0", "east-kafka-1"
    return [
        event(0, None, "roll-start"),
        event(1, k1, "defer", "east-kafka-0 is not in the ISR of 3 partitions"),
        event(2, k0, "restart", "rolling"),
        *(event(5 + s, k0, "wait-recovery", "progressing") for s in range(0, 22, 2)),
        event(28, k0, "catch-up", "catching up: 2 partitions not yet in sync"),
        event(30, k0, "ready", "restarted, ready and in sync"),
        event(31, k1, "restart", "rolling"),
        event(40, k1, "ready", "restarted, ready and in sync"),
        event(41, None, "roll-completed"),
        # the roll's canary: what each restart cost its client, once its sends were answered
        {**event(42, k0, "canary-cost"), **CANARY_K0},
        {**event(43, k1, "canary-cost"), **CANARY_K1},
    ]


# Two restarts' canary figures, as the collector keeps them from the roller's events.
CANARY_K0 = {"sent": 280, "failed": 0, "p50Ms": 6.0, "p99Ms": 180.0, "maxMs": 420.0,
             "longestGapS": 0.4, "baselineP99Ms": 12.0, "seconds": 28.0}  # fmt: skip
CANARY_K1 = {"sent": 90, "failed": 3, "p50Ms": 7.0, "p99Ms": 950.0, "maxMs": 1800.0,
             "longestGapS": 2.5, "baselineP99Ms": 12.0, "seconds": 9.0}  # fmt: skip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dataset")
    for cluster, durations in (("east", [20, 40, 60]), ("west", [30, 90])):
        rows: list[dict[str, Any]] = []
        for index, seconds in enumerate(durations):
            node = f"{cluster}-kafka-{index}"
            first = recovery(node, 1, T0, "boot-1", seconds, 1000)
            # the newest agents say which loading is a recovery; Kafka 4.x may do it in STARTING,
            # and stay in STARTING, then RECOVERY, until its registration is accepted: the
            # recovery is over (completed) when the loading is
            phased: dict[str, Any] = {}
            if cluster == "east":
                phased = {"state": 1, "phase": "recovering", "waiting": 12}
            day2 = T0 + 86_400_000
            second = recovery(node, len(first) + 1, day2, "boot-2", seconds // 2, 500, **phased)
            rows += first + second
        if cluster == "east":  # a clean start's log loading, then RECOVERY: not an episode
            clean = {"state": 1, "phase": "loading", "waiting": 12}
            rows += recovery("east-kafka-5", 1, T0, "boot-1", 10, 100, **clean)
        # still recovering at the end of the data
        rows += recovery(f"{cluster}-kafka-9", 1, T0, "boot-1", 30, 900)[:-1]
        events = [
            {
                "ts": T0 + 2000,
                "rollId": "r1",
                "node": f"{cluster}-kafka-0",
                "action": "wait-recovery",
                "reason": "progressing",
            }
        ]
        if cluster == "east":
            events += roll_events("r2", T0 + 86_400_000 - 5000)
        Dataset(root, cluster).commit(State(), rows, events)
    without_phases(root, "west")  # a dataset collected partly before the column existed
    return root


def check_outputs(out: Path) -> dict[str, Any]:
    summary = json.loads((out / "summary.json").read_text())
    episodes = pq.read_table(out / "episodes").to_pylist()
    # east's second recoveries are in STARTING; east-kafka-5 only loaded its logs (a clean start)
    # and its RECOVERY record without figures is no recovery either
    assert len(episodes) == summary["episodes"] == 2 * 3 + 2 * 2 + 2
    assert (summary["rolls"], summary["rollsWithCanary"]) == (3, 1)  # r2 alone had a canary
    assert "east-kafka-5" not in {e["node"] for e in episodes}
    clusters = {c["cluster"]: c for c in summary["clusters"]}
    # the second recoveries end in STARTING, when their logs are loaded: completed, not cut short
    assert clusters["east"]["completed"] == 6 and clusters["east"]["running"] == 1
    second = {e["node"]: e for e in episodes if e["bootId"] == "boot-2"}
    assert {n: (e["outcome"], e["durationSeconds"]) for n, e in second.items()} == {
        "east-kafka-0": ("completed", 10.0),
        "east-kafka-1": ("completed", 20.0),
        "east-kafka-2": ("completed", 30.0),
        "west-kafka-0": ("completed", 15.0),
        "west-kafka-1": ("completed", 45.0),
    }
    assert clusters["east"]["maxSeconds"] == 60.0  # first RECOVERY record to RUNNING
    assert clusters["west"]["slowestNodes"][0] == "west-kafka-1"
    assert sum(e["skippedRestarts"] for e in episodes) == 3  # r1 in each cluster, r2 in east
    for name in ("nodes", "clusters", "eta", "eta_summary", "daily", "rolls", "roll_phases"):
        assert pq.read_table(out / name).num_rows > 0
    rolls = pq.read_table(out / "rolls").to_pylist()
    outcomes = [(r["rollId"], r["outcome"]) for r in rolls]
    assert outcomes == [("r2", "completed"), ("r1", "unfinished"), ("r1", "unfinished")]
    # the canary's costs come after the roll's outcome: outside its duration
    assert rolls[0]["durationSeconds"] == 41.0 and rolls[0]["nodeSeconds"] == 28.0 + 9.0
    # What the restarts cost clients: r2 alone had a canary. The test's own figures from the
    # two costs it wrote.
    [impact] = pq.read_table(out / "client_impact").to_pylist()
    costs = (CANARY_K0, CANARY_K1)
    assert (impact["cluster"], impact["rollId"], impact["restarts"]) == ("east", "r2", 2)
    assert impact["sent"] == sum(c["sent"] for c in costs)
    assert impact["failed"] == sum(c["failed"] for c in costs)
    assert impact["worstP99Ms"] == max(c["p99Ms"] for c in costs)
    assert impact["medianP99Ms"] == statistics.median(c["p99Ms"] for c in costs)
    assert impact["longestGapS"] == max(c["longestGapS"] for c in costs)
    assert impact["baselineP99Ms"] == 12.0
    against = max(c["p99Ms"] / c["baselineP99Ms"] for c in costs)
    assert impact["worstAgainstBaseline"] == pytest.approx(against)
    per_node = {n["node"]: n for n in pq.read_table(out / "client_impact_nodes").to_pylist()}
    assert sorted(per_node) == ["east-kafka-0", "east-kafka-1"]
    assert (per_node["east-kafka-1"]["failed"], per_node["east-kafka-1"]["worstP99Ms"]) == (
        3,
        950.0,
    )
    phases = [
        (p["node"], p["phase"], p["seconds"])
        for p in pq.read_table(out / "roll_phases").to_pylist()
        if p["rollId"] == "r2"
    ]
    assert phases == [
        ("east-kafka-0", "restart", 3.0),
        ("east-kafka-0", "log recovery", 23.0),
        ("east-kafka-0", "ISR catch-up", 2.0),
        ("east-kafka-1", "deferred", 30.0),
        ("east-kafka-1", "restart", 9.0),
    ]
    expected = json.loads((out / "expectations.json").read_text())
    assert expected["version"] == 1 and len(expected["nodes"]) == 7
    assert not any(n["enoughHistory"] for n in expected["nodes"])  # 2 episodes each
    html = (out / "report.html").read_text()
    assert html.index("Roll r2") < html.index("Expectations for the next roll")
    # the page tells how to use the file the job wrote, by its path
    assert f"rollguard roll --expectations {(out / 'expectations.json').resolve()}" in html
    assert 'href="#curves-east-r2"' in html and 'id="curves-east-r2"' in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    # 3 rolls: 3 timelines, 2 with curves (+ 5 others), and the client impact's chart
    assert len(images) == 3 + 3 + 2 + 3 + 1
    assert "What restarts cost clients" in html and "79.2 \N{MULTIPLICATION SIGN}" in html
    for data in images:
        picture = Image.open(io.BytesIO(base64.b64decode(data)))
        picture.load()  # decodes every pixel
        assert picture.format == "PNG" and picture.width > 300
    assert "still running" in html and "east-kafka-9" in html
    return summary


@pytest.mark.timeout(660)
def test_rollguard_report_in_local_mode(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = subprocess.run(
        [str(BIN / "rollguard-report"), "--dataset", str(dataset), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,  # 40 s on an idle machine; a hang guard, beside a dozen JVMs in make test
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert str((out / "report.html").resolve()) in done.stdout
    check_outputs(out)


def test_missing_or_empty_datasets_exit_2_with_a_message(tmp_path: Path) -> None:
    for dataset, words in ((tmp_path / "nope", "does not exist"), (tmp_path, "rollguard collect")):
        done = subprocess.run(
            [
                str(BIN / "rollguard-report"),
                "--dataset",
                str(dataset),
                "--out",
                str(tmp_path / "o"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr


class Standalone:
    """A Spark standalone master and one worker, as `spark-class` starts them."""

    def __init__(self, work: Path) -> None:
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs = work
        try:
            self._start_both()
        except BaseException:
            self.stop()  # a master without its worker is not left behind for the next test
            raise

    def _start_both(self) -> None:
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui),
        )  # fmt: skip
        wait_until(self.workers_alive(0), timeout=60, what="the Spark master")
        self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url, "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
            "--webui-port", str(free_port()), "--work-dir", str(self.logs / "work"),
        )  # fmt: skip
        wait_until(self.workers_alive(1), timeout=60, what="a Spark worker to register")

    def _start(self, name: str, *args: str) -> None:
        with (self.logs / f"{name}.log").open("wb") as log:
            self.processes.append(
                subprocess.Popen(
                    [str(SPARK_BIN / "spark-class"), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            )

    def status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as answer:
                return json.loads(answer.read())  # type: ignore[no-any-return]
        except (OSError, ValueError):  # not up, or its UI not yet serving the JSON page
            return None

    def workers_alive(self, count: int):  # type: ignore[no-untyped-def]
        def probe() -> bool:
            status = self.status()
            return status is not None and status.get("aliveworkers", 0) >= count

        return probe

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    cluster = Standalone(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.timeout(660)
def test_spark_submit_of_the_job_file_on_a_standalone_cluster(
    standalone: Standalone, dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    done = subprocess.run(
        [
            str(SPARK_BIN / "spark-submit"),
            "--master",
            standalone.url,
            "--driver-memory",
            "1g",
            "--executor-memory",
            "1g",
            str(ROOT / "spark" / "src" / "rollguard" / "spark" / "job.py"),
            "--dataset",
            str(dataset),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard: a minute on an idle machine
        env=standalone.env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check_outputs(out)
    status = standalone.status()
    assert status is not None
    apps = [a["name"] for a in status["completedapps"] + status["activeapps"]]
    assert "rollguard-report" in apps  # it ran on the cluster, not in local mode


def test_the_job_file_runs_from_a_checkout_without_the_installed_namespace(tmp_path: Path) -> None:
    """spark-submit runs job.py as a file: it finds rollguard.spark and rollguard.shared in the
    checkout's src folders by itself (`-S`: no site-packages, so no installed rollguard)."""
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "spark" / "src" / "rollguard" / "spark" / "job.py"),
         "--dataset", str(tmp_path / "none"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    missing = tmp_path / "none"
    assert done.stderr.strip() == f"rollguard-report: dataset folder {missing} does not exist"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_report_with_exit_3_and_one_line(
    dataset: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "report"
    argv = [str(BIN / "rollguard-report"), "--dataset", str(dataset), "--out", str(out)]
    # Spark is up and the job has started writing: the tables' folder exists
    done = signalled(argv, signum, out.exists, what="the job", timeout=120, ends_within=60)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert f"rollguard-report: interrupted; {out} is incomplete" in done.stderr
    assert done.seconds < 15, done.seconds  # the session stops (its JVM with it) within seconds


def test_the_curves_read_the_days_an_episode_spans_in_the_collectors_folders() -> None:
    from rollguard.spark.curves import _days

    day = 86_400_000
    midnight = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    assert _days(midnight, midnight) == ["2026-01-01"]
    assert _days(midnight - 1, midnight) == ["2025-12-31", "2026-01-01"]
    assert _days(midnight - day, midnight + 2 * day - 1) == [
        "2025-12-31", "2026-01-01", "2026-01-02",
    ]  # fmt: skip
