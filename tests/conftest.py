"""Fixtures: certificates (from rollguard's own PKI and from trustme) and the test broker build."""

from __future__ import annotations

import itertools
import json
import os
import resource
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from kafka.net.inet import KafkaNetSocket

from rollguard.agent.jvm import reader_classpath
from rollguard.peers.harness import InventoryRoll
from rollguard.peers.realkube import NEWEST, Binaries, ControlPlane, KubeBinariesMissing
from rollguard.peers.realkube_binaries import BUILD_STATUS, wait_for_build
from rollguard.peers.rollcluster import RollCluster

from helpers import (
    ENVIRONMENT_ONLY,
    Broker,
    Clock,
    Pki,
    build_broker,
    make_pki,
    missing_tier,
    require_all_tiers,
)

# The tests live in one folder per tier, by what they run (docs/architecture.md, "Tests"):
#   unit/  pure: one process, no server, no simulated cluster;
#   sim/   the simulated peers (the Kafka, Connect and Kubernetes API peers, the virtual-clock
#          cluster, the test broker) and the agents and `rollguard` commands as processes;
#   real/  the real systems: Kafka and Connect from Kafka's jars, the Kubernetes control plane,
#          Prometheus, Spark, Chromium, the wheels built and installed.
# This folder (tests/helpers.py) is on sys.path through this file (pytest's `prepend` import
# mode); so is each tier's, for the modules one test file imports from another by its name
# (`from test_cli_flags import ...`, `from real_kafka import ...`) across tiers. Test file names
# stay unique across the tiers.
TIERS = ("unit", "sim", "real")
for _tier in TIERS:
    _folder = str(Path(__file__).resolve().parent / _tier)
    if _folder not in sys.path:
        sys.path.insert(0, _folder)

# Spark in tests: short-lived JVMs whose JIT compiling costs more CPU than it saves, so C1 only
# and the serial collector, as for the tests' Kafka nodes (two Spark tests: 96 s of CPU, 60 s
# so); for spark-submit (local mode, in-process sessions too) and the standalone master and
# worker. Only when the environment does not set them already.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


# The longest files after the real ones (Spark jobs, simulated rolls, wheels): started early,
# so that none of them is left running alone at the end with the other workers idle.
LONG = ("test_report_job", "test_roll_end_to_end", "test_roll_properties", "test_report.py",
        "test_roll_batch_end_to_end", "test_roll_safety", "test_packaging",
        "test_operate_real", "test_gates_real",
        "test_roll_metrics")  # fmt: skip


def _file_name(item: pytest.Item) -> str:
    """The name of the item's test file, whichever tier's folder holds it."""
    return item.nodeid.split("::")[0].rsplit("/", 1)[-1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real-Kafka and real-Connect modules first. They are the longest files (a KRaft
    cluster each, minutes of restarts that mostly wait), so they start at once beside the quick
    files, rather than last with the other workers idle; then the other long ones (`LONG`).
    While the control plane is still being built in the background (`make test` on a fresh
    machine: `BUILD_STATUS` set), the tests on it go last instead, and wait for it."""
    for item in items:
        if "kube" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kube)  # on the real control plane: `make test-kube`
    building = bool(os.environ.get(BUILD_STATUS))

    def rank(item: pytest.Item) -> int:
        if building and item.get_closest_marker("kube"):
            return 3
        name = _file_name(item)
        if name.startswith(("test_real_", "test_kube_roll", "test_controller_roll")):
            return 0
        return 1 if name.startswith(LONG) else 2

    # Within a rank, by file name, whichever tier's folder holds it: the order the files had in
    # one folder, so that the workers take them as before the tiers.
    items.sort(key=lambda item: (rank(item), _file_name(item)))


# What the first test of a file may take beyond its own timeout: its module's fixtures start
# there (a KRaft cluster of up to nine nodes, a Connect worker, a control plane and its pods),
# each waiting first for a start-up slot (`startup_slot`, up to 600 s) on a busy machine. The
# tests after it are held to their own timeouts.
START_ALLOWANCE = 600


_STARTED_FILES: set[Path] = set()


def _allow_for_start(item: pytest.Item) -> None:
    """The first test this process runs of a file gets `START_ALLOWANCE` on its timeout."""
    if item.path in _STARTED_FILES:
        return
    _STARTED_FILES.add(item.path)
    marker = item.get_closest_marker("timeout")
    own = float(marker.args[0]) if marker and marker.args else float(item.config.getini("timeout"))
    item.add_marker(pytest.mark.timeout(own + START_ALLOWANCE), append=False)  # the closest


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test on the real control plane waits here for its background build, outside the test's
    own timeout (pytest-timeout's clock starts inside this wrapper); how it ended is the `kube`
    fixture's to say (`Binaries.find`)."""
    _allow_for_start(item)  # before pytest-timeout's own wrapper reads the timeout
    if item.get_closest_marker("kube"):
        wait_for_build()
    if not os.environ.get("ROLLGUARD_TEST_CPU"):
        yield
        return
    # With ROLLGUARD_TEST_CPU: the CPU seconds of each test file, this process's (its threads')
    # and its children's once reaped (a module fixture's JVMs count at its teardown, within the
    # file's last test), and its wall time; written at the end (`pytest_unconfigure`).
    began, wall = _cpu_now(), time.monotonic()
    yield
    ended = _cpu_now()
    row = _CPU.setdefault(item.nodeid.split("::")[0], [0.0, 0.0, 0.0])
    row[0] += ended[0] - began[0]
    row[1] += ended[1] - began[1]
    row[2] += time.monotonic() - wall


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A second, unrelated CA with its own certificates."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), "some other CA")


@pytest.fixture(scope="session")
def trustme_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("trustme")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("roller@example.com")
    ca.cert_pem.write_to_path(str(folder / "ca.crt"))
    server.cert_chain_pems[0].write_to_path(str(folder / "agent.crt"))
    server.private_key_pem.write_to_path(str(folder / "agent.key"))
    client.cert_chain_pems[0].write_to_path(str(folder / "roller.crt"))
    client.private_key_pem.write_to_path(str(folder / "roller.key"))
    return Pki(
        folder / "ca.crt",
        folder / "agent.crt",
        folder / "agent.key",
        folder / "roller.crt",
        folder / "roller.key",
    )


@pytest.fixture(scope="session", autouse=True)
def _broker_classes() -> None:
    build_broker()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    """The test broker, RUNNING (state 3), for a test file's agents to read."""
    with Broker("--state", "3") as running:
        yield running


@pytest.fixture(scope="session")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's JMX reader, compiled once (`rollguard.agent.jvm.reader_classpath`)."""
    return reader_classpath("java", tmp_path_factory.mktemp("jmx-reader"))


@pytest.fixture
def clock() -> Clock:
    """A clock the test moves (`helpers.Clock`), from 1000 s."""
    return Clock(1000.0)


@pytest.fixture
def target(cluster: RollCluster, tmp_path: Path) -> InventoryRoll:
    """Rolls of the test file's own `cluster` (on hosts: its inventory), roll id t1, their state
    in tmp_path/state."""
    return InventoryRoll(cluster, tmp_path)


@pytest.fixture(scope="session", autouse=True)
def _close_failed_client_sockets() -> Iterator[None]:
    """Close the socket of a kafka-python connect that fails or is cancelled.

    kafka-python 3.0.12 leaks it (KafkaNetSocket.connect never closes it when sock_connect
    raises, e.g. ECONNREFUSED from a stopped broker); the ResourceWarning its garbage
    collection raises, later and on any thread, would fail an unrelated test. For the whole
    session: module fixtures (a roll watched by a sampler and a canary) connect too.
    """
    original = KafkaNetSocket.sock_connect

    async def sock_connect(
        self: Any, net: Any, sock: socket.socket, sockaddr: Any, timeout_at: Any = None
    ) -> Any:
        try:
            return await original(self, net, sock, sockaddr, timeout_at=timeout_at)
        except BaseException:
            sock.close()
            raise

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(KafkaNetSocket, "sock_connect", sock_connect)
        yield


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A real Kubernetes control plane (the newest pinned version), one per test process,
    shared by every test file that needs one; each test works in a namespace of its own
    (`kube_namespace`). Without `make kube`'s build, a missing tier naming the missing binary
    (helpers.missing_tier: a failure under `make test`, else a skip)."""
    try:
        binaries = Binaries.find(NEWEST)
    except KubeBinariesMissing as missing:
        missing_tier(str(missing))
    plane = ControlPlane(tmp_path_factory.mktemp("kube"), NEWEST, binaries=binaries)
    with plane:
        yield plane


_NAMESPACES = itertools.count(1)


@pytest.fixture
def kube_namespace(kube: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace of the shared control plane, named after the test file and a count."""
    stem = request.path.stem.removeprefix("test_").replace("_", "-")[:40]
    name = f"{stem}-{next(_NAMESPACES)}"
    kube.create_namespace(name)
    return name


# No silent skips. Under ROLLGUARD_REQUIRE_ALL_TIERS (`make test`) a real tier that cannot run
# fails through helpers.missing_tier; this net fails the session on any other skip whose reason
# is not environment-only (helpers.ENVIRONMENT_ONLY), so that a pytest.skip added later in a real
# tier cannot hide either. Under xdist the controller sees every worker's reports, skipped
# collections included: it alone judges.
_SKIPS: list[tuple[str, str]] = []
_UNEXPLAINED = pytest.StashKey[list[str]]()


def _record_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr  # (path, line, "Skipped: reason") for a skip
    said = str(longrepr[2]) if isinstance(longrepr, tuple | list) else str(longrepr)
    _SKIPS.append((report.nodeid, said.removeprefix("Skipped: ")))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _record_skip(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record_skip(report)


def unexplained_skips(skips: list[tuple[str, str]]) -> list[str]:
    """`node: reason` of each skip whose reason is not an environment-only one."""
    return [
        f"{node}: {reason}"
        for node, reason in skips
        if not any(allowed.fullmatch(reason) for allowed in ENVIRONMENT_ONLY)
    ]


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not require_all_tiers() or hasattr(session.config, "workerinput"):
        return
    unexplained = unexplained_skips(_SKIPS)
    session.config.stash[_UNEXPLAINED] = unexplained
    if unexplained and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    unexplained = config.stash.get(_UNEXPLAINED, [])
    if unexplained:
        terminalreporter.section("skips that ROLLGUARD_REQUIRE_ALL_TIERS forbids", red=True)
        terminalreporter.line(
            f"{len(unexplained)} skipped, not for an environment-only reason "
            "(helpers.ENVIRONMENT_ONLY); a real tier that cannot run uses helpers.missing_tier:"
        )
        for line in unexplained:
            terminalreporter.line(f"  {line}")


# ---- what each test file costs in CPU (ROLLGUARD_TEST_CPU=FOLDER: one JSON file per worker) ----

_CPU: dict[str, list[float]] = {}


def _cpu_now() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = os.environ.get("ROLLGUARD_TEST_CPU")
    if folder and _CPU:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        path = Path(folder) / f"cpu-{worker}-{os.getpid()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_CPU, indent=1))
