"""`rollguard controller` rolling a real Kafka cluster whose nodes are the pods of two StatefulSets
on a real Kubernetes API server: what a person sees happen when they `helm upgrade` their Kafka.

The stack (`stack`, once for the file): the shared control plane, the controller's chart
installed with `helm install`, a real KRaft cluster of 3 brokers and 3 controllers formatted at
the oldest Kafka, `PodBridge` tying the pods of `prod-broker` (pods 0-2) and `prod-controller`
(pods 3-5) to them as a kubelet would (tests/real/test_kube_roll.py says how), the brokers'
server.properties in a ConfigMap their template mounts (every value the brokers share, the
others placeholders), and two controller replicas run as the chart's ServiceAccount. The two
StatefulSets opt in as one cluster (`rollguard.io/cluster: prod`), with the settings a person
puts on them: the bootstrap, the agents' URL, a 40 s operation timeout.

In order: the cluster's first look (nothing to change: nothing restarted); a ConfigMap change
of a key Kafka takes live (no pod deleted, the value in force on every broker by Kafka's own
describe); then the template's image moved to the newest Kafka, the change a `helm upgrade`
makes, and what happens during that roll: a hold annotation set after the first deletion (no
further deletion until it is removed), the acting replica killed with SIGKILL just after the
third deletion and started again (another process resumes the roll from its journal), broker 0's
restart into a log recovery held longer than the operation timeout. Judged by observers that
are not the product: the API server's audit log (who asked each pod to go), the pods' UIDs and
the bridge's record of each deletion (every node's phase by its own log at that moment), an ISR
and quorum sampler, an acks=all canary, Kafka's own describe and each node's log.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import ConfigMapVolumeSource, Volume, VolumeMount
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from rollguard.peers import realkafka
from rollguard.peers.processes import BIN, free_port, startup_slot, wait_until
from rollguard.peers.realclients import Canary, IsrSampler
from rollguard.peers.realcluster import not_back, seed
from rollguard.peers.realkafka import (
    NEWEST,
    OLDEST,
    KafkaCluster,
    described,
    kafka_configs,
    kafka_lib,
)
from rollguard.peers.realkube import READY_ANNOTATION, ControlPlane, pod_ready
from rollguard.peers.realkube_binaries import KubeBinariesMissing, find_helm
from rollguard.peers.realkube_bridge import BRIDGED, CONTAINERS, PodBridge
from rollguard.peers.realkube_controller import (
    Controller,
    Helm,
    describe,
    events,
    holder,
    pod_deletions,
    status,
    wait_for_event,
)
from rollguard.peers.realkube_kafka import KafkaPods
from rollguard.peers.realkube_objects import may
from rollguard.shared.javaprops import parse_properties

from helpers import Pki, missing_tier
from real_kafka import kafka_build_logged

pytestmark = [pytest.mark.kube, pytest.mark.timeout(1200)]

SYSTEM, NS, RELEASE = "ctl-r-system", "ctl-r-kafka", "rollguard"
ACCOUNT = f"system:serviceaccount:{SYSTEM}:{RELEASE}"  # the chart's, the replicas' identity
BROKERS, CONTROLLERS = "prod-broker", "prod-controller"
PODS = [f"{BROKERS}-{i}" for i in range(3)] + [f"{CONTROLLERS}-{i}" for i in range(3, 6)]
CONFIGMAP = "prod-broker-config"
IMAGES = {version: f"rollguard.test/kafka:{version}" for version in (OLDEST, NEWEST)}
OPERATION_TIMEOUT = 40.0
RECOVERY_HOLD = 55.0  # broker 0's recovery: longer than the operation timeout, whatever else
HOLD_WINDOW = 10.0  # seconds the test watches for a deletion while the roll is held
LEASE_S = "15s"
# Per broker. Broker 0's recovery, its threads held to 0.3 % of a core, took 36 s of 30 MB at 0.4 %
# on a quiet machine: 40 MB at 0.3 % lasts well past the operation timeout, longer under load.
DATA_MB = 40


@dataclass
class Stack:
    kube: ControlPlane
    kafka: KafkaCluster
    pods: KafkaPods
    bridge: PodBridge
    folder: Path
    replicas: dict[str, Controller]
    outcome: dict[str, Any] = field(default_factory=dict)

    def apply(self, *, generation: str, image: str) -> None:
        """Both StatefulSets: their template carries `generation` and `image` (its tag the
        Kafka a pod runs); the brokers' mounts the ConfigMap of their server.properties."""
        annotations = {
            READY_ANNOTATION: "false",
            CONTAINERS: "running",
            "example.com/generation": generation,
        }
        common = {"strimzi.io/cluster": "prod", BRIDGED: "true"}
        volume = Volume(name="config", configMap=ConfigMapVolumeSource(name=CONFIGMAP))
        self.kube.apply_statefulset(
            NS, BROKERS, 3, image=image, pod_annotations=annotations,
            pod_labels={**common, "strimzi.io/broker-role": "true"},
            volumes=[volume], mounts=[VolumeMount(name="config", mountPath="/opt/kafka/config")],
        )  # fmt: skip
        self.kube.apply_statefulset(
            NS, CONTROLLERS, 3, image=image, pod_annotations=annotations,
            pod_labels={**common, "strimzi.io/controller-role": "true"}, first_ordinal=3,
        )  # fmt: skip

    def ready(self) -> bool:
        found = list(self.kube.client().list(Pod, namespace=NS, labels={BRIDGED: "true"}))
        names = sorted(str(p.metadata.name) for p in found if p.metadata)
        return names == sorted(PODS) and all(pod_ready(p) for p in found)

    def uids(self) -> dict[str, str]:
        found = self.kube.client().list(Pod, namespace=NS, labels={BRIDGED: "true"})
        return {str(p.metadata.name): str(p.metadata.uid) for p in found if p.metadata}

    def annotate(self, name: str, annotations: dict[str, str | None]) -> None:
        patch = {"metadata": {"annotations": annotations}}
        self.kube.client().patch(StatefulSet, name, patch, namespace=NS, patch_type=PatchType.MERGE)

    def leader(self) -> Controller:
        now = holder(self.kube.client(), SYSTEM, RELEASE)
        return next(c for c in self.replicas.values() if c.running() and c.identity() == now)

    def said(self, reason: str, *, since: datetime, name: str = BROKERS) -> list[str]:
        return [
            e.message
            for e in events(self.kube.client(), NS, name)
            if e.reason == reason and e.at >= since
        ]


def desired_properties(kafka: KafkaCluster) -> str:
    """The brokers' server.properties as one ConfigMap holds it for all: each value they share,
    a placeholder (not compared: a start script's) for each they do not (node.id, listeners,
    log.dirs)."""
    files = [
        dict((p.key, p.value) for p in parse_properties(n.config_file.read_text()))
        for n in kafka.brokers
    ]
    keys = list(dict.fromkeys(k for f in files for k in f))
    lines = []
    for key in keys:
        values = {f.get(key) for f in files}
        value = values.pop() if len(values) == 1 else None
        lines.append(
            f"{key}={value}" if value is not None else f"{key}=${{{key.upper().replace('.', '_')}}}"
        )
    return "".join(f"{line}\n" for line in lines)


@pytest.fixture(scope="module", autouse=True)
def held_until_released() -> Iterator[None]:
    """Held recoveries at 0.3 % of a core (tests/real/test_kube_roll.py says why, at 0.4 %)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(realkafka, "HOLD_CPU", 0.003)
        yield


@pytest.fixture(scope="module")
def stack(
    kube: ControlPlane, pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    try:
        helm = Helm(find_helm(), tmp_path_factory.mktemp("helm"), kube.admin_kubeconfig)
    except KubeBinariesMissing as missing:
        missing_tier(str(missing))
    folder = tmp_path_factory.mktemp("controller-roll")
    for namespace in (SYSTEM, NS):
        kube.create_namespace(namespace)
    installed = helm.install(
        RELEASE, SYSTEM, {"watchNamespaces": [NS], "leaderLeaseDuration": LEASE_S}
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    account = kube.service_account_kubeconfig(SYSTEM, RELEASE)
    wait_until(lambda: may(account, NS, "delete", "pods"), 30, what="the chart's RBAC")
    kafka = KafkaCluster(folder / "kafka", brokers=3, controllers=3, version=OLDEST,
                         extra={"log.cleaner.threads": "2"})  # fmt: skip
    pods: KafkaPods | None = None
    replicas: dict[str, Controller] = {}
    try:
        kafka.start()
        seed(kafka, DATA_MB)
        port = free_port()
        pods = KafkaPods(kafka, pki, pki.ca.parent / "ca.key", folder / "pods", port=port,
                         namespace=NS, services=[BROKERS, CONTROLLERS])  # fmt: skip
        text = desired_properties(kafka)
        # A chart's, as Helm labels it (rollguard's own journals are the ones not followed).
        meta = ObjectMeta(
            name=CONFIGMAP, namespace=NS, labels={"app.kubernetes.io/managed-by": "Helm"}
        )
        kube.client().create(ConfigMap(metadata=meta, data={"server.properties": text}))
        (folder / "bridge").mkdir()
        with PodBridge(kube.client(), NS, pods, folder / "bridge") as bridge:
            stack = Stack(kube, kafka, pods, bridge, folder, replicas)
            with startup_slot(f"the 6 pods in {folder}", processes=12):
                stack.apply(generation="1", image=IMAGES[OLDEST])
                bridge.wait(stack.ready, 300, "the 6 pods Ready, each with its agent")
            for name in ("a", "b"):
                args = [
                    str(BIN / "rollguard"), "controller", "--watch-namespace", NS,
                    "--leader-namespace", SYSTEM, "--leader-lease", RELEASE,
                    "--leader-lease-duration", LEASE_S, *pki.client_flags(),
                    "--state-dir", str(folder / "state"),
                ]  # fmt: skip
                env = {"KUBECONFIG": str(account), "PATH": "/usr/bin:/bin", **bridge.dns_env()}
                replicas[name] = Controller(name, args, env, folder).start()
                wait_until(lambda: holder(kube.client(), SYSTEM, RELEASE), 60, what="a leader")
            agent_url = f"https://{{pod}}.{{service}}.{{namespace}}.svc:{port}"
            for name in (BROKERS, CONTROLLERS):
                patch = {"metadata": {
                    "labels": {"rollguard.io/roll": "true", "rollguard.io/cluster": "prod"},
                    "annotations": {
                        "rollguard.io/bootstrap": kafka.bootstrap,
                        "rollguard.io/agent-url": agent_url,
                        "rollguard.io/operation-timeout": f"{OPERATION_TIMEOUT:g}s",
                    },
                }}  # fmt: skip
                kube.client().patch(
                    StatefulSet, name, patch, namespace=NS, patch_type=PatchType.MERGE
                )
            yield stack
    finally:
        for controller in replicas.values():
            controller.stop()
            print(f"--- replica {controller.name}:\n{controller.log()[-6000:]}")
        if pods is not None:
            pods.stop_all()
        kafka.stop()


def completed(stack: Stack, since: datetime, timeout: float) -> str:
    """The roll's RollCompleted Event posted after `since`, waited for."""
    found = wait_for_event(stack.kube.client(), NS, BROKERS, "RollCompleted", timeout, since=since)
    return found.message


def test_a_cluster_seen_for_the_first_time_is_looked_at_and_nothing_is_restarted(
    stack: Stack,
) -> None:
    before = stack.uids()
    said = completed(stack, datetime.fromtimestamp(0, UTC), 240)
    assert said == "roll completed: 0 restarted, 6 skipped", said
    found = status(stack.kube.client(), NS, BROKERS)
    assert found["phase"] == "Completed" and found["rolled"]
    assert status(stack.kube.client(), NS, CONTROLLERS) == found  # one cluster, one status
    assert stack.bridge.deletions == [] and stack.uids() == before
    assert pod_deletions(stack.kube.folder, NS) == []  # by the API server's audit log


def test_a_configmap_change_of_a_key_kafka_takes_live_deletes_no_pod_and_is_in_force(
    stack: Stack,
) -> None:
    before, since = stack.uids(), datetime.now(UTC)
    client = stack.kube.client()
    found = client.get(ConfigMap, CONFIGMAP, namespace=NS)
    text = (found.data or {})["server.properties"].replace(
        "log.cleaner.threads=2", "log.cleaner.threads=3"
    )
    client.patch(ConfigMap, CONFIGMAP, {"data": {"server.properties": text}}, namespace=NS)
    said = completed(stack, since, 240)
    assert said == "roll completed: 0 restarted, 3 skipped, 3 configured live", said
    assert stack.bridge.deletions == [] and stack.uids() == before
    assert pod_deletions(stack.kube.folder, NS) == []  # by the API server's audit log
    assert len(stack.said("Configured", since=since)) == 3
    for broker in stack.kafka.brokers:  # by Kafka's own describe, each broker
        out = kafka_configs(kafka_lib(NEWEST), "--bootstrap-server", stack.kafka.bootstrap,
                            "--entity-type", "brokers", "--entity-name", str(broker.node_id),
                            "--describe", "--all")  # fmt: skip
        assert described(out)["log.cleaner.threads"] == "3", broker.node_id


@pytest.fixture(scope="module")
def rolled(stack: Stack) -> Stack:
    """The template's image moved to the newest Kafka (a `helm upgrade`), with the hold, the
    kill and the held recovery (see the module); the observers from before the change to the
    roll's end."""
    outcome, client = stack.outcome, stack.kube.client()
    recovered = threading.Event()
    stack.pods.recover_on_next_start(0, hold=RECOVERY_HOLD, release=recovered)
    watch = contextlib.ExitStack()
    try:
        isr = watch.enter_context(IsrSampler(stack.kafka.bootstrap, {"*": 2}, quorum=True))
        canary = watch.enter_context(Canary(stack.kafka.bootstrap, "canary"))
        outcome["since"] = since = datetime.now(UTC)
        began = time.monotonic()
        stack.apply(generation="2", image=IMAGES[NEWEST])
        # The hold: set as soon as the first pod is deleted; the roll stops before its next.
        wait_until(lambda: stack.bridge.deletions, 300, interval=0.05, what="the first deletion")
        stack.annotate(BROKERS, {"rollguard.io/paused": "the test holds it"})
        held_from = len(stack.bridge.deletions)
        wait_until(lambda: status(client, NS, BROKERS).get("phase") == "Paused", 240,
                   what="the roll to say it is held")  # fmt: skip
        paused_at = time.monotonic()
        while time.monotonic() - paused_at < HOLD_WINDOW:  # watching for a deletion, not a wait
            assert len(stack.bridge.deletions) == held_from, stack.bridge.deleted()
            time.sleep(0.1)
        outcome["held"] = (held_from, len(stack.bridge.deletions), stack.said("Held", since=since))
        stack.annotate(BROKERS, {"rollguard.io/paused": None})
        # The kill: the acting replica, just after the third deletion, started again at once.
        wait_until(
            lambda: len(stack.bridge.deletions) >= 3, 300, interval=0.05, what="a third deletion"
        )
        leader = stack.leader()
        outcome["killed"] = (
            leader.name,
            leader.identity(),
            leader.kill(),
            len(stack.bridge.deletions),
        )
        leader.start()
        # Broker 0's recovery ends once the controller has said it waits for it.
        waits = lambda: stack.said("WaitingForRecovery", since=since, name=f"{BROKERS}-0")  # noqa: E731
        wait_until(waits, 600, interval=0.5, what="the controller waiting for broker 0's recovery")
        recovered.set()
        outcome["completed"] = completed(stack, since, 600)
        outcome["seconds"] = time.monotonic() - began
        watch.close()
    except BaseException:
        recovered.set()
        watch.close()
        deleted = [(d.pod, dict(d.seen.get("phases", {}))) for d in stack.bridge.deletions]
        print(f"deletions (pod, every node's phase then): {deleted}; bridge {stack.bridge.errors}")
        raise
    outcome["isr"], outcome["canary"] = isr, canary.report()
    outcome["describe"] = describe(stack.kube.admin_kubeconfig, client, NS, BROKERS)
    by, text = outcome["describe"]
    print(f"\nthe roll took {outcome['seconds']:.0f} s; `describe statefulset` by {by}:\n{text}")
    return stack


def test_the_roll_replaced_every_pod_exactly_once_onto_the_new_revision_and_kafka(
    rolled: Stack,
) -> None:
    assert rolled.outcome["completed"] == "roll completed: 6 restarted, 0 skipped"
    assert sorted(rolled.bridge.deleted()) == sorted(PODS)  # each once, by the pods' record
    # By the API server's audit log: the controller (the chart's ServiceAccount) asked each pod
    # to go exactly once in the whole file, and each was answered (the rest are kwok's removals
    # of pods that had ended, as a kubelet's).
    deletions = pod_deletions(rolled.kube.folder, NS)
    ours = [d for d in deletions if d.user == ACCOUNT]
    assert sorted(d.pod for d in ours) == sorted(PODS), ours
    assert {d.code for d in ours} == {200}, ours
    assert {d.user for d in deletions} <= {ACCOUNT, "kwok"}, deletions
    wait_until(rolled.ready, 120, what="every pod Ready after the roll")
    client = rolled.kube.client()
    for name in (BROKERS, CONTROLLERS):
        update = client.get(StatefulSet, name, namespace=NS).status.updateRevision  # type: ignore[union-attr]
        for pod in client.list(Pod, namespace=NS, labels={"app": name}):
            assert (pod.metadata.labels or {}).get("controller-revision-hash") == update  # type: ignore[union-attr]
    for node_id, node in rolled.kafka.nodes.items():
        assert kafka_build_logged(node.log_text())[0] == NEWEST, node_id
    assert status(client, NS, BROKERS)["phase"] == "Completed"


def test_no_pod_was_deleted_while_any_broker_recovered_and_the_recovery_outlasted_the_timeout(
    rolled: Stack,
) -> None:
    deletions = rolled.bridge.deletions
    for deletion in deletions:
        phases = deletion.seen.get("phases")
        assert phases and set(phases) == set(rolled.kafka.nodes), deletion
        assert not_back(rolled.pods.node(deletion.pod).spec.node_id, phases) == {}, deletion
    # Broker 0 restarted into its held recovery, which lasted longer than the operation
    # timeout by its own log, and was not the last restart: the brokers after it waited.
    node = rolled.kafka.nodes[0]
    assert node.loading_began is not None and node.loading_ended is not None
    assert node.loading_ended - node.loading_began > OPERATION_TIMEOUT
    assert any(d.at > node.loading_ended for d in deletions), [d.pod for d in deletions]


def test_controllers_went_first_the_active_one_last_of_them(rolled: Stack) -> None:
    order = [d.pod for d in rolled.bridge.deletions]
    assert set(order[:3]) == {f"{CONTROLLERS}-{i}" for i in range(3, 6)}, order
    isr = rolled.outcome["isr"]
    controllers = rolled.bridge.deletions[:3]
    leaders = [isr.leader_at(d.at) for d in controllers]
    ids = [rolled.pods.node(d.pod).spec.node_id for d in controllers]
    # No controller was restarted while it led but the last of them.
    assert [i == leader for i, leader in zip(ids, leaders, strict=True)][:2] == [False, False], (
        ids,
        leaders,
    )


def test_the_cluster_stayed_available_to_its_clients_throughout(rolled: Stack) -> None:
    isr = rolled.outcome["isr"]
    restarts = [(d.at, rolled.pods.node(d.pod).spec.node_id) for d in rolled.bridge.deletions]
    isr.assert_watched(elections=isr.elections(restarts))
    rolled.outcome["canary"].assert_no_harm()


def test_a_hold_annotation_stopped_the_roll_until_it_was_removed(rolled: Stack) -> None:
    held_from, held_to, said = rolled.outcome["held"]
    assert held_from == held_to == 1
    assert said and "rollguard.io/paused" in said[0]


def test_the_replica_killed_mid_roll_left_it_to_another_process_and_no_pod_was_deleted_twice(
    rolled: Stack,
) -> None:
    _, identity, code, at = rolled.outcome["killed"]
    assert code == -9 and at >= 3
    since = rolled.outcome["since"]
    starts = [
        e
        for e in events(rolled.kube.client(), NS, BROKERS)
        if e.reason == "RollStarted" and e.at >= since
    ]
    assert starts[0].instance == identity, starts
    resumed = [e for e in starts if "(resumed)" in e.message]
    assert resumed and all(e.instance != identity for e in resumed), starts
    assert sorted(rolled.bridge.deleted()) == sorted(PODS)
    said = rolled.outcome["describe"][1]
    for reason in (
        "RollStarted",
        "Restarting",
        "Restarted",
        "Held",
        "WaitingForRecovery",
        "RollCompleted",
    ):
        assert reason in said, reason
