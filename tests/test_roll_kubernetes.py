"""`rollguard roll` on Kubernetes: the real lightkube client against the Kubernetes API peer.

The broker pods belong to a StatefulSet in the API peer; deleting one stops that broker in the
Kafka-protocol peer and its replacement rejoins when its container runs. The roller is the
installed `rollguard` command, configured with a kubeconfig file like any kubectl user.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.kube import KubeSim, SeenRequest

from helpers import BIN, HttpsPeer, Pki

NS = "kafka"
SELECTOR = "strimzi.io/cluster=prod"


def labels(ordinal: int) -> dict[str, str]:
    return {
        "strimzi.io/cluster": "prod",
        "strimzi.io/broker-role": "true",
        "strimzi.io/controller-role": "true",
        "app": "kafka",
    }


@dataclass
class Cluster:
    kube: KubeSim
    kafka: KafkaClusterSim
    kubeconfig: Path
    folder: Path

    agents: HttpsPeer

    def roll(
        self, pki: Pki, *extra: str, command: str = "roll", agent_url: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The installed roller; its agents are `self.agents` unless `agent_url` says (""
        gives no --agent-url at all: the default template)."""
        if agent_url is None:
            agent_url = self.agents.url + "/agents/{pod}/v1/broker-state"
        args = [
            str(BIN / "rollguard"),
            command,
            "--namespace",
            NS,
            "--selector",
            SELECTOR,
            "--bootstrap",
            self.kafka.bootstrap,
            *(["--agent-url", agent_url] if agent_url else []),
            *pki.client_flags(),
            "--state-dir",
            str(self.folder / "state"),
            "--poll-interval",
            "0.2",
            "--operation-timeout",
            "1.5s",
            "--retry-initial-backoff-ms",
            "100",
            "--retry-max-retries",
            "2",
            "--roll-id",
            "k1",
            *extra,
        ]
        env = {"KUBECONFIG": str(self.kubeconfig), "PATH": "/usr/bin:/bin"}
        return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)

    def deleted(self) -> list[str]:
        return [d.name for d in self.kube.deletions]

    def events(self) -> list[dict[str, object]]:
        path = self.folder / "state" / "events-k1.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


class RunningAgents:
    """Agents at /agents/<pod>/v1/broker-state: RUNNING, except the pods in `unreadable`, whose
    agent answers 503 `jmx-unreachable` (it cannot read its broker: the node is unknown)."""

    def __init__(self) -> None:
        self.unreadable: set[str] = set()

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        pod = scope["path"].split("/")[2]
        status, body = 200, {"brokerState": 3}
        if pod in self.unreadable:
            status, body = 503, {"error": "jmx-unreachable", "message": "connection refused"}
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


@pytest.fixture
def cluster(tmp_path: Path, pki: Pki) -> Iterator[Cluster]:
    kafka = KafkaClusterSim(
        broker_ids=[0, 1, 2], voters=[0, 1, 2], topics={"orders": TopicSpec(3, 3, 2)}
    )
    kafka.start()
    ordinal = lambda name: int(name.rsplit("-", 1)[1])  # noqa: E731
    kube = KubeSim(
        recreate_after=0.1,
        ready_after=0.3,
        on_delete=lambda name: kafka.stop_node(ordinal(name)),
        on_start=lambda name: kafka.start_node(ordinal(name)),
    )
    kube.start()
    kube.add_statefulset(NS, "prod-kafka", 3, labels, revision="rev-1")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": kube.url}}],
        "users": [{"name": "sim", "user": {"token": "test"}}],
        "contexts": [
            {"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": NS}}
        ],
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    try:
        with HttpsPeer(RunningAgents(), pki) as agents:
            yield Cluster(kube, kafka, kubeconfig, tmp_path, agents)
    finally:
        kube.stop()
        kafka.stop()


def test_only_out_of_date_pods_are_rolled_and_the_journal_is_a_configmap(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    done = cluster.roll(pki)
    assert done.returncode == 0, done.stderr
    # kafka-0 leads the quorum: the active controller goes last
    assert cluster.deleted() == ["prod-kafka-1", "prod-kafka-2", "prod-kafka-0"]
    journal = json.loads(cluster.kube.configmap("rollguard-roll-k1", NS)["data"]["journal.json"])
    assert journal["state"] == "completed"
    # a second roll finds everything up to date and restarts nothing
    again = cluster.roll(pki, "--roll-id", "k2")
    assert again.returncode == 0, again.stderr
    assert len(cluster.deleted()) == 3 and "skipped 3" in again.stderr


def test_the_skip_annotation_and_skip_flag_are_honoured(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.annotate("prod-kafka-1", "rollguard.io/skip-restart", "true")
    done = cluster.roll(pki, "--skip", "prod-kafka-2")
    assert done.returncode == 0, done.stderr
    assert cluster.deleted() == ["prod-kafka-0"]


def test_plan_prints_decisions_and_restarts_nothing(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    done = cluster.roll(pki, command="plan")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:5]]  # summary, header, rows
    assert [row[1] for row in rows] == ["prod-kafka-1", "prod-kafka-2", "prod-kafka-0"]
    assert all(row[3] == "restart" for row in rows)
    assert cluster.deleted() == []
    assert not (cluster.folder / "state").exists()  # a plan writes nothing
    as_json = cluster.roll(pki, "--output", "json", command="plan")
    entries = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(e["node"], e["action"]) for e in entries] == [
        ("prod-kafka-1", "restart"),
        ("prod-kafka-2", "restart"),
        ("prod-kafka-0", "restart"),
    ]


def test_a_stuck_out_of_date_pod_is_force_restarted_first(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.set_waiting("prod-kafka-2", "CrashLoopBackOff")
    done = cluster.roll(pki)
    assert done.returncode == 0, done.stderr
    assert cluster.deleted()[0] == "prod-kafka-2"
    assert any(
        e["action"] == "restart" and "CrashLoopBackOff" in str(e["reason"])
        for e in cluster.events()
    )


def test_a_stuck_pod_that_is_up_to_date_is_fatal(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.set_waiting("prod-kafka-1", "ImagePullBackOff")
    done = cluster.roll(pki)
    assert done.returncode == 1
    assert "prod-kafka-1 is stuck (ImagePullBackOff)" in done.stderr
    assert cluster.deleted() == []


def test_a_not_ready_pod_whose_agent_is_unreachable_is_unknown_never_forced(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.set_ready("prod-kafka-1", False)
    cluster.agents.app.unreadable.add("prod-kafka-1")
    done = cluster.roll(pki, "--safety-wait", "3s")
    assert done.returncode == 1
    assert "prod-kafka-1 is not ready and its agent cannot be read" in done.stderr
    assert "--on-agent-unreachable force" in done.stderr
    # Unknown is not "not recovering": never restarted. The others were, as the availability
    # check allowed (Kafka still counts prod-kafka-1 in its ISRs).
    assert "prod-kafka-1" not in cluster.deleted()
    journal = cluster.kube.configmap("rollguard-roll-k1", NS)["data"]["journal.json"]
    assert json.loads(journal)["state"] == "failed"


def test_an_unreachable_agents_node_is_forced_on_explicit_request(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.set_ready("prod-kafka-1", False)
    cluster.agents.app.unreadable.add("prod-kafka-1")
    done = cluster.roll(pki, "--on-agent-unreachable", "force")
    assert done.returncode == 0, done.stderr
    assert "prod-kafka-1" in cluster.deleted()
    forced = next(
        e for e in cluster.events() if e["action"] == "restart" and e["node"] == "prod-kafka-1"
    )
    assert "--on-agent-unreachable force" in str(forced["reason"])


class RecoveringAgents:
    """Agents at /agents/<pod>/v1/broker-state: prod-kafka-1 recovers for a few polls, out of
    every ISR and the quorum (as a recovering broker is), and rejoins them when done."""

    def __init__(self, kube: KubeSim, kafka: KafkaClusterSim | None = None) -> None:
        self.kube = kube
        self.kafka = kafka
        self.left = 3000
        if kafka is not None:
            kafka.stop_node(1)

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        pod = scope["path"].split("/")[2]
        body: dict[str, object] = {"brokerState": 3}
        if pod == "prod-kafka-1" and self.left > 0:
            self.left -= 500
            body = {
                "brokerState": 2,
                "recovery": {
                    "remainingLogsToRecover": self.left // 100,
                    "remainingSegmentsToRecover": self.left,
                },
            }
            if self.left <= 0:
                self.kube.set_ready(pod, True)
                if self.kafka is not None:
                    self.kafka.start_node(1)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def test_a_not_ready_pod_in_log_recovery_is_waited_for_not_force_restarted(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.set_ready("prod-kafka-1", False)
    with HttpsPeer(RecoveringAgents(cluster.kube, cluster.kafka), pki) as agents:
        # A 5-minute operation timeout: its agent is asked at once, not after it, so the
        # recovery shows (and is waited for) from the first poll.
        done = cluster.roll(
            pki,
            "--operation-timeout",
            "5m",
            agent_url=agents.url + "/agents/{pod}/v1/broker-state",
        )
    assert done.returncode == 0, done.stderr
    waits = [e for e in cluster.events() if e["action"] == "wait-recovery"]
    assert waits and {e["node"] for e in waits} == {"prod-kafka-1"}
    # Out of the ISRs while recovering, it held the others back (availability, quorum); then
    # rolled like them: one deletion each, none while it recovered.
    assert sorted(cluster.deleted()) == ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]
    first_restart = next(i for i, e in enumerate(cluster.events()) if e["action"] == "restart")
    last_wait = max(i for i, e in enumerate(cluster.events()) if e["action"] == "wait-recovery")
    assert last_wait < first_restart


def test_a_forbidden_delete_fails_the_roll_in_one_line_with_the_journal_marked_failed(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.forbidden.add(("delete", "pods"))  # the Role lost "delete" on pods
    done = cluster.roll(pki)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "delete pod prod-kafka-1: 403 Forbidden" in done.stderr
    assert "cannot delete resource" in done.stderr
    journal = json.loads(cluster.kube.configmap("rollguard-roll-k1", NS)["data"]["journal.json"])
    assert journal["state"] == "failed" and "403 Forbidden" in journal["reason"]
    assert journal["nodes"]["prod-kafka-1"]["status"] == "failed"


def test_an_unreadable_pod_list_is_one_line_not_a_traceback(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.forbidden.add(("list", "pods"))
    done = cluster.roll(pki)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "list pods in kafka: 403 Forbidden" in done.stderr


class RecoveringAfterItsRestart:
    """Agents at /agents/<pod>/v1/broker-state: RUNNING, except the first pod the roll deletes,
    which is in log recovery for `seconds` after its deletion (its segments counting down)."""

    def __init__(self, kube: KubeSim, seconds: float) -> None:
        self.kube = kube
        self.seconds = seconds

    def deleted_at(self) -> float | None:
        return self.kube.deletions[0].at if self.kube.deletions else None

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        pod = scope["path"].split("/")[2]
        body: dict[str, object] = {"brokerState": 3}
        since = self.deleted_at()
        if since is not None and pod == self.kube.deletions[0].name:
            left = since + self.seconds - time.monotonic()
            if left > 0:
                segments = int(left * 100)
                recovery = {
                    "remainingLogsToRecover": 1 + segments // 100,
                    "remainingSegmentsToRecover": segments,
                }
                body = {"brokerState": 2, "recovery": recovery}
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def test_an_api_refusing_everything_for_20_s_during_a_recovery_wait_does_not_end_the_roll(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    agents = RecoveringAfterItsRestart(cluster.kube, seconds=30)
    lease_requests: list[float] = []

    def seen(request: SeenRequest) -> None:
        if "/leases/" in request.path:
            lease_requests.append(time.monotonic())

    def outage() -> tuple[float, float] | None:
        since = agents.deleted_at()
        return None if since is None else (since + 4, since + 24)

    def unavailable() -> bool:
        window = outage()
        return window is not None and window[0] <= time.monotonic() < window[1]

    cluster.kube.on_request = seen
    cluster.kube.unavailable = unavailable
    with HttpsPeer(agents, pki) as peer:
        done = cluster.roll(pki, agent_url=peer.url + "/agents/{pod}/v1/broker-state")
    assert done.returncode == 0, done.stderr
    window = outage()
    assert window is not None
    refused = [t for t in lease_requests if window[0] <= t < window[1]]
    assert len(refused) >= 5, lease_requests  # renewals tried all through the outage, refused
    assert done.stderr.count("503 ServiceUnavailable") >= 5
    assert "retrying in 2s" in done.stderr
    # It waited out the recovery (never restarted the recovering pod again), then rolled on.
    assert sorted(cluster.deleted()) == ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]
    assert any(e["action"] == "wait-recovery" for e in cluster.events())
    lease = cluster.kube.lease("rollguard-roll", NS)
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # released at the end


def test_a_lease_taken_over_during_a_recovery_wait_stops_the_roll_and_the_journal_says_why(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    agents = RecoveringAfterItsRestart(cluster.kube, seconds=60)
    taken: list[float] = []

    def take_over(request: SeenRequest) -> None:
        since = agents.deleted_at()
        if not taken and since is not None and time.monotonic() > since + 3:
            taken.append(time.monotonic())

            def steal(obj: dict[str, Any]) -> None:
                obj["spec"]["holderIdentity"] = "other-roller:7"
                obj["metadata"]["annotations"] = {"rollguard.io/roll-id": "r9"}

            cluster.kube.edit("leases", "rollguard-roll", NS, steal)

    cluster.kube.on_request = take_over
    with HttpsPeer(agents, pki) as peer:
        done = cluster.roll(pki, agent_url=peer.url + "/agents/{pod}/v1/broker-state")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "lost the roll lease, stopping" in done.stderr
    assert "held by other-roller:7 (roll r9)" in done.stderr
    assert len(cluster.deleted()) == 1  # nothing more was done under a lease that is not ours
    journal = json.loads(cluster.kube.configmap("rollguard-roll-k1", NS)["data"]["journal.json"])
    assert journal["state"] == "failed" and "lost the roll lease" in journal["reason"]
    first = cluster.deleted()[0]
    assert journal["nodes"][first]["status"] == "restarting"  # for --resume to wait for it
    lease = cluster.kube.lease("rollguard-roll", NS)
    assert lease is not None and lease["spec"]["holderIdentity"] == "other-roller:7"


def test_agent_urls_that_resolve_nowhere_stop_the_roll_before_any_restart(
    cluster: Cluster, pki: Pki
) -> None:
    # `plan --help`'s own example: no --agent-url, no --service. The headless service comes
    # from the pods' spec.subdomain; these names exist in no DNS here, so nothing may start.
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    done = cluster.roll(pki, agent_url="")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for ordinal in range(3):
        url = f"https://prod-kafka-{ordinal}.prod-kafka.kafka.svc:8443"
        assert f"prod-kafka-{ordinal} ({url}): its host" in done.stderr
    assert "does not resolve" in done.stderr and "--on-agent-unreachable force" in done.stderr
    assert cluster.deleted() == []


def test_a_service_template_without_a_service_to_fill_it_is_a_usage_error() -> None:

    from lightkube.models.core_v1 import PodSpec
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Pod

    from rollguard.roller.kubernetes import KubernetesPlatform, KubernetesSettings
    from rollguard.shared.errors import ConfigError

    pod = Pod(metadata=ObjectMeta(name="prod-kafka-0"), spec=PodSpec(containers=[]))
    platform = KubernetesPlatform(None, KubernetesSettings(NS, SELECTOR))  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        platform._node(pod)
    assert "needs {service}" in str(caught.value) and "--service NAME" in str(caught.value)
    named = KubernetesPlatform(None, KubernetesSettings(NS, SELECTOR, service="brokers"))  # type: ignore[arg-type]
    assert named._node(pod).agent_url == "https://prod-kafka-0.brokers.kafka.svc:8443"
    pod.spec.subdomain = "prod-kafka-brokers"  # type: ignore[union-attr]
    assert platform._node(pod).agent_url == (
        "https://prod-kafka-0.prod-kafka-brokers.kafka.svc:8443"
    )
