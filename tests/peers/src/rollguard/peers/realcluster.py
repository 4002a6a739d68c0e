"""A real KRaft cluster with a real `rollguard-agent` beside each node, as operators run one.

`RealCluster` is to a real Kafka what `rollguard.peers.cluster.ProcessCluster` is to the
simulated one, and both are the `rollcluster.RollCluster` a roll test drives: each node of a
`realkafka.KafkaCluster` gets an agent over mutual TLS reading its JMX, and the control server
(`control.ControlServer`) plays the host's service manager: `POST /restart/<id>` stops the node
(SIGTERM: a controlled shutdown, as `systemctl restart` does) and starts it again, into a full,
CPU-throttled log recovery when the node's `recover` flag is set (once); `GET /health/<id>` is
200 while the node's JVM runs; `POST /install/<id>/<version>` switches the node's Kafka to that
version's jars for its next start (as a package install does; a node in `broken_installs` keeps
its jars and still answers 204, as a package manager that "succeeded" on the wrong repository).
The inventory it writes points each node's `restart`, `health` and `install` commands at that
server with curl, exactly as an operator's would point at `ssh host systemctl restart kafka`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.control import ControlServer
from rollguard.peers.processes import Agent, Pki, startup_slot, wait_until
from rollguard.peers.realkafka import KafkaCluster, KafkaJarsMissing, KafkaNode, kafka_lib
from rollguard.peers.rollcluster import write_inventory
from rollguard.peers.spawn import Stops

# Per node (replication 3 on 3 brokers): a recovery of seconds at 5 % of a core; a test that
# needs it longer holds it (`recover_on_next_restart(hold=...)`), whatever the data.
DATA_MB = 30


@dataclass(frozen=True)
class Restart:
    """One restart the control server was asked for: the test's own record, not the roller's."""

    node_id: int
    kind: str  # "recover" (into a full log recovery) or "clean"
    at: float  # monotonic seconds, when it was asked
    wall: float  # the same moment on the wall clock (time.time())
    # Every node's phase at that moment, from its own log (`KafkaNode.phase`): down,
    # starting, loading (loading or recovering its logs), started.
    phases: dict[int, str] = field(default_factory=dict)


@dataclass
class Restarts:
    """What the control server did: every restart, in order, with its kind, time and the
    phase of every node then."""

    log: list[Restart] = field(default_factory=list)
    # node id -> (least seconds of its recovery, seconds in STARTING after it, the event that
    # must be set too before the recovery ends: none)
    recover_next: dict[int, tuple[float, float, threading.Event | None]] = field(
        default_factory=dict
    )
    # (node id, version, monotonic seconds) of every install asked, broken ones included
    installs: list[tuple[int, str, float]] = field(default_factory=list)

    def of(self, node_id: int) -> int:
        return sum(1 for r in self.log if r.node_id == node_id)

    def between(self, start: float, end: float) -> list[Restart]:
        """The restarts asked between two monotonic moments."""
        return [r for r in self.log if start <= r.at <= end]

    def unsafe(self, *, together: float = 0.0) -> list[str]:
        """Each restart asked while the node itself was loading or recovering its logs, or while
        another node was not back (down, starting or loading, by its own log), unless that
        other node's restart was asked less than `together` seconds before (a batch restarted
        as one): what a roller must never do. A node not back has replicas out of their ISRs
        and, a controller, a vote the quorum may need."""
        found = []
        for r in self.log:
            for n, said in not_back(r.node_id, r.phases).items():
                last = [o.at for o in self.log if o.node_id == n and o.at <= r.at]
                if n != r.node_id and last and r.at - last[-1] < together:
                    continue
                since = f", {r.at - last[-1]:.1f} s after its restart" if last else ""
                found.append(said + (since if n != r.node_id else ""))
        return found


def not_back(node_id: int, phases: Mapping[int, str]) -> dict[int, str]:
    """What forbade restarting `node_id` when the nodes were in `phases` (`KafkaNode.phase`):
    itself loading its logs, or another node not back (down, starting or loading); by node."""
    found = {}
    for n, phase in sorted(phases.items()):
        if n == node_id and phase == "loading":
            found[n] = f"node {n} restarted while it was loading its logs"
        elif n != node_id and phase != "started":
            found[n] = f"node {node_id} restarted while node {n} was {phase}"
    return found


class RealCluster(Stops):
    """A started `KafkaCluster` plus an agent per node and the control server."""

    def __init__(self, kafka: KafkaCluster, pki: Pki, folder: Path, *, name: str = "real") -> None:
        self.kafka = kafka
        self.pki = pki
        self.folder = folder
        self.name = name
        self.timings: tuple[str, ...] = ()  # the roll's defaults, as an operator's
        self.restarts = Restarts()
        self.agents: dict[int, Agent] = {}
        self._lock = threading.Lock()
        self._restarting: dict[int, threading.Lock] = {}  # node id -> held while it restarts
        self.broken_installs: set[int] = set()  # node ids whose install changes nothing
        try:
            # Started side by side: an agent's start (Python, uvicorn, its JMX reader JVM) is
            # seconds of CPU, and nine in a row would cost a minute.
            with ThreadPoolExecutor(len(kafka.nodes)) as pool:
                started = {
                    node.node_id: pool.submit(self._agent, node) for node in kafka.nodes.values()
                }
                for node_id, future in started.items():
                    with contextlib.suppress(Exception):
                        self.agents[node_id] = future.result()
            for future in started.values():
                future.result()  # the first agent that could not start fails the cluster
            for node_id, agent in self.agents.items():
                try:
                    wait_until(
                        lambda agent=agent: _sampled(agent),  # type: ignore[misc]
                        180,  # nine JVMs starting beside a loaded `make test`
                        interval=0.2,
                        what=f"the agent of node {node_id} to read its broker",
                    )
                except AssertionError as failed:
                    answer = agent.state()
                    raise AssertionError(
                        f"{failed}; the agent's answer: {answer.status} {answer.body[:500]}"
                    ) from None
            self.control = ControlServer(
                known=self.kafka.nodes.__contains__,
                restart=self.restart,
                health=self.running,
                install=self.install,
            )
        except BaseException:
            self.stop_agents()
            raise
        self.control_url = self.control.url

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def node_ids(self) -> list[int]:
        return list(self.kafka.nodes)

    def roles(self, node_id: int) -> list[str]:
        return list(self.kafka.nodes[node_id].spec.roles)

    def agent(self, node_id: int) -> Agent:
        return self.agents[node_id]

    def running(self, node_id: int) -> bool:
        """The node's JVM runs (its `health` command)."""
        return self.kafka.nodes[node_id].running()

    def restarts_of(self, node_id: int) -> int:
        return self.restarts.of(node_id)

    def restarted(self) -> list[int]:
        return [r.node_id for r in self.restarts.log]

    def _agent(self, node: KafkaNode) -> Agent:
        return Agent(
            self.pki,
            node.jmx,
            "--data-dir",
            str(self.folder / "agent-data" / self.node_name(node.node_id)),
            "--node-id",
            self.node_name(node.node_id),
            # the agent's own defaults, as in production
            interval="1",
            running_interval="1",
            timeout="5",
            # beside a dozen JVMs starting at once (make test), a Python start takes its time
            start_timeout=90,
        )

    def node_name(self, node_id: int) -> str:
        return f"kafka-{node_id}"

    def recover_on_next_restart(
        self,
        node_id: int,
        *,
        hold: float = 0.0,
        registering: float = 0.0,
        release: threading.Event | None = None,
    ) -> None:
        """The node's next restart comes back into a full log recovery, of `hold` seconds at
        least (and with `release`, until that is set too), then `registering` seconds in
        STARTING (`KafkaNode.restart`)."""
        self.restarts.recover_next[node_id] = (hold, registering, release)

    def restart(self, node_id: int) -> None:
        """What `systemctl restart kafka` does: stop cleanly, start; a recovery if planned.
        Recorded at once; each node restarted under a lock of its own, so the members of a
        batch restart side by side, as on hosts of their own (one lock for all made the second
        wait for the first one's controlled shutdown, seconds under load)."""
        with self._lock:
            node = self.kafka.nodes[node_id]
            phases = {n: other.phase() for n, other in self.kafka.nodes.items()}
            at, wall = time.monotonic(), time.time()
            recover = node_id in self.restarts.recover_next
            hold, registering, release = self.restarts.recover_next.pop(node_id, (0, 0, None))
            kind = "recover" if recover else "clean"
            self.restarts.log.append(Restart(node_id, kind, at, wall, phases))
            one = self._restarting.setdefault(node_id, threading.Lock())
        with one:
            node.restart(recover=recover, hold=hold, registering=registering, release=release)

    def install(self, node_id: int, version: str) -> bool:
        """What a package install does: the node's next start runs `version`'s jars (False:
        there are none, `make kafka` did not resolve it). A node in `broken_installs` keeps
        its jars."""
        try:
            lib = kafka_lib(version)
        except KafkaJarsMissing:
            return False
        with self._lock:
            self.restarts.installs.append((node_id, version, time.monotonic()))
            if node_id not in self.broken_installs:
                self.kafka.nodes[node_id].lib = lib
        return True

    def inventory(self) -> Path:
        """Each node's `restart`, `health` and `install` (run by a roll with --kafka-version
        only) through the control server."""
        return write_inventory(self)

    def roll_command(self, state_dir: Path, roll_id: str, *extra: str) -> list[str]:
        """`rollguard roll` with this cluster's inventory, as an operator runs it: the client
        certificate and the state dir, and no timing flag (the roll's defaults)."""
        return rollguard_args(
            "roll",
            inventory=self.inventory(),
            bootstrap=self.bootstrap,
            tls=self.pki,
            state_dir=state_dir,
            roll_id=roll_id,
            extra=extra,
        )

    def stop_agents(self) -> None:
        """SIGTERM to every agent at once, then wait for each (killed after 10 s)."""
        for agent in self.agents.values():
            if agent.process.poll() is None:
                agent.process.terminate()
        for agent in self.agents.values():
            agent.stop()

    def stop(self) -> None:
        if hasattr(self, "control"):
            self.control.close()
        self.stop_agents()


def _sampled(agent: Agent) -> bool:
    """The agent has read its node once: 200, or 503 broker-state-missing (a controller)."""
    answer = agent.state()
    return answer.status == 200 or (answer.status == 503 and "broker-state-missing" in answer.body)


def seed(kafka: KafkaCluster, data_mb: int) -> None:
    """Topics `orders`, `bulk` and `canary` (replication 3), `data_mb` MB in `bulk`, and the
    consumer offsets topic: in a start-up slot (a producer JVM's burst too)."""
    with startup_slot(f"{data_mb} MB written to {kafka.folder}"):
        kafka.create_topics([("orders", 6, 3), ("bulk", 6, 3), ("canary", 3, 3)])
        kafka.produce("bulk", data_mb)
        kafka.make_consumer_offsets()


@contextlib.contextmanager
def real_cluster(
    folder: Path,
    pki: Pki,
    *,
    data_mb: int = DATA_MB,
    name: str = "real",
    cluster_class: type[RealCluster] = RealCluster,
    **kafka: object,
) -> Iterator[RealCluster]:
    """A started KafkaCluster (`kafka`: its arguments) with topics `orders`, `bulk` and
    `canary` (replication 3; min ISR 2 from the cluster, as for the internal topics), `data_mb`
    MB in `bulk`, the consumer offsets topic made, and an agent beside each node; all stopped
    at the end."""
    real = KafkaCluster(folder / "kafka", **kafka)  # type: ignore[arg-type]
    try:
        real.start()
        seed(real, data_mb)
        with cluster_class(real, pki, folder, name=name) as cluster:
            yield cluster
    finally:
        real.stop()
