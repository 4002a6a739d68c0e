"""A real Apache Kafka for tests, benchmarks and the demo: KRaft nodes run from Kafka's own jars.

`make kafka` resolves Kafka's jars from Maven Central into `build/kafka/<version>/lib`
(`tests/kafka/pom.xml`). This module formats each node's storage (`kafka.tools.StorageTool`)
and starts each node as its own JVM (`kafka.Kafka server.properties`): combined
broker+controller nodes, or brokers beside controller-only nodes, a static quorum, every port on
127.0.0.1, JMX on loopback without authentication, small heaps. Internal topics are made
test-friendly (3 partitions each, no group rebalance delay); everything else is Kafka's default,
except the KRaft liveness timeouts, which are relaxed for 2 busy cores (see `_LIVENESS`).

Readiness: a node is up when its log says `[KafkaRaftServer nodeId=N] Kafka Server started`;
the cluster is up when the Admin API lists every broker. `stop()` is SIGTERM (a controlled
shutdown), `kill()` is SIGKILL.

A real log recovery on demand (`KafkaNode.restart(recover=True)`): the node is stopped, its
clean-shutdown marker (`<dir>/.kafka_cleanshutdown`) and recovery checkpoint
(`<dir>/recovery-point-offset-checkpoint`) are deleted, so Kafka recovers every segment of every
log at the next start, exactly as after a crash before the first checkpoint. Recovery is
CPU-bound (about 300 MB/s from the page cache here), so to make it last as long as a test needs
the JVM is put in a cgroup-v1 `cpu` group with a CFS quota (`recovery_cpu`, a fraction of one
core, 5 % by default) from the moment its log says it is loading logs until it says they are
loaded; the rest of its start runs at full speed. Duration = data per node / (speed x quota):
150 MB took ~10 s at 10 % of a core here, and about twice that at 5 %. Without a writable
cgroup-v1 `cpu` hierarchy (not root, cgroup v2 only) recovery is not throttled and says so
(`KafkaNode.throttled`).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rollguard.peers import jvmcds
from rollguard.peers.processes import ROOT, free_port, raise_priority, startup_slot, wait_until
from rollguard.peers.spawn import Starts, alive, read_log, start_logged, stop_process

NEWEST = "4.4.0"  # the newest 4.x on Maven Central (2026-11)
OLDEST = "4.0.0"  # the oldest supported: the first release without ZooKeeper
VERSIONS = (NEWEST, OLDEST)
KAFKA_BUILD = ROOT / "build" / "kafka"
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
FREEZER_CGROUP = Path("/sys/fs/cgroup/freezer")
# A recovery held for a least time (`restart(hold=...)`): its recovery threads at HOLD_CPU.
# With a `release` event, held until it is set too, for at most this many seconds more.
RELEASE_S = 180.0
# At 1 % a node's 30 MB recovers in 35-45 s, logs counting down all along: a hold longer than
# that needs less (the real roll's 75 s hold sets 0.4 %: 75 s asked, 35 s seen at 1 %).
HOLD_CPU = 0.01

STARTED = re.compile(r"\[KafkaRaftServer nodeId=(\d+)\] Kafka Server started")
LOADING = re.compile(r"Loading logs from log dirs|Recovering \d+ logs from")
LOADED = re.compile(r"Loaded \d+ logs in \d+ms")
RUNNING = re.compile(r"Transitioning from \w+ to RUNNING")  # BrokerLifecycleManager
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{3})\]", re.M)

# Kafka's defaults (election 1 s, quorum fetch 2 s, broker session 9 s, heartbeat 2 s) fence
# nodes spuriously when a dozen JVMs share 2 cores: relaxed, and written down, as an operator
# on small machines would.
_LIVENESS = {
    # The active controller appends a no-op record after this long without a change (500 ms by
    # default), which every node fetches and every broker publishes: a third of an idle node's
    # CPU here, and a dozen nodes run at once in `make test`.
    "metadata.max.idle.interval.ms": "5000",
    "controller.quorum.election.timeout.ms": "3000",
    "controller.quorum.fetch.timeout.ms": "6000",
    "broker.session.timeout.ms": "12000",
    "broker.heartbeat.interval.ms": "1000",
}
# Internal topics: replication 3 and min ISR 2 like every other topic, fewer partitions.
_INTERNAL = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}
# WARN but what the tests' observers read from a node's own log: its start and end
# (KafkaRaftServer), its log loading (LogManager), its registration (BrokerLifecycleManager), and
# the version and commit it runs (AppInfoParser: `...utils.internals` from Kafka 4.4 on).
_LOG4J2 = """\
Configuration:
  name: rollguard-test-kafka
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d{ISO8601}] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
      - name: kafka.log.LogManager
        level: INFO
      - name: org.apache.kafka.storage.internals.log.LogManager
        level: INFO
      - name: kafka.server.BrokerLifecycleManager
        level: INFO
      - name: org.apache.kafka.server.BrokerLifecycleManager
        level: INFO
      - name: org.apache.kafka.common.utils.AppInfoParser
        level: INFO
      - name: org.apache.kafka.common.utils.internals.AppInfoParser
        level: INFO
"""


# The JVMs that write their class-data archive when they exit (jvmcds), and where. Every Kafka
# JVM is in `spawn`'s one registry too: killed at exit.
_ARCHIVING: dict[subprocess.Popen[bytes], Path] = {}


def with_class_archive(command: list[str], lib: Path) -> tuple[list[str], Path | None]:
    """`command` (java first) with the class-data-sharing flags of `-cp lib/*` (jvmcds)."""
    extra, pending = jvmcds.flags(command[0], lib)
    return [command[0], *extra, *command[1:]], pending


def archiving(process: subprocess.Popen[bytes], pending: Path | None) -> None:
    if pending is not None:
        _ARCHIVING[process] = pending


def stop_jvm(
    process: subprocess.Popen[bytes] | None, timeout: float | None, sig: int = signal.SIGTERM
) -> int | None:
    """SIGTERM (or `sig`), SIGKILL if the JVM outlasts `timeout` (`spawn.stop_process`); its
    class-data archive published if it wrote one. Its exit code (None: never started)."""
    code = stop_process(process, timeout, sig)
    if process is not None:
        jvmcds.publish(_ARCHIVING.pop(process, None))
    return code


def kill_jvm(process: subprocess.Popen[bytes] | None) -> int | None:
    """SIGKILL (a crash); its exit code (None: never started)."""
    return stop_jvm(process, None, signal.SIGKILL)


class KafkaJarsMissing(RuntimeError):
    """Kafka's jars for a version are not in build/kafka (run `make kafka`)."""


# A release's name, as build/kafka's folders and an image's tag give it.
RELEASE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


def kafka_lib(version: str = NEWEST) -> Path:
    """`version`'s jars; KafkaJarsMissing when they are not there, or `version` is not a
    release's name (a path outside build/kafka never is one)."""
    if not RELEASE.fullmatch(version):
        raise KafkaJarsMissing(f"{version!r} is not a Kafka release")
    lib = KAFKA_BUILD / version / "lib"
    if not any(lib.glob("kafka_2.13-*.jar")):
        raise KafkaJarsMissing(
            f"Kafka {version}'s jars are not in {lib}: run `make kafka` (it needs mvn and a JDK 17)"
        )
    return lib


@dataclass(frozen=True)
class NodeSpec:
    node_id: int
    roles: tuple[str, ...] = ("broker", "controller")
    rack: str | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


@dataclass
class KafkaNode:
    """One Kafka JVM: its folder, ports, process and log."""

    spec: NodeSpec
    folder: Path
    lib: Path
    heap: str
    broker_port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    jmx_port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)  # used with KafkaCluster's sasl_users
    recovery_cpu: float = 0.05
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    throttled: bool = False  # the last recovery ran under a CPU quota
    # The last throttled start's log loading, by Kafka's own log lines (monotonic seconds):
    # when it said it was loading (recovering) its logs, and when it said they were loaded.
    loading_began: float | None = None
    loading_ended: float | None = None
    # When its lifecycle thread was frozen after its recovery (`registering`), on the wall clock
    # (as its log's stamps): None when it was not.
    frozen_at: float | None = None
    _mark: int = 0  # where this start's lines begin in kafka.log
    _watcher: threading.Thread | None = None

    @property
    def node_id(self) -> int:
        return self.spec.node_id

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def log_file(self) -> Path:
        return self.folder / "kafka.log"

    @property
    def config_file(self) -> Path:
        return self.folder / "server.properties"

    @property
    def jmx(self) -> str:
        return f"127.0.0.1:{self.jmx_port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return alive(self.process)

    def log_text(self) -> str:
        return read_log(self.log_file)

    def command(self) -> list[str]:
        java = shutil.which("java") or "java"
        return [
            java,
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            # C1 only: a test broker's start costs half the CPU (C2's compiles), and two cores
            # run up to a dozen of them; recovery then runs a little slower, which tests want.
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-XX:-UsePerfData",
            "-Xss512k",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.folder.parent / 'log4j2.yaml'}",
            "-Dcom.sun.management.jmxremote",
            f"-Dcom.sun.management.jmxremote.port={self.jmx_port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={self.jmx_port}",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1",
            "-Djava.rmi.server.hostname=127.0.0.1",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false",
            "-cp",
            f"{self.lib}/*",
            "kafka.Kafka",
            str(self.config_file),
        ]

    def start(
        self,
        *,
        throttle_loading: bool = False,
        hold: float = 0.0,
        registering: float = 0.0,
        release: threading.Event | None = None,
    ) -> None:
        """Start the JVM (detached from the terminal's signals); its output goes to kafka.log.
        `throttle_loading`: its log loading under a CPU quota (`recovery_cpu`); `hold`: for at
        least that many seconds (`HOLD_CPU` until then, then unthrottled), and with `release`
        until that is set too (at most `RELEASE_S` more: a scenario that needs the recovery to
        last until someone saw it, whatever the machine's load); `registering`: after
        the loading, its broker lifecycle thread frozen that long, so that it stays in STARTING
        (as a real broker does while it catches up and registers, longer under load)."""
        if self.running():
            raise RuntimeError(f"node {self.node_id} is already running")
        mark = self._mark = self.log_file.stat().st_size if self.log_file.exists() else 0
        command, pending = with_class_archive(self.command(), self.lib)
        self.process = start_logged(command, self.log_file)
        archiving(self.process, pending)
        self.starts += 1
        self.throttled = False
        self.loading_began = self.loading_ended = self.frozen_at = None
        if throttle_loading:
            self._watcher = threading.Thread(
                target=self._throttle_while_loading,
                args=(self.process, mark, hold, registering, release),
                daemon=True,
            )
            self._watcher.start()

    def wait_started(self, timeout: float = 120, *, since: int = 0) -> None:
        """Until this start's log says `Kafka Server started`; fails if the JVM exits first."""

        def started() -> bool:
            if not self.running():
                tail = self.log_text()[-2000:]
                raise AssertionError(f"Kafka node {self.node_id} exited:\n{tail}")
            return STARTED.search(self.log_text()[since:]) is not None

        wait_until(started, timeout, interval=0.1, what=f"Kafka node {self.node_id} to start")

    def phase(self) -> str:
        """Where this node's current run stands, by Kafka's own log (no JMX, no agent): `down`
        (no JVM), `loading` (it said it is loading or recovering its logs and has not said they
        are loaded: never to be restarted, nor another node meanwhile), `starting`, `started`
        (its broker RUNNING, or the server's start logged: a busy broker may log its RUNNING
        transition seconds before "Kafka Server started")."""
        if not self.running():
            return "down"
        with contextlib.suppress(FileNotFoundError), open(self.log_file, "rb") as log:
            log.seek(self._mark)
            text = log.read().decode("utf-8", "replace")
            loading = [m.end() for m in LOADING.finditer(text)]
            if loading and not LOADED.search(text, loading[-1]):
                return "loading"
            return "started" if STARTED.search(text) or RUNNING.search(text) else "starting"
        return "starting"

    def moments(self, pattern: re.Pattern[str]) -> list[float]:
        """When this start's log lines matching `pattern` were written, by their own time stamps
        (epoch seconds; the log's clock is this machine's local time)."""
        text = self.log_text()[self._mark :]
        found = []
        for line in text.splitlines():
            stamp = STAMP.match(line)
            if stamp and pattern.search(line):
                at = time.mktime(time.strptime(stamp.group(1), "%Y-%m-%dT%H:%M:%S"))
                found.append(at + int(stamp.group(2)) / 1000)
        return found

    @property
    def loading(self) -> bool:
        """A start into recovery (`throttle_loading`) whose log has not yet said its logs are
        loaded: Kafka's own word, whatever its JMX (or an agent) can say meanwhile."""
        return self._watcher is not None and self._watcher.is_alive()

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM (a controlled shutdown), SIGKILL if it outlasts `timeout`."""
        return stop_jvm(self.process, timeout)

    def kill(self) -> int | None:
        """SIGKILL: an unclean stop, as a crash or an OOM kill."""
        return kill_jvm(self.process)

    def prepare_recovery(self) -> None:
        """Make the next start recover every segment: as if it crashed before any checkpoint."""
        if self.running():
            raise RuntimeError(f"node {self.node_id} must be stopped first")
        for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint"):
            with contextlib.suppress(FileNotFoundError):
                (self.data_dir / name).unlink()

    def restart(
        self,
        *,
        recover: bool = False,
        clean: bool = True,
        hold: float = 0.0,
        registering: float = 0.0,
        release: threading.Event | None = None,
    ) -> None:
        """Stop (SIGTERM when `clean`, else SIGKILL) and start again; `recover`: into a full,
        CPU-throttled log recovery (lasting `hold` seconds at least, and with `release` until
        that is set too, then `registering` seconds in STARTING: `start`). Returns once the new
        JVM is started, not once it is up."""
        if clean:
            self.stop()
        else:
            self.kill()
        if recover:
            self.prepare_recovery()
        self.start(throttle_loading=recover, hold=hold, registering=registering, release=release)

    def _throttle_while_loading(
        self,
        process: subprocess.Popen[bytes],
        mark: int,
        hold: float,
        registering: float,
        release: threading.Event | None = None,
    ) -> None:
        """Hold the JVM to `recovery_cpu` of a core from 'loading logs' to 'loaded N logs'.

        With `hold`: only its log recovery threads (`log-recovery-<dir>`), to `HOLD_CPU`, for
        `hold` seconds, then unthrottled: a recovery that lasts at least that long and little
        more, whatever the machine's speed, while the rest of the JVM (its JMX, which the agent
        reads; its JIT) runs at full speed."""
        # Above the load it stages beside: a scan late by a second lets a recovery thread
        # recover everything unheld (CI41: 67 s of a 75 s hold, under a load average of 17).
        raise_priority(-10)
        group = _cpu_group(HOLD_CPU if hold > 0 else self.recovery_cpu)
        held = (
            _ThreadHold(group, process, "log-recovery") if group is not None and hold > 0 else None
        )
        scan = held.scan if held is not None else None
        try:
            # The recovery threads are scanned for at every poll of the log (20 ms), from the
            # start on: the whole recovery is a fraction of a second of CPU, so a thread left
            # unheld between two scans recovers much of it (CI20 at a second apart; at 0.1 s an
            # idle run still saw 12 of 17 logs recovered before the first scan that found them).
            if not _wait_for_line(self.log_file, mark, LOADING, process, each=scan):
                return
            self.loading_began = time.monotonic()
            if group is not None and hold <= 0:
                with contextlib.suppress(OSError):
                    (group / "cgroup.procs").write_text(str(process.pid))
                    self.throttled = True
            if group is not None and held is not None:
                until = self.loading_began + hold
                limit = until + (RELEASE_S if release is not None else 0.0)
                while not _wait_for_line(
                    self.log_file, mark, LOADED, process, until=min(limit, time.monotonic() + 0.1),
                    each=scan,
                ):  # fmt: skip
                    now = time.monotonic()
                    released = release is None or release.is_set() or now >= limit
                    if (now >= until and released) or process.poll() is not None:
                        break
                self.throttled = bool(held.held)
                _release(group, process)  # held long enough: the rest at full speed
                group = None
            if _wait_for_line(self.log_file, mark, LOADED, process):
                self.loading_ended = time.monotonic()
                if registering > 0:
                    _freeze_threads(
                        process,
                        f"broker-{self.node_id}-lifecy",
                        registering,
                        frozen=lambda: setattr(self, "frozen_at", time.time()),
                    )
        finally:
            if group is not None:
                _release(group, process)


def _freeze_threads(
    process: subprocess.Popen[bytes],
    prefix: str,
    seconds: float,
    frozen: Callable[[], object] = lambda: None,
) -> None:
    """Freeze the process's threads whose name starts with `prefix` for `seconds` (a cgroup-v1
    freezer group of their own), then thaw them; nothing without a writable freezer. `frozen`
    is called once they are. Threads come and go meanwhile (the log recovery's pool ends just
    as the logs are loaded: CI15 lost the freeze to one that exited between the listing and
    the read of its name), so each thread is taken on its own."""
    if not os.access(FREEZER_CGROUP, os.W_OK):
        return
    group = FREEZER_CGROUP / f"rollguard-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        if _ThreadHold(group, process, prefix).scan():
            (group / "freezer.state").write_text("FROZEN")
            frozen()
            time.sleep(seconds)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            (group / "freezer.state").write_text("THAWED")
        with contextlib.suppress(OSError):
            for task in (group / "tasks").read_text().split():
                with contextlib.suppress(OSError):
                    (FREEZER_CGROUP / "tasks").write_text(task)
        with contextlib.suppress(OSError):
            group.rmdir()


class _ThreadHold:
    """A process's threads named `prefix...`, moved into a cgroup (cgroup v1 takes single threads
    through `tasks`) as they appear: each scan reads every thread's name but writes only those
    not yet held."""

    def __init__(self, group: Path, process: subprocess.Popen[bytes], prefix: str) -> None:
        self.group, self.process, self.prefix = group, process, prefix
        self.held: set[str] = set()

    def scan(self) -> bool:
        """Hold the new ones; True if any thread is held. Cheap enough for every 20 ms (a
        hundred threads: plain reads of their names, a write only for a new one)."""
        tasks = f"/proc/{self.process.pid}/task"
        prefix = self.prefix.encode()
        with contextlib.suppress(OSError):
            for tid in os.listdir(tasks):
                if tid in self.held:
                    continue
                with contextlib.suppress(OSError):
                    fd = os.open(f"{tasks}/{tid}/comm", os.O_RDONLY)
                    try:
                        name = os.read(fd, 64)
                    finally:
                        os.close(fd)
                    if name.startswith(prefix):
                        (self.group / "tasks").write_text(tid)
                        self.held.add(tid)
        return bool(self.held)


def _wait_for_line(
    path: Path,
    mark: int,
    pattern: re.Pattern[str],
    process: subprocess.Popen[bytes],
    *,
    until: float = float("inf"),
    each: Callable[[], object] | None = None,
) -> bool:
    """Poll a log from byte `mark` for `pattern` while the process lives (20 ms), until the
    monotonic time `until`; `each` is called at every poll."""
    while process.poll() is None and time.monotonic() < until:
        if each is not None:
            each()
        with contextlib.suppress(FileNotFoundError), open(path, "rb") as log:
            log.seek(mark)
            if pattern.search(log.read().decode("utf-8", "replace")):
                return True
        time.sleep(0.02)
    return False


def _cpu_group(share: float) -> Path | None:
    """A new cgroup-v1 cpu group with a quota of `share` of one core, or None if there is none."""
    if not os.access(CPU_CGROUP, os.W_OK):
        return None
    group = CPU_CGROUP / f"rollguard-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        # The quota's least is 1 ms a period: below 1 % of a core, a period of a second.
        period = 100_000 if share >= 0.01 else 1_000_000
        (group / "cpu.cfs_period_us").write_text(str(period))
        (group / "cpu.cfs_quota_us").write_text(str(max(1000, int(period * share))))
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    return group


def _release(group: Path, process: subprocess.Popen[bytes]) -> None:
    """Move the JVM back to the root group and remove the throttling group."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            (CPU_CGROUP / "cgroup.procs").write_text(str(process.pid))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.05)


class KafkaCluster(Starts):
    """Real KRaft nodes in `folder`: `brokers` combined nodes, or brokers and controllers.

    `KafkaCluster(folder, combined=3)`: nodes 0-2 are broker+controller.
    `KafkaCluster(folder, brokers=3, controllers=3)`: nodes 0-2 brokers, 3-5 controller-only.
    `racks`: a rack per broker node id. Formatting and starting run in parallel.
    `sasl_users`: user -> password of a second client listener on each broker, SASL_PLAINTEXT
    with PLAIN (`sasl_bootstrap`), whose clients are those users; the PLAINTEXT and CONTROLLER
    listeners' principal (User:ANONYMOUS: the brokers, the controllers, the test's own clients)
    is then a super user, as Kafka's StandardAuthorizer needs of its controllers.
    """

    def __init__(
        self,
        folder: Path,
        *,
        combined: int = 0,
        brokers: int = 0,
        controllers: int = 0,
        version: str = NEWEST,
        heap: str = "320m",
        controller_heap: str = "160m",
        racks: dict[int, str] | None = None,
        min_insync_replicas: int = 2,
        extra: dict[str, str] | None = None,
        sasl_users: dict[str, str] | None = None,
    ) -> None:
        if combined and (brokers or controllers):
            raise ValueError("either combined nodes, or brokers and controllers")
        self.folder = folder
        self.version = version
        self.lib = kafka_lib(version)
        racks = racks or {}
        specs = [NodeSpec(i, ("broker", "controller"), racks.get(i)) for i in range(combined)]
        specs += [NodeSpec(i, ("broker",), racks.get(i)) for i in range(brokers)]
        specs += [NodeSpec(brokers + i, ("controller",)) for i in range(controllers)]
        self.nodes: dict[int, KafkaNode] = {
            s.node_id: KafkaNode(
                s,
                folder / f"node-{s.node_id}",
                self.lib,
                heap if s.is_broker else controller_heap,
            )
            for s in specs
        }
        self.min_insync_replicas = min_insync_replicas
        self.extra = extra or {}
        self.sasl_users = sasl_users or {}
        self.cluster_id = ""

    @property
    def brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.spec.is_broker]

    @property
    def controllers(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.spec.is_controller]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers)

    @property
    def sasl_bootstrap(self) -> str:
        """The brokers' SASL_PLAINTEXT listeners (`sasl_users`)."""
        return ",".join(f"127.0.0.1:{n.sasl_port}" for n in self.brokers)

    def voters(self) -> str:
        return ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.controllers)

    def _properties(self, node: KafkaNode) -> dict[str, str]:
        spec = node.spec
        listeners = []
        if spec.is_broker:
            listeners.append(f"PLAINTEXT://127.0.0.1:{node.broker_port}")
        if spec.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
        props = {
            "process.roles": ",".join(spec.roles),
            "node.id": str(spec.node_id),
            "controller.quorum.voters": self.voters(),
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.data_dir),
            "min.insync.replicas": str(self.min_insync_replicas),
            "default.replication.factor": "3",
            "num.partitions": "3",
            # 1 MiB segments (the least 4.x allows): a log is many segments, as in production,
            # and recovery walks them one by one.
            "log.segment.bytes": str(1 << 20),
            **_LIVENESS,
            **_INTERNAL,
        }
        if spec.is_broker:
            props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{node.broker_port}"
            props["inter.broker.listener.name"] = "PLAINTEXT"
            if spec.rack:
                props["broker.rack"] = spec.rack
        if self.sasl_users:
            props["super.users"] = "User:ANONYMOUS"
            props["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
        if self.sasl_users and spec.is_broker:
            sasl = f"SASL://127.0.0.1:{node.sasl_port}"
            props["listeners"] += f",{sasl}"
            props["advertised.listeners"] += f",{sasl}"
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["listener.name.sasl.sasl.enabled.mechanisms"] = "PLAIN"
            props["listener.name.sasl.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            )
        props.update(self.extra)
        return props

    def format(self) -> None:
        """Write every node's config and format its storage (one StorageTool JVM per node)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "log4j2.yaml").write_text(_LOG4J2)
        self.cluster_id = random_uuid()
        formatting = []
        for node in self.nodes.values():
            node.folder.mkdir(parents=True, exist_ok=True)
            text = "".join(f"{k}={v}\n" for k, v in self._properties(node).items())
            node.config_file.write_text(text)
            formatting.append(
                _java_start(
                    self.lib,
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    self.cluster_id,
                    "-c",
                    str(node.config_file),
                )
            )
        for process in formatting:
            out, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed: {out.decode()[-1000:]}")

    def start(self, timeout: float = 180) -> None:
        """Format if needed, start every node at once, wait until each says started and the
        Admin API lists every broker; in a start-up slot (`startup_slot`), whose wait is not
        counted in `timeout`."""
        with startup_slot(f"a Kafka cluster in {self.folder}", processes=len(self.nodes)):
            if not self.cluster_id:
                self.format()
            for node in self.nodes.values():
                node.start()
            for node in self.nodes.values():
                node.wait_started(timeout)
            self.wait_brokers_registered(timeout)

    def wait_brokers_registered(self, timeout: float = 120) -> None:
        wanted = {n.node_id for n in self.brokers}

        def registered() -> bool:
            try:
                with self.admin() as admin:
                    described = admin.describe_cluster()  # type: ignore[attr-defined]
            except Exception:
                return False
            return {b.get("broker_id", b.get("node_id")) for b in described["brokers"]} >= wanted

        wait_until(registered, timeout, interval=0.5, what="every broker to register")

    def quorum_leader(self, timeout: float = 30) -> int:
        """The KRaft quorum's leader (the active controller), from DescribeQuorum."""

        def leader() -> tuple[int] | None:  # a tuple: node 0 is a leader too
            with contextlib.suppress(Exception), self.admin() as admin:
                quorum = admin.describe_metadata_quorum()  # type: ignore[attr-defined]
                found = quorum["topics"][0]["partitions"][0]["leader_id"]
                return (found,) if isinstance(found, int) and found >= 0 else None
            return None

        return wait_until(leader, timeout, interval=0.5, what="a KRaft quorum leader")[0]

    @contextlib.contextmanager
    def admin(self) -> Iterator[object]:
        from kafka import KafkaAdminClient

        client = KafkaAdminClient(
            bootstrap_servers=self.bootstrap, request_timeout_ms=5000, client_id="rollguard-test"
        )
        try:
            yield client
        finally:
            client.close()

    def produce(
        self, topic: str, megabytes: int, *, record_size: int = 1000, throughput: int = -1
    ) -> None:
        """Fill `topic` with `megabytes` of records through Kafka's own perf producer (acks=all)."""
        records = megabytes * 1_000_000 // record_size
        _java(
            self.lib,
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            str(record_size),
            "--throughput",
            str(throughput),
            "--producer-props",
            f"bootstrap.servers={self.bootstrap}",
            "acks=all",
            "linger.ms=20",
            "batch.size=262144",
            "compression.type=none",
            timeout=600,
            heap="256m",
        )

    def create_topics(self, topics: Sequence[tuple[str, int, int]], **configs: str) -> None:
        """(name, partitions, replication) each, with the same topic configs. A new admin
        client may pick a broker its first metadata does not list yet (kafka-python's
        UnknownBrokerIdError, before anything is sent): asked again, for up to 30 s."""
        from kafka.admin import NewTopic
        from kafka.errors import NodeNotReadyError, UnknownBrokerIdError

        deadline = time.monotonic() + 30
        while True:
            try:
                with self.admin() as admin:
                    admin.create_topics(  # type: ignore[attr-defined]
                        [
                            NewTopic(name, partitions, replication, topic_configs=dict(configs))
                            for name, partitions, replication in topics
                        ]
                    )
                return
            except (UnknownBrokerIdError, NodeNotReadyError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def make_consumer_offsets(self, timeout: float = 60) -> None:
        """Kafka creates `__consumer_offsets` at the first FindCoordinator: ask for one, and wait
        until the topic has every partition led (a roll's safety rules count it)."""
        with self.admin() as admin:

            def created() -> bool:
                with contextlib.suppress(Exception):  # not created yet: ask again
                    admin.describe_groups(["rollguard-setup"])  # type: ignore[attr-defined]
                    topics = admin.describe_topics(["__consumer_offsets"])  # type: ignore[attr-defined]
                    partitions = topics[0]["partitions"] if topics else []
                    return bool(partitions) and all(p["leader_id"] >= 0 for p in partitions)
                return False

            wait_until(created, timeout, interval=0.5, what="__consumer_offsets")

    def stop(self, *, graceful: bool = False) -> None:
        """Stop every node. A test's cluster is thrown away, so by default every JVM is killed
        at once (a controlled shutdown of brokers whose controllers are going too waits out
        its timeouts: minutes); `graceful`: SIGTERM to the brokers first, then controllers."""
        if not graceful:
            for node in self.nodes.values():
                if node.running():
                    node.process.kill()  # type: ignore[union-attr]
            for node in self.nodes.values():
                node.kill()
            return
        order = self.brokers_only() + self.controllers
        for node in order:
            if node.running():
                node.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        for node in order:
            node.stop(timeout=20)

    def brokers_only(self) -> list[KafkaNode]:
        return [n for n in self.brokers if not n.spec.is_controller]


def random_uuid() -> str:
    """A cluster id as `kafka-storage random-uuid` makes one (Kafka's `Uuid.randomUuid`): 16
    random bytes, version 4, in URL-safe base64 without padding, never starting with `-` (it
    would read as a flag): the same thing without a JVM's start."""
    while True:
        raw = bytearray(secrets.token_bytes(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # IETF variant
        text = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _java_start(lib: Path, main: str, *args: str, heap: str = "128m") -> subprocess.Popen[bytes]:
    """One of Kafka's tools: it maps the nodes' class-data archive when there is one (1.2 s of
    CPU to format a node's storage instead of 1.7), and never writes one."""
    java = shutil.which("java") or "java"
    return subprocess.Popen(
        [
            java,
            *jvmcds.mapping(java, lib),
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dlog4j2.level=WARN",
            "-cp",
            f"{lib}/*",
            main,
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def kafka_configs(lib: Path, *args: str) -> str:
    """Kafka's own `kafka-configs` (ConfigCommand) from `lib`'s jars with `args`: its output.
    4.0's tools have it elsewhere: `kafka_lib(NEWEST)` speaks to an older cluster as well."""
    return _java(lib, "org.apache.kafka.tools.ConfigCommand", *args)


def described(text: str) -> dict[str, str]:
    """`kafka-configs --describe --all`'s lines: key -> value in force."""
    found = {}
    for line in text.splitlines():
        key, sep, rest = line.strip().partition("=")
        if sep and " sensitive=" in rest:
            found[key] = rest.split(" sensitive=")[0]
    return found


def _java(lib: Path, main: str, *args: str, timeout: float = 120, heap: str = "128m") -> str:
    process = _java_start(lib, main, *args, heap=heap)
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    text = out.decode("utf-8", "replace")
    if process.returncode != 0:
        raise RuntimeError(
            f"{main} {' '.join(args[:2])} failed (exit {process.returncode}): {text[-1500:]}"
        )
    return text


def kafka_features(*args: str, version: str = NEWEST) -> str:
    """Kafka's own `kafka-features.sh` (FeatureCommand) from `version`'s jars; its output."""
    return _java(kafka_lib(version), "org.apache.kafka.tools.FeatureCommand", *args)
