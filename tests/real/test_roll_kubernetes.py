"""`rollguard roll` on Kubernetes: the roller's decisions, on the real API server.

Each test has a namespace of the shared real control plane (`kube`) with a StatefulSet
`prod-kafka` of 3 pods made out of date by a new template (OnDelete: the StatefulSet controller
restarts none). `PodBridge` ties each pod to a node of the Kafka-protocol peer, as a kubelet
ties a pod to its containers: a deleted pod stays Terminating until its node stopped, the new
pod's node starts again, and the pod is Ready when `SimNodes.ready` says (a test holds one
NotReady). The agents are an HTTPS peer (what they answer is the case under test). The roller
is the installed `rollguard` command with the token of a ServiceAccount bound to the documented
Role. What a real control plane cannot show on demand (a crash-looping pod, an image that does
not pull) is in test_roll_kubernetes_peer.py, on the API peer.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import Pod
from lightkube.resources.rbac_authorization_v1 import Role

from rollguard.peers.harness import kafka_peer
from rollguard.peers.harness_pods import (
    AGENTS,
    LABELS,
    SELECTOR,
    PeerNodes,
    PodRoll,
    roller_account,
)
from rollguard.peers.realkube import READY_ANNOTATION, ControlPlane, pod_ready
from rollguard.peers.realkube_bridge import BRIDGED, CONTAINERS, PodBridge
from rollguard.peers.realkube_objects import may

from helpers import HttpsPeer, Pki, answer, wait_until

STS = "prod-kafka"
PODS = ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]


def ordinal(pod: str) -> int:
    return int(pod.rsplit("-", 1)[1])


def apply(kube: ControlPlane, namespace: str, generation: str) -> None:
    annotations = {
        READY_ANNOTATION: "false",  # NotReady until the bridge's probe says otherwise
        CONTAINERS: "running",
        "example.com/generation": generation,
    }
    pod_labels = {**LABELS, BRIDGED: "true"}
    kube.apply_statefulset(namespace, STS, 3, pod_labels=pod_labels, pod_annotations=annotations)


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
        await answer(send, status, body)


@pytest.fixture
def agents() -> RunningAgents:
    return RunningAgents()


@pytest.fixture
def cluster(
    kube: ControlPlane, kube_namespace: str, pki: Pki, tmp_path: Path, agents: RunningAgents
) -> Iterator[PodRoll[ControlPlane]]:
    """3 Ready pods of `prod-kafka`, all out of date; the peer's nodes 0-2 behind them (node 0
    leads the quorum), RUNNING agents (`agents`), the roller's documented Role."""
    client, namespace = kube.client(), kube_namespace
    with (
        kafka_peer() as kafka,
        PodBridge(client, namespace, PeerNodes(kafka), tmp_path, interval=0.1) as bridge,
        HttpsPeer(agents, pki) as peer,
    ):
        kubeconfig = roller_account(kube, namespace)
        apply(kube, namespace, "1")

        def ready() -> bool:
            found = list(client.list(Pod, namespace=namespace, labels={BRIDGED: "true"}))
            return len(found) == 3 and all(pod_ready(p) for p in found)

        bridge.wait(ready, 60, "3 Ready pods")
        apply(kube, namespace, "2")
        cluster = PodRoll(kafka, namespace, kubeconfig, tmp_path, pki, kube,
                          agent_url=peer.url + AGENTS, bridge=bridge,
                          deleted=bridge.deleted)  # fmt: skip
        cluster.until_out_of_date(STS)
        yield cluster


def test_only_out_of_date_pods_are_rolled_and_the_journal_is_a_configmap(
    cluster: PodRoll[ControlPlane],
) -> None:
    done = cluster.roll()
    assert done.returncode == 0, done.stderr
    # kafka-0 leads the quorum: the active controller goes last
    assert cluster.restarted() == ["prod-kafka-1", "prod-kafka-2", "prod-kafka-0"]
    assert cluster.journal()["state"] == "completed"
    # a second roll finds every pod on the new revision and restarts nothing
    again = cluster.roll("--roll-id", "k2")
    assert again.returncode == 0, again.stderr
    assert len(cluster.restarted()) == 3 and "skipped 3" in again.stderr


def test_the_skip_annotation_and_skip_flag_are_honoured(cluster: PodRoll[ControlPlane]) -> None:
    cluster.annotate("prod-kafka-1", "rollguard.io/skip-restart", "true")
    done = cluster.roll("--skip", "prod-kafka-2")
    assert done.returncode == 0, done.stderr
    assert cluster.restarted() == ["prod-kafka-0"]


def test_plan_prints_decisions_and_restarts_nothing(cluster: PodRoll[ControlPlane]) -> None:
    done = cluster.plan()
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:5]]  # summary, header, rows
    assert [row[1] for row in rows] == ["prod-kafka-1", "prod-kafka-2", "prod-kafka-0"]
    assert all(row[3] == "restart" for row in rows)
    assert not cluster.state.exists()  # a plan writes nothing
    as_json = cluster.plan("--output", "json")
    assert [(e["node"], e["action"]) for e in as_json.entries()] == [
        ("prod-kafka-1", "restart"),
        ("prod-kafka-2", "restart"),
        ("prod-kafka-0", "restart"),
    ]
    assert cluster.restarted() == []


def test_plan_shows_the_gates_that_would_hold_the_roll_and_the_held_nodes(
    cluster: PodRoll[ControlPlane],
) -> None:
    """A consumer group the Admin API cannot give offsets for is a closed gate (unknown is
    closed): every node the roll would restart now shows it; a --hold node shows as held."""
    done = cluster.plan(
        "--output", "json", "--gate-consumer-lag", "payments=100", "--hold", "prod-kafka-2"
    )
    assert done.returncode == 0, done.stderr
    entries = {e["node"]: e for e in done.entries()}
    assert entries["prod-kafka-2"]["action"] == "hold"
    assert "--resume" in entries["prod-kafka-2"]["reason"]
    for pod in ("prod-kafka-0", "prod-kafka-1"):
        assert entries[pod]["action"] == "restart", entries[pod]
        hold = entries[pod]["hold"]
        assert hold["kind"] == "gate" and "consumer group payments" in hold["reason"], hold
        assert hold["blockers"][0]["subject"] == "consumer-lag gate payments"
    text = cluster.plan("--gate-consumer-lag", "payments=100")
    assert text.returncode == 0, text.stderr
    assert "consumer-lag gate: " in text.stdout and "3 restart" in text.stdout, text.stdout
    # A window that opens in two hours: the plan says when.
    start = datetime.now(UTC) + timedelta(hours=2)
    window = f"* {start:%H:%M}-{start + timedelta(minutes=30):%H:%M} UTC"
    later = cluster.plan("--output", "json", "--window", window)
    assert later.returncode == 0, later.stderr
    for entry in later.entries():
        assert entry["hold"]["kind"] == "gate", entry
        assert f"the next opens {start:%a %H:%M} UTC" in entry["hold"]["reason"], entry
    assert cluster.restarted() == []


def test_a_not_ready_pod_whose_agent_is_unreachable_is_unknown_never_forced(
    cluster: PodRoll[ControlPlane], agents: RunningAgents
) -> None:
    cluster.hold_not_ready("prod-kafka-1")
    agents.unreadable.add("prod-kafka-1")
    done = cluster.roll("--safety-wait", "3s")
    assert done.returncode == 1
    assert "prod-kafka-1 is not ready and its agent cannot be read" in done.stderr
    assert "--on-agent-unreachable force" in done.stderr
    # Unknown is not "not recovering": never restarted. The others were, as the availability
    # check allowed (Kafka still counts prod-kafka-1 in its ISRs).
    assert "prod-kafka-1" not in cluster.restarted()
    assert done.journal is not None and done.journal["state"] == "failed"


def test_an_unreachable_agents_node_is_forced_on_explicit_request(
    cluster: PodRoll[ControlPlane], agents: RunningAgents
) -> None:
    cluster.hold_not_ready("prod-kafka-1")
    agents.unreadable.add("prod-kafka-1")
    done = cluster.roll("--on-agent-unreachable", "force")
    assert done.returncode == 0, done.stderr
    assert "prod-kafka-1" in cluster.restarted()
    forced = done.of("restart", "prod-kafka-1")[0]
    assert "--on-agent-unreachable force" in str(forced["reason"]) and forced["forced"] is True


class Recovering:
    """Agents at /agents/<pod>/v1/broker-state: RUNNING, but the pod `recovering` names, in log
    recovery (its segments counting down from `left`, never done) until `done` is set."""

    def __init__(self, left: int) -> None:
        self.left = left
        self.done = threading.Event()

    def recovering(self, pod: str) -> bool:
        raise NotImplementedError

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        pod = scope["path"].split("/")[2]
        body: dict[str, object] = {"brokerState": 3}
        if not self.done.is_set() and self.recovering(pod):
            self.left = max(self.left - 10, 10)
            recovery = {
                "remainingLogsToRecover": 1 + self.left // 100,
                "remainingSegmentsToRecover": self.left,
            }
            body = {"brokerState": 2, "recovery": recovery}
        await answer(send, 200, body)


class RecoveringAgents(Recovering):
    """`pod` is in log recovery (its node out of every ISR and the quorum, its pod NotReady, as
    a recovering broker is) until `finish`: then it rejoins them."""

    def __init__(self, cluster: PodRoll[ControlPlane], pod: str) -> None:
        super().__init__(3000)
        self.cluster, self.pod = cluster, pod
        cluster.kafka.stop_node(ordinal(pod))
        cluster.hold_not_ready(pod)

    def recovering(self, pod: str) -> bool:
        return pod == self.pod

    def finish(self) -> None:
        self.cluster.kafka.start_node(ordinal(self.pod))
        self.cluster.clear_not_ready(self.pod)
        self.done.set()


def test_a_not_ready_pod_in_log_recovery_is_waited_for_not_force_restarted(
    cluster: PodRoll[ControlPlane], pki: Pki
) -> None:
    agents = RecoveringAgents(cluster, "prod-kafka-1")
    # A 5-minute operation timeout: its agent is asked at once, not after it, so the recovery
    # shows (and is waited for) from the first poll.
    quick = ("--operation-timeout", "5m")
    with (
        HttpsPeer(agents, pki) as peer,
        cluster.using(agent_url=peer.url + AGENTS).start(*quick) as roll,
    ):
        try:
            roll.until_event("wait-recovery")
            assert cluster.restarted() == []  # nothing restarted while it recovers
        finally:
            agents.finish()
            done = roll.wait(120)
    assert done.returncode == 0, done.stderr
    waits = done.of("wait-recovery")
    assert waits and {e["node"] for e in waits} == {"prod-kafka-1"}
    # Out of the ISRs while recovering, it held the others back (availability, quorum); then
    # rolled like them: one deletion each, none while it recovered.
    assert sorted(cluster.restarted()) == PODS
    first_restart = done.actions().index("restart")
    last_wait = max(i for i, a in enumerate(done.actions()) if a == "wait-recovery")
    assert last_wait < first_restart


def test_a_role_losing_delete_during_the_roll_fails_it_in_one_line_with_the_journal_failed(
    cluster: PodRoll[ControlPlane], pki: Pki
) -> None:
    """The preflight passed (the Role had every verb); an administrator takes `delete` on
    pods away while the roller waits for a recovery: its first deletion is refused (403), a
    verb never allowed in this roll, so no authorizer catching up: the roll fails at once."""
    agents = RecoveringAgents(cluster, "prod-kafka-1")
    with HttpsPeer(agents, pki) as peer, cluster.using(agent_url=peer.url + AGENTS).start() as roll:
        try:
            roll.until_event("wait-recovery")
            revoke(cluster, "delete", "pods")
        finally:
            agents.finish()
            done = roll.wait(120)
    err = done.stderr
    assert done.returncode == 1, err
    assert "Traceback" not in err
    refused = re.search(r"delete pod (prod-kafka-\d): 403 Forbidden", err)
    assert refused, err
    assert "cannot delete resource" in err
    journal = done.journal
    assert journal is not None
    assert journal["state"] == "failed" and "403 Forbidden" in journal["reason"]
    assert journal["nodes"][refused.group(1)]["phase"] == "failed"
    assert cluster.restarted() == []


def revoke(cluster: PodRoll[ControlPlane], verb: str, resource: str) -> None:
    """Take `verb` on `resource` out of the roller's Role, once RBAC refuses it."""
    client = cluster.kube.client()
    role = client.get(Role, "rollguard-roller", namespace=cluster.namespace)
    for rule in role.rules or []:
        if resource in (rule.resources or []):
            rule.verbs = [v for v in rule.verbs if v != verb]
    client.replace(role)
    wait_until(
        lambda: not may(cluster.kubeconfig, cluster.namespace, verb, resource),
        30,
        what=f"RBAC to refuse {verb} {resource}",
    )


def test_a_lease_taken_over_during_a_recovery_wait_stops_the_roll_and_the_journal_says_why(
    cluster: PodRoll[ControlPlane], pki: Pki
) -> None:
    """The first pod the roll deletes comes back in log recovery; while the roller waits for
    it, another holder takes the Lease (a write of its own on the API server): the roller's
    next renewal is refused (409, the Lease changed) and it reads who holds it."""
    agents = RecoveringAfterItsRestart(cluster.bridge)
    with HttpsPeer(agents, pki) as peer, cluster.using(agent_url=peer.url + AGENTS).start() as roll:
        roll.until_event("wait-recovery")
        take_lease(cluster, "other-roller:7", "r9")
        done = roll.wait(60)
    err = done.stderr
    assert done.returncode == 1, err
    assert "Traceback" not in err
    assert "lost the roll lease, stopping" in err
    assert "held by other-roller:7 (roll r9)" in err
    assert len(cluster.restarted()) == 1  # nothing more was done under a lease that is not ours
    journal = done.journal
    assert journal is not None
    assert journal["state"] == "failed" and "lost the roll lease" in journal["reason"]
    first = cluster.restarted()[0]
    assert journal["nodes"][first]["how"] == "restart"  # on record: --resume waits for it
    assert journal["nodes"][first]["phase"] not in ("done", "failed")
    lease = cluster.lease()
    assert lease.spec is not None and lease.spec.holderIdentity == "other-roller:7"


def take_lease(cluster: PodRoll[ControlPlane], holder: str, roll_id: str) -> None:
    """Write the Lease as another holder would: read, change, replace (asked again when the
    roller renewed it in between: 409)."""

    def taken() -> bool:
        lease = cluster.lease()
        assert lease.spec is not None and lease.metadata is not None
        lease.spec.holderIdentity = holder
        lease.metadata.annotations = {"rollguard.io/roll-id": roll_id}
        try:
            cluster.kube.client().replace(lease)
        except ApiError as exc:
            if exc.status.code != 409:
                raise
            return False
        return True

    wait_until(taken, 30, interval=0.05, what="the Lease written by another holder")


class RecoveringAfterItsRestart(Recovering):
    """The first pod the roll deletes is in log recovery from then on."""

    def __init__(self, bridge: PodBridge) -> None:
        super().__init__(100_000)
        self.bridge = bridge

    def recovering(self, pod: str) -> bool:
        return bool(self.bridge.deletions) and pod == self.bridge.deletions[0].pod


def test_a_roll_paused_on_its_lease_restarts_nothing_until_resumed(
    cluster: PodRoll[ControlPlane], pki: Pki
) -> None:
    """`rollguard roll pause` writes the pause on the Lease (the roller's own Role may update
    leases); the roller reads it before its next restart and starts none until `resume`."""
    assert cluster.bridge is not None
    agents = RecoveringAfterItsRestart(cluster.bridge)  # until `done`: the pause comes then
    with HttpsPeer(agents, pki) as peer, cluster.using(agent_url=peer.url + AGENTS).start() as roll:
        roll.until_event("wait-recovery")  # the first restarted pod, recovering
        paused = cluster.pause()
        assert paused.returncode == 0, paused.stderr
        assert "roll k1: paused (by " in paused.stdout
        annotations = cluster.lease().metadata.annotations or {}  # type: ignore[union-attr]
        assert annotations["rollguard.io/paused"].startswith("by ")
        agents.done.set()  # its recovery ends: the roll would restart the next pod now
        roll.until_event("gate-closed")
        held = len(cluster.restarted())
        renewed = lease_renewed(cluster)
        wait_until(lambda: lease_renewed(cluster) != renewed, 30, what="a lease renewal")
        assert roll.poll() is None and len(cluster.restarted()) == held
        resumed = cluster.resume()
        assert resumed.returncode == 0, resumed.stderr
        done = roll.wait(120)
    assert done.returncode == 0, done.stderr
    assert sorted(cluster.restarted()) == PODS
    assert held == 1  # the pause came between the first restart and the second
    annotations = cluster.lease().metadata.annotations or {}  # type: ignore[union-attr]
    assert "rollguard.io/paused" not in annotations


def lease_renewed(cluster: PodRoll[ControlPlane]) -> object:
    spec = cluster.lease().spec
    return spec.renewTime if spec is not None else None


def test_agent_urls_that_resolve_nowhere_stop_the_roll_before_any_restart(
    cluster: PodRoll[ControlPlane],
) -> None:
    # `plan --help`'s own example: no --agent-url, no --service. The headless service comes
    # from the pods' spec.subdomain (the StatefulSet's serviceName, set by its controller);
    # these names exist in no DNS here, so nothing may start.
    done = cluster.using(agent_url=None).roll()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for pod in PODS:
        url = f"https://{pod}.{STS}.{cluster.namespace}.svc:8443"
        assert f"{pod} ({url}): its host" in done.stderr
    assert "does not resolve" in done.stderr and "--on-agent-unreachable force" in done.stderr
    assert cluster.restarted() == []


def test_a_service_template_without_a_service_to_fill_it_is_a_usage_error() -> None:
    from lightkube.models.core_v1 import PodSpec
    from lightkube.models.meta_v1 import ObjectMeta

    from rollguard.roller.kubernetes import KubernetesPlatform, KubernetesSettings
    from rollguard.shared.errors import ConfigError

    ns = "kafka"
    pod = Pod(metadata=ObjectMeta(name="prod-kafka-0"), spec=PodSpec(containers=[]))
    platform = KubernetesPlatform(None, KubernetesSettings(ns, SELECTOR))  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        platform._node(pod)
    assert "needs {service}" in str(caught.value) and "--service NAME" in str(caught.value)
    named = KubernetesPlatform(None, KubernetesSettings(ns, SELECTOR, service="brokers"))  # type: ignore[arg-type]
    assert named._node(pod).agent_url == "https://prod-kafka-0.brokers.kafka.svc:8443"
    pod.spec.subdomain = "prod-kafka-brokers"  # type: ignore[union-attr]
    assert platform._node(pod).agent_url == (
        "https://prod-kafka-0.prod-kafka-brokers.kafka.svc:8443"
    )
