"""Each pod's desired server.properties read from the ConfigMap a real StatefulSet's template
mounts (`rollguard.roller.roll.configs.kubernetes`, `rollguard plan --compare-config`), on the real
API server, with the credentials of the roller's documented Role.

A StatefulSet `prod-kafka` of 3 pods mounts ConfigMap `kafka-config-v1` at /opt/kafka/config;
its template is then changed to mount `kafka-config-v2` (OnDelete: the pods keep v1 until they
are restarted). What a real Kafka does with the comparison is
tests/real/test_real_kafka_configs.py (inventory files on a real cluster); here, that the
desired properties per pod are the ones a restarted pod will read, that what cannot be read
stops `plan` with exit 2 before Kafka is asked, and a whole plan whose Kafka is the
Kafka-protocol peer (its DescribeConfigs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.models.core_v1 import ConfigMapVolumeSource, Volume, VolumeMount
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.resources.rbac_authorization_v1 import Role

from rollguard.peers.harness import kafka_peer
from rollguard.peers.harness_pods import AGENTS, PodRoll, roller_account
from rollguard.peers.realkube import ControlPlane
from rollguard.roller.model import Node
from rollguard.roller.model import Role as NodeRole
from rollguard.roller.roll.configs.kubernetes import PodConfig, read_pod_configs

from helpers import HttpsPeer, Pki, running_agent, wait_until

pytestmark = pytest.mark.kube

STS = "prod-kafka"
PODS = [f"{STS}-{i}" for i in range(3)]
SECRET = "s3cret-in-the-configmap"
V1 = f"""# the brokers' file, filled in by the start script
node.id=${{POD_ORDINAL}}
process.roles=broker,controller
num.io.threads=4
ssl.keystore.password={SECRET}
"""
V2 = V1.replace("num.io.threads=4", "num.io.threads=8\nlog.retention.hours=72")


def config_volume(configmap: str) -> tuple[list[Volume], list[VolumeMount]]:
    volume = Volume(name="config", configMap=ConfigMapVolumeSource(name=configmap))
    return [volume], [VolumeMount(name="config", mountPath="/opt/kafka/config")]


def put_configmap(kube: ControlPlane, namespace: str, name: str, text: str) -> None:
    meta = ObjectMeta(name=name, namespace=namespace)
    found = ConfigMap(metadata=meta, data={"server.properties": text})
    kube.client().apply(found, force=True)


def apply(kube: ControlPlane, namespace: str, configmap: str) -> None:
    volumes, mounts = config_volume(configmap)
    kube.apply_statefulset(namespace, STS, 3, volumes=volumes, mounts=mounts)


def nodes() -> list[Node]:
    return [Node(i, pod, frozenset({NodeRole.BROKER}), "https://x") for i, pod in enumerate(PODS)]


def read(kubeconfig: Path, namespace: str, **kwargs: object) -> dict[str, PodConfig]:
    async def reading() -> dict[str, PodConfig]:
        client = AsyncClient(KubeConfig.from_file(kubeconfig), namespace=namespace)
        try:
            return await read_pod_configs(client, namespace, nodes(), **kwargs)  # type: ignore[arg-type]
        finally:
            await client.close()

    return asyncio.run(reading())


class Nowhere:
    """A Kafka that answers nothing (127.0.0.1:1): what is refused then is refused before
    Kafka is asked."""

    bootstrap = "127.0.0.1:1"


def planned(
    kube: ControlPlane, namespace: str, kubeconfig: Path, folder: Path, pki: Pki
) -> PodRoll[ControlPlane]:
    """`rollguard plan --compare-config` of the StatefulSet's pods with `kubeconfig`, its Kafka
    and agents answering nothing (until a test gives others)."""
    return PodRoll(Nowhere(), namespace, kubeconfig, folder, pki, kube, selector=f"app={STS}",
                   agent_url="https://127.0.0.1:1" + AGENTS, timings=())  # fmt: skip


def test_the_desired_properties_are_the_configmap_the_statefulsets_template_mounts(
    kube: ControlPlane, kube_namespace: str, pki: Pki, tmp_path: Path
) -> None:
    namespace = kube_namespace
    put_configmap(kube, namespace, "kafka-config-v1", V1)
    put_configmap(kube, namespace, "kafka-config-v2", V2)
    apply(kube, namespace, "kafka-config-v1")
    kube.wait_pods_ready(namespace, STS, 3)
    kubeconfig = roller_account(kube, namespace, can=("get", "configmaps", ""))

    first = read(kubeconfig, namespace)
    for pod in PODS:
        found = first[pod]
        assert found.configmap == "kafka-config-v1" and found.key == "server.properties"
        values = {p.key: p.value for p in found.properties}
        assert values["num.io.threads"] == "4" and values["ssl.keystore.password"] == SECRET
        assert [p.line for p in found.properties] == [2, 3, 4, 5]  # the comment is line 1
        # the ordinal's placeholder, and a template's ids: set at each pod's start
        assert found.unchecked == {"node.id", "broker.id"}

    # The template now mounts v2; OnDelete: the running pods still mount v1.
    apply(kube, namespace, "kafka-config-v2")
    client = kube.client()

    def new_revision() -> bool:
        status = client.get(StatefulSet, STS, namespace=namespace).status
        return status is not None and status.currentRevision != status.updateRevision

    wait_until(new_revision, 30, what="the StatefulSet's new revision")
    for pod in PODS:
        spec = client.get(Pod, pod, namespace=namespace).spec
        assert spec is not None and spec.volumes is not None
        assert spec.volumes[0].configMap is not None
        assert spec.volumes[0].configMap.name == "kafka-config-v1"
    second = read(kubeconfig, namespace, set_at_start=["process.roles"])
    for pod in PODS:
        found = second[pod]
        assert found.configmap == "kafka-config-v2"  # what a restarted pod will read
        values = {p.key: p.value for p in found.properties}
        assert values["num.io.threads"] == "8" and values["log.retention.hours"] == "72"
        assert found.unchecked == {"node.id", "broker.id", "process.roles"}

    # plan: a malformed line of the desired ConfigMap is exit 2, naming pod, ConfigMap, key
    # and line, never a value, before Kafka is asked
    put_configmap(kube, namespace, "kafka-config-v2", V2 + "listeners=\\u00zz\n")
    pods = planned(kube, namespace, kubeconfig, tmp_path, pki)
    done = pods.plan("--compare-config")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "rollguard: pod prod-kafka-0: ConfigMap kafka-config-v2 key server.properties, line 7: "
        "malformed \\uxxxx escape in the value of listeners"
    )
    assert SECRET not in done.stderr + done.stdout and "Traceback" not in done.stderr
    # a file the template does not mount: the pod and what it mounts are named
    done = pods.plan("--compare-config", "--config-key", "/etc/kafka/server.properties")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "rollguard: pod prod-kafka-0 (StatefulSet prod-kafka's template): no ConfigMap volume "
        "it mounts holds /etc/kafka/server.properties (its ConfigMap volumes: config "
        "(kafka-config-v2)); name the key or the file's path in the container with --config-key"
    )


def test_plan_compare_config_without_get_configmaps_is_exit_2_naming_it(
    kube: ControlPlane, kube_namespace: str, pki: Pki, tmp_path: Path
) -> None:
    namespace = kube_namespace
    reads = Role(
        metadata=ObjectMeta(name="reads-pods-only", namespace=namespace),
        rules=[
            PolicyRule(apiGroups=[""], resources=["pods"], verbs=["get", "list"]),
            PolicyRule(apiGroups=["apps"], resources=["statefulsets"], verbs=["get"]),
        ],
    )
    kubeconfig = kube.role_account(namespace, reads, "pods-only", can=("list", "pods", ""))
    done = planned(kube, namespace, kubeconfig, tmp_path, pki).plan("--compare-config")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "rollguard: the roller's Kubernetes credentials may not: get configmaps (namespace "
        f"{namespace}; the roller's Role is deploy/kubernetes/roller/role.yaml)"
    )


def test_plan_compares_each_pods_configmap_with_what_kafka_says_it_runs(
    kube: ControlPlane, kube_namespace: str, pki: Pki, tmp_path: Path
) -> None:
    """The whole plan, its Kafka the Kafka-protocol peer (brokers 0-2, the pods' ordinals; its
    DescribeConfigs lists a few keys, `controller.quorum.fetch.timeout.ms` read-only): each pod's
    changes from the template's ConfigMap, the placeholder and the template's ids not compared,
    no value of the file in the output."""
    namespace = kube_namespace
    desired = (
        "node.id=${POD_ORDINAL}\n"
        "controller.quorum.fetch.timeout.ms=5000\n"  # read-only here: a restart
        "transaction.state.log.min.isr=2\n"  # as it runs: no change
        f"ssl.keystore.password={SECRET}\n"  # the broker does not list it: not shown
    )
    put_configmap(kube, namespace, "kafka-config", desired)
    apply(kube, namespace, "kafka-config")
    kube.wait_pods_ready(namespace, STS, 3)
    kubeconfig = roller_account(kube, namespace, can=("get", "configmaps", ""))
    configs = {"transaction.state.log.min.isr": "2"}
    with kafka_peer(broker_configs=configs) as kafka, HttpsPeer(running_agent, pki) as agents:
        pods = planned(kube, namespace, kubeconfig, tmp_path, pki)
        pods = pods.using(kafka=kafka, agent_url=agents.url + AGENTS)
        done = pods.plan("--compare-config", "--output", "json", "--all")
        text = pods.plan("--compare-config", "--all")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr + text.stdout + text.stderr
    lines = {e["node"]: e for e in done.entries()}
    assert sorted(lines) == PODS
    for pod in PODS:
        config = lines[pod]["config"]
        assert config["note"] is None and config["notCompared"] == ["broker.id", "node.id"]
        changed = {c["key"]: (c["from"], c["to"], c["how"]) for c in config["changes"]}
        assert changed["controller.quorum.fetch.timeout.ms"] == ("2000", "5000", "restart")
        assert changed["ssl.keystore.password"][2] == "restart"
        assert set(changed) == {"controller.quorum.fetch.timeout.ms", "ssl.keystore.password"}
    assert text.returncode == 0, text.stderr
    assert (
        "prod-kafka-1: 2 keys change: 2 restart; not compared (set at the pod's start): "
        "broker.id, node.id"
    ) in text.stdout.splitlines()
    said = "plan: desired configuration from ConfigMap kafka-config key server.properties (3 pods)"
    assert said in text.stderr
