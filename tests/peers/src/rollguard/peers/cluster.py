"""A simulated Kafka cluster made of real processes, for the end-to-end roll tests.

Per node: a Java test broker (Kafka's MBeans over JMX) and a real `rollguard-agent` beside it
over mutual TLS. For the whole cluster: the Kafka-protocol peer (`kafka.KafkaClusterSim`) whose
metadata, ISRs and KRaft quorum follow the brokers. The control server (`control.ControlServer`,
the real cluster's too) restarts a node on `POST /restart/<id>`: the broker JVM is killed (an
unclean stop) and started again, going through STARTING and, when asked, a long log recovery;
the Kafka peer drops the broker from ISRs and the quorum while it is not RUNNING. The inventory
it writes points each node's restart command at that control server, exactly as an operator's
would point at `ssh host systemctl restart kafka`, and its `health` command at `GET
/health/<id>` (200 while the broker JVM runs), as an operator's would at `systemctl is-active
kafka`. It is the `rollcluster.RollCluster` a roll test drives, as `realcluster.RealCluster` is
on a real Kafka: what a real Kafka cannot be made to do on demand (a stall, a lagging voter, a
recovery of a chosen length at a chosen restart) is rolled here.

Timings follow a real cluster through the Kafka peer: a restarted broker starts fenced, then
rejoins its partitions' ISRs over its catch-up time (`catch_up`, per node), so its fellow
replicas are unsafe to restart until then; internal topics exist. `controller_only` adds KRaft
controllers that are not brokers: their JVM has no BrokerState (as Kafka's), so their agents
answer `503 broker-state-missing`, and they rejoin the quorum after a short catch-up.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollguard.peers.commandline import QUICK_TIMINGS
from rollguard.peers.control import ControlServer
from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.processes import Agent, Broker, Pki, free_port
from rollguard.peers.rollcluster import write_inventory
from rollguard.peers.spawn import Stops


@dataclass
class NodePlan:
    """How node `node_id` behaves when restarted."""

    starting_ms: int = 1500
    recovery_ms: int = 0  # > 0: the next start goes through log recovery this long
    stall_at: float | None = None
    dirs: int = 2
    threads: int = 2
    # The state the log loading runs in: 1 (STARTING) as in most restarts of a real Kafka 4.x
    # broker, or 2 (RECOVERY) when its registration was acknowledged before loading began.
    recovery_state: int = 1
    loading_ms: int = 0  # without recovery_ms: the log loading of a clean start (null segments)
    # After a loading in STARTING: STARTING this much longer without the recovery gauges, as a
    # real broker catching up with the metadata log and registering (a few seconds; longer
    # under load) before RECOVERY and RUNNING.
    registration_ms: int = 1000


@dataclass
class SimNode:
    node_id: int
    broker: Broker
    agent: Agent
    plan: NodePlan = field(default_factory=NodePlan)
    restarts: int = 0
    is_broker: bool = True
    is_controller: bool = True  # a KRaft voter (combined with the broker, or controller-only)

    @property
    def roles(self) -> list[str]:
        return [r for r, has in (("broker", self.is_broker), ("controller", self.is_controller))
                if has]  # fmt: skip


DEFAULT_TOPICS = {
    "orders": TopicSpec(partitions=6, replication_factor=3, min_insync_replicas=2),
    "audit": TopicSpec(partitions=3, replication_factor=3, min_insync_replicas=None),
}


class ProcessCluster(Stops):
    """`size` combined broker+controller nodes 0..size-1, and `controller_only` more voters.

    `catch_up`: seconds each broker takes to rejoin its ISRs after it starts (the Kafka peer's
    default otherwise); `kafka` holds any further `KafkaClusterSim` arguments (`racks`,
    `placement`...). `combined=False`: the `size` nodes are brokers only, not voters (then
    give `controller_only` voters), as in a cluster with dedicated controllers.
    """

    def __init__(
        self,
        pki: Pki,
        folder: Path,
        size: int = 3,
        plans: dict[int, NodePlan] | None = None,
        *,
        controller_only: int = 0,
        catch_up: Mapping[int, float] | None = None,
        topics: Mapping[str, TopicSpec] | None = None,
        kafka: Mapping[str, Any] | None = None,
        combined: bool = True,
        name: str = "demo",
    ) -> None:
        self.pki = pki
        self.folder = folder
        self.name = name
        self.plans = plans or {}
        self.timings: tuple[str, ...] = QUICK_TIMINGS
        self.restart_log: list[int] = []  # node ids, in the order their restarts were asked
        brokers = list(range(size))
        controllers = list(range(size, size + controller_only))
        voters = (brokers if combined else []) + controllers
        self.kafka = KafkaClusterSim(
            broker_ids=brokers,
            voters=voters,
            topics=dict(DEFAULT_TOPICS if topics is None else topics),
            catch_up=catch_up,
            **(kafka or {}),
        )
        self.kafka.start()
        self.nodes: dict[int, SimNode] = {}
        self._lock = threading.Lock()
        try:
            for node_id in brokers + controllers:
                is_broker = node_id in brokers
                # Restarted on the same JMX port: one outside the ephemeral range, which a
                # client's connection could take while the broker is down.
                flags = ("--state", "3", *(() if is_broker else ("--no-broker-state",)))
                broker = Broker(*flags, port=free_port())
                agent = Agent(
                    pki,
                    broker.address,
                    "--data-dir",
                    str(self.data_dir(node_id)),
                    "--node-id",
                    f"kafka-{node_id}",
                    interval="0.5",
                    running_interval="1",
                    timeout="4",
                )
                self.nodes[node_id] = SimNode(
                    node_id,
                    broker,
                    agent,
                    self.plans.get(node_id, NodePlan()),
                    is_broker=is_broker,
                    is_controller=node_id in voters,
                )
            self.control = ControlServer(
                known=self.nodes.__contains__, restart=self.restart, health=self.running
            )
        except BaseException:
            self.stop()
            raise
        self.control_url = self.control.url

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def node_ids(self) -> list[int]:
        return list(self.nodes)

    def node_name(self, node_id: int) -> str:
        return f"kafka-{node_id}"

    def roles(self, node_id: int) -> list[str]:
        return self.nodes[node_id].roles

    def agent(self, node_id: int) -> Agent:
        return self.nodes[node_id].agent

    def running(self, node_id: int) -> bool:
        """The node's broker JVM runs (its `health` command)."""
        return self.nodes[node_id].broker.process.poll() is None

    def restarts_of(self, node_id: int) -> int:
        return self.nodes[node_id].restarts

    def restarted(self) -> list[int]:
        return list(self.restart_log)

    def data_dir(self, node_id: int) -> Path:
        """The agent's --data-dir (its recovery timeline), which outlives agent restarts."""
        return self.folder / "agent-data" / f"kafka-{node_id}"

    def restart(self, node_id: int) -> None:
        """Kill the broker (unclean) and start it again on the same JMX port."""
        with self._lock:
            node = self.nodes[node_id]
            node.restarts += 1
            self.restart_log.append(node_id)
            port = node.broker.port
            node.broker.stop()
            if node.is_broker:
                self.kafka.stop_broker(node_id)
            if node.is_controller:
                self.kafka.stop_voter(node_id)
            plan = node.plan
            flags = [
                "--starting-ms",
                str(plan.starting_ms),
                "--dirs",
                str(plan.dirs),
                "--threads",
                str(plan.threads),
                "--logs",
                "40",
                "--segments",
                "2000",
                "--recovery-state",
                str(plan.recovery_state),
            ]
            if plan.recovery_ms or plan.loading_ms:
                flags += ["--registration-ms", str(plan.registration_ms)]
            if plan.recovery_ms:
                flags += ["--recovery-ms", str(plan.recovery_ms)]
            elif plan.loading_ms:
                flags += ["--loading-ms", str(plan.loading_ms)]
            if plan.stall_at is not None:
                flags += ["--stall-at", str(plan.stall_at)]
            if not node.is_broker:
                flags.append("--no-broker-state")
            node.broker = Broker(*flags, port=port)
            node.plan = NodePlan()  # later restarts are quick and clean
            threading.Thread(target=self._rejoin, args=(node_id, node.broker), daemon=True).start()

    def _rejoin(self, node_id: int, broker: Broker) -> None:
        """The broker rejoins ISRs and the quorum once it is RUNNING, as Kafka's would."""
        try:
            broker.output.wait_for(r"^STATE 3$", timeout=600)
        except AssertionError:
            return
        with self._lock:
            node = self.nodes[node_id]
            if node.broker is broker:
                if node.is_broker:
                    self.kafka.start_broker(node_id)
                if node.is_controller:
                    self.kafka.start_voter(node_id)

    def inventory(self) -> Path:
        return write_inventory(self)

    def stop(self) -> None:
        if hasattr(self, "control"):
            self.control.close()
        for node in self.nodes.values():
            node.agent.stop()
            node.broker.stop()
        self.kafka.stop()
