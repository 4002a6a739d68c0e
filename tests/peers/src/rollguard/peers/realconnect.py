"""A real Kafka Connect for tests and the docs: distributed workers run from Kafka's own jars.

`make kafka` resolves Connect's jars (connect-runtime, connect-file, connect-mirror) from Maven
Central into `build/kafka-connect/<version>/lib` (`tests/kafka/connect/pom.xml`). A worker is
`org.apache.kafka.connect.cli.ConnectDistributed worker.properties` in its own JVM, REST on
127.0.0.1, the file and MirrorMaker 2 connectors found on its classpath. Workers of one
`ConnectCluster` share a group and its three internal topics, so a second worker joining or
leaving is a real rebalance.

Test-friendly settings, written down: offsets are flushed every second (Kafka's default is a
minute, `offset.flush.interval.ms`), and a departed worker's connectors are reassigned after
3 s (`scheduled.rebalance.max.delay.ms`, 5 minutes by default), and a crashed worker is noticed
after 6 s (`session.timeout.ms`, 10 s by default). Everything else is Connect's
default. A worker is ready when `GET /health` answers 200 (KIP-1017: the worker has joined its
group and read its config topic).

A worker being ready is not its group being done rebalancing: a worker joining takes two
rebalances (the first revokes what moves, the next assigns it, ~2 s apart here), and a crashed
leader is noticed only after `session.timeout.ms`. `ConnectCluster.rebalanced()` judges the end
from the workers' own logs (`Generation`).

`ConnectCluster.single_node_kafka(folder)` starts the one-node KRaft cluster the Connect tests
share (replication 1, min ISR 1).
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rollguard.peers.processes import ROOT, free_port, startup_slot, wait_until
from rollguard.peers.realkafka import KafkaCluster, kill_jvm, stop_jvm
from rollguard.peers.spawn import Starts, alive, read_log, start_logged

CONNECT_VERSION = "4.3.1"  # connect-file/connect-mirror 4.4.0 are not on Maven Central here
CONNECT_BUILD = ROOT / "build" / "kafka-connect"

# Properties, not YAML: Connect's classpath has no Jackson YAML for log4j2 to read YAML with.
_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{ISO8601}] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = STDOUT
logger.herder.name = org.apache.kafka.connect.runtime.distributed.DistributedHerder
logger.herder.level = info
logger.worker.name = org.apache.kafka.connect.runtime.Worker
logger.worker.level = info
"""


# What the herder logs (at INFO) when a rebalance hands it an assignment, and when it has started
# what it was assigned; a later "in preparation for rebalance" means the next one has begun.
_JOINED = re.compile(
    r"Joined group at generation (\d+) .*?leader='connect-([\d.]+:\d+)-.*?"
    r"revokedConnectorIds=\[([^\]]*)\], revokedTaskIds=\[([^\]]*)\], delay=(\d+)\}"
)
_STARTED = "Finished starting connectors and tasks"
_NEXT_REBALANCE = "in preparation for rebalance"


class ConnectJarsMissing(RuntimeError):
    """Connect's jars are not in build/kafka-connect (run `make kafka`)."""


def connect_lib(version: str = CONNECT_VERSION) -> Path:
    lib = CONNECT_BUILD / version / "lib"
    if not any(lib.glob("connect-runtime-*.jar")):
        raise ConnectJarsMissing(
            f"Kafka Connect {version}'s jars are not in {lib}: run `make kafka` "
            "(it needs mvn and a JDK 17)"
        )
    return lib


def rest(url: str, method: str = "GET", body: Any = None, timeout: float = 10) -> tuple[int, Any]:
    """One REST call: (status, parsed JSON or text). For fixtures and checks beside the CLI."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text) if text else None
    except json.JSONDecodeError:
        return status, text


@dataclass
class ConnectWorker:
    """One distributed worker: its folder, REST port, process and log."""

    folder: Path
    lib: Path
    properties: dict[str, str]
    heap: str = "256m"
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:
        """What the worker's status entries name it by (rest.advertised host:port)."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.folder / "connect.log"

    def log_text(self) -> str:
        return read_log(self.log_file)

    def running(self) -> bool:
        return alive(self.process)

    def start(self) -> None:
        if self.running():
            raise RuntimeError(f"the Connect worker on port {self.port} is already running")
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "worker.properties"
        props = {
            **self.properties,
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
        }
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.folder / "log4j2.properties").write_text(_LOG4J2)
        command = [
            "java",
            f"-Xmx{self.heap}",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "-cp",
            f"{self.lib}/*",
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(config),
        ]
        self.process = start_logged(command, self.log_file)

    def wait_ready(self, timeout: float = 120) -> None:
        """Until `GET /health` answers 200; fails at once if the JVM exits. The worker answers
        once its herder thread ran the check (it waits up to 10 s for it): a busy worker on a
        loaded machine takes seconds, so each probe waits that long too (a 2 s read timeout
        never saw the second worker of a rebalance ready in 120 s, CI15)."""
        last: list[object] = ["no answer"]

        def ready() -> bool:
            if not self.running():
                raise AssertionError(f"the Connect worker exited:\n{self.log_text()[-3000:]}")
            try:
                status, body = rest(self.url + "/health", timeout=15)
            except OSError as exc:
                last[0] = exc
                return False
            last[0] = (status, body)
            return status == 200

        try:
            wait_until(ready, timeout, interval=0.2, what=f"the Connect worker on {self.url}")
        except AssertionError as exc:
            tail = "\n".join(self.log_text().splitlines()[-15:])
            raise AssertionError(
                f"{exc}; its last answer: {last[0]!r}; its log ends:\n{tail}"
            ) from None

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (the worker leaves its group), SIGKILL if it outlasts `timeout`."""
        stop_jvm(self.process, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash; its group notices after `session.timeout.ms`."""
        kill_jvm(self.process)


@dataclass(frozen=True)
class Generation:
    """A group generation every running worker has settled in: its number and its leader."""

    number: int
    leader: ConnectWorker


class ConnectCluster(Starts):
    """Distributed workers of one group against `bootstrap`: `add_worker()` starts one more."""

    def __init__(
        self,
        folder: Path,
        bootstrap: str,
        *,
        version: str = CONNECT_VERSION,
        group: str = "rg-connect",
        replication: int = 1,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self.bootstrap = bootstrap
        self.lib = connect_lib(version)
        self.version = version
        self.group = group
        self.properties = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": str(replication),
            "offset.storage.replication.factor": str(replication),
            "status.storage.replication.factor": str(replication),
            "offset.storage.partitions": "5",
            "status.storage.partitions": "1",
            "offset.flush.interval.ms": "1000",
            "scheduled.rebalance.max.delay.ms": "3000",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "2000",
            **(extra or {}),
        }
        self.workers: list[ConnectWorker] = []

    @property
    def url(self) -> str:
        """The first running worker's REST URL."""
        return next(w.url for w in self.workers if w.running())

    def add_worker(self, *, wait: bool = True) -> ConnectWorker:
        worker = ConnectWorker(
            self.folder / f"worker-{len(self.workers)}", self.lib, dict(self.properties)
        )
        self.workers.append(worker)
        if not wait:
            worker.start()
            return worker
        with startup_slot(f"a Connect worker in {worker.folder}"):
            worker.start()
            worker.wait_ready()
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.kill()

    def create(self, name: str, config: dict[str, str], timeout: float = 60) -> None:
        """PUT the connector's config, then wait until its status is readable (a new connector's
        status is 404 for a few hundred ms)."""
        status, body = rest(f"{self.url}/connectors/{quote(name, safe='')}/config", "PUT", config)
        if status not in (200, 201):
            raise AssertionError(f"creating {name}: HTTP {status} {body}")
        wait_until(lambda: self.status(name), timeout, interval=0.1, what=f"{name}'s status")

    def delete(self, name: str) -> None:
        rest(f"{self.url}/connectors/{quote(name, safe='')}", "DELETE")

    def status(self, name: str) -> dict[str, Any] | None:
        status, body = rest(f"{self.url}/connectors/{quote(name, safe='')}/status")
        return body if status == 200 else None

    def wait_tasks(self, name: str, *states: str, timeout: float = 60) -> dict[str, Any]:
        """Until the connector lists exactly `states` for its tasks 0..n-1 (the connector itself
        RUNNING or STOPPED alike); returns that status."""
        wanted = list(states)

        def there() -> dict[str, Any] | None:
            body = self.status(name)
            if body is None:
                return None
            got = [t["state"] for t in sorted(body.get("tasks", []), key=lambda t: t["id"])]
            return body if got == wanted else None

        return wait_until(there, timeout, interval=0.1, what=f"{name}'s tasks {wanted}")

    def rebalanced(self) -> Generation | None:
        """The generation the group settled in, as every running worker's own log tells it; None
        while a rebalance is under way. Settled: each running worker's last "Joined group at
        generation" line names the same generation and a leader that is running, with nothing
        revoked and no delay (a revocation or a delay means another rebalance follows), and the
        worker has logged that it started what it was assigned, and no new rebalance since."""
        running = [w for w in self.workers if w.running()]
        seen: set[tuple[int, str]] = set()
        for worker in running:
            log = worker.log_text()
            joined = list(_JOINED.finditer(log))
            if not joined:
                return None  # not in the group yet
            last = joined[-1]
            after = log[last.end() :]
            if last[3].strip() or last[4].strip() or last[5] != "0":
                return None
            if _STARTED not in after or _NEXT_REBALANCE in after:
                return None
            seen.add((int(last[1]), last[2]))
        if len(seen) != 1:
            return None
        ((number, leader_id),) = seen
        leader = next((w for w in running if w.worker_id == leader_id), None)
        return Generation(number, leader) if leader is not None else None

    def wait_rebalanced(self, timeout: float = 120) -> Generation:
        """Until `rebalanced()`; at the deadline the failure shows each worker's last join."""
        try:
            return wait_until(self.rebalanced, timeout, 0.2, "the Connect group to settle")
        except AssertionError as exc:
            lasts = [f"{w.worker_id}: {_last_join(w)}" for w in self.workers if w.running()]
            raise AssertionError(f"{exc}\n" + "\n".join(lasts)) from None

    def start(self) -> None:
        """Its first worker, ready (`with` the cluster starts it so)."""
        self.add_worker()


def _last_join(worker: ConnectWorker) -> str:
    joined = list(_JOINED.finditer(worker.log_text()))
    return joined[-1][0] if joined else "never joined its group"


def single_node_kafka(folder: Path, **kafka: Any) -> KafkaCluster:
    """The one-node KRaft cluster (started) that the Connect tests share: replication 1."""
    one = {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "default.replication.factor": "1",
    }
    cluster = KafkaCluster(
        folder, combined=1, min_insync_replicas=1, extra={**one, **kafka.pop("extra", {})}, **kafka
    )
    cluster.start()
    return cluster
