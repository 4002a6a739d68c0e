"""Broker pods that are real Kafka nodes: the `Containers` of `realkube_bridge.PodBridge` for a
`realkafka.KafkaCluster` and a real `rollguard-agent` beside each node, as the agent runs as a
sidecar in a broker pod.

- A pod is the node whose id its name ends with (`prod-broker-1` is node 1; a controller pool's
  StatefulSet numbers its pods from its first node id, `spec.ordinals.start`), as the roller
  reads it.
- Its start: the node's JVM, unless it still runs (the cluster was started before its pods), into
  a full, CPU-throttled log recovery when `recover_on_next_start` asked; then the agent, listening
  on the pod's own address at the port every agent URL shares, with a certificate for
  `*.<service>.<namespace>.svc` (the headless services' names), its timeline in a folder that
  outlives the pod (a volume).
- Its stop, when the pod is deleted: the agent and the node at once, both by SIGTERM (the node's
  controlled shutdown), as the kubelet stops a pod's containers.
- Readiness: a broker's is the agent's `/v1/ready` (the manifests' probe); a controller-only
  node's is its controller port accepting a connection (a tcpSocket probe: it has no
  BrokerState, and the roller asks the KRaft quorum whether it caught up).
- `crash`: the node's JVM killed and started again in the same pod (a container restart), into a
  recovery if asked; the agent, its sidecar, stays.
"""

from __future__ import annotations

import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rollguard.certs.pki import issue, load_ca, write_pair
from rollguard.peers.processes import Agent, Pki
from rollguard.peers.realkafka import RELEASE, KafkaCluster, KafkaNode, kafka_lib

NUMBER = re.compile(r"(\d+)$")
METRIC = re.compile(r"^(rollguard_agent_[a-z_]+) ([-+0-9.eE]+)$", re.M)


class KafkaPods:
    def __init__(
        self,
        kafka: KafkaCluster,
        pki: Pki,
        ca_key: Path,
        folder: Path,
        *,
        port: int,
        namespace: str,
        services: list[str],
    ) -> None:
        self.kafka = kafka
        self.pki = pki
        self.folder = folder
        self.port = port
        self.agents: dict[str, Agent] = {}
        # node id -> its recovery's least seconds, and what releases it
        self.recover_next: dict[int, tuple[float, threading.Event | None]] = {}
        self.log: list[tuple[str, str]] = []  # (pod, what happened), in order
        self.started: list[tuple[str, float]] = []  # (pod, monotonic) of each node's start
        # node id -> the JVM its deleted pod ran, until its new pod's node has started (`seen`)
        self._replacing: dict[int, object] = {}
        self._seeing = threading.Lock()
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        ca = load_ca(pki.ca, ca_key)
        names = [f"*.{service}.{namespace}.svc" for service in services]
        agent = issue(ca, "agent", server=True, dns=names)
        self.cert, self.key = folder / "agent.crt", folder / "agent.key"
        write_pair(agent, self.cert, self.key, force=True)

    def node(self, pod: str) -> KafkaNode:
        match = NUMBER.search(pod)
        assert match is not None, pod
        return self.kafka.nodes[int(match.group(1))]

    def recover_on_next_start(
        self, node_id: int, *, hold: float = 0.0, release: threading.Event | None = None
    ) -> None:
        """The node's next start (its next pod's) goes into a full log recovery, of `hold`
        seconds at least, and until `release` is set if given (`KafkaNode.start`)."""
        self.recover_next[node_id] = (hold, release)

    # ---- Containers

    def start(self, pod: str, address: str, uid: str, image: str = "") -> None:
        """The agent first, then the node (a sidecar listed before the broker's container): the
        agent's JMX connection is made before a recovery holds the JVM to a sliver of a CPU.
        An image whose tag is a Kafka version (`rollguard.test/kafka:4.4.0`) runs that
        version's jars, as a real image would; any other tag keeps the node's."""
        node = self.node(pod)
        start = not node.running()
        tag = image.rpartition(":")[2]
        if start and RELEASE.fullmatch(tag):
            node.lib = kafka_lib(tag)
        agent = Agent(
            self.pki,
            node.jmx,
            "--data-dir",
            str(self.folder / "agent-data" / pod),
            "--node-id",
            pod,
            interval="1",
            running_interval="1",
            timeout="5",
            start_timeout=90,
            listen=f"{address}:{self.port}",
            probe_listen=f"{address}:0",
            cert=self.cert,
            key=self.key,
        )
        with self._lock:
            self.agents[pod] = agent
            recover = start and node.node_id in self.recover_next
            hold, release = self.recover_next.pop(node.node_id, (0.0, None))
        if start:
            if recover:
                node.prepare_recovery()
            node.start(throttle_loading=recover, hold=hold, release=release)
            self.started.append((pod, time.monotonic()))
            self.log.append((pod, "start into recovery" if recover else "start"))

    def stop(self, pod: str) -> None:
        with self._lock:
            agent = self.agents.pop(pod, None)
        node = self.node(pod)
        with ThreadPoolExecutor(2) as pool:
            if agent is not None:
                pool.submit(agent.stop)
            pool.submit(node.stop)
        self.log.append((pod, "stop"))

    def ready(self, pod: str) -> bool:
        node = self.node(pod)
        if not node.spec.is_broker:
            try:
                socket.create_connection(("127.0.0.1", node.controller_port), 0.5).close()
            except OSError:
                return False
            return True
        agent = self.agents.get(pod)
        if agent is None:
            return False
        try:
            with urllib.request.urlopen(agent.probe + "/v1/ready", timeout=1) as answer:
                return bool(answer.status == 204)
        except (urllib.error.URLError, OSError):
            return False

    def seen(self, pod: str) -> Mapping[str, Any]:
        """What the test sees at `pod`'s deletion, not the agent: whether the pod's JVM runs,
        and every node's phase from its own log (`KafkaNode.phase`: `loading` while it loads or
        recovers its logs), as `phases` {node id: phase}. A node whose pod was deleted earlier
        is `down` until its new pod's JVM runs, whatever the old JVM still logs (the bridge
        stops it a moment after the deletion), then as its new run says, until `started`."""
        with self._seeing:
            phases = {}
            for n, node in self.kafka.nodes.items():
                phase = node.phase()
                if n in self._replacing:
                    if node.process is self._replacing[n]:
                        phase = "down"
                    elif phase == "started":
                        del self._replacing[n]
                phases[n] = phase
            deleted = self.node(pod)
            self._replacing[deleted.spec.node_id] = deleted.process
        return {"running": deleted.running(), "phases": phases}

    def agent_gauges(self, pod: str) -> Mapping[str, float]:
        """The pod's agent's own gauges (its /metrics), for a test's preconditions: that the
        agent does report what the roller must see. Never evidence of the roller's safety."""
        agent = self.agents.get(pod)
        if agent is None:
            return {}
        try:
            with urllib.request.urlopen(agent.probe + "/metrics", timeout=5) as answer:
                text = answer.read().decode()
        except OSError:  # refused, or slow under load (URLError is one): nothing seen yet
            return {}
        return {
            name.removeprefix("rollguard_agent_"): float(value)
            for name, value in METRIC.findall(text)
        }

    # ---- what a test does to a pod's containers

    def crash(
        self,
        pod: str,
        *,
        recover: bool = True,
        hold: float = 0.0,
        release: threading.Event | None = None,
    ) -> None:
        """The Kafka container dies (SIGKILL) and the kubelet starts it again in the same pod,
        into a recovery of `hold` seconds at least (and until `release` is set) when `recover`."""
        node = self.node(pod)
        node.kill()
        if recover:
            node.prepare_recovery()
        node.start(throttle_loading=recover, hold=hold, release=release)
        self.log.append((pod, "crash, start into recovery" if recover else "crash, start"))

    def stop_all(self) -> None:
        with self._lock:
            agents = list(self.agents.values())
            self.agents.clear()
        for agent in agents:
            agent.stop()
