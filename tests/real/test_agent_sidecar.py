"""The recipe for putting the agent beside the brokers of a StatefulSet you did not write
(deploy/agent-sidecar: a kustomize component, and the strategic-merge patch it applies), on a
real API server: a StatefulSet as a common Kafka chart renders it (Bitnami's shape: a `kafka`
container with its own env, probes and ports, a `data` volumeClaimTemplate, RollingUpdate)
patched as `kubectl patch --type strategic --patch-file` does (the recipe's patch, named after
the StatefulSet): the merge kustomize makes of the component's patch, containers, env and
volumes merged by name. Nothing of the chart's is lost; the agent runs with flags its own
parser accepts, JMX on loopback on both sides; the StatefulSet is OnDelete: the chart's pods
stay out of date until deleted, and one deleted (a roll's restart) is made again with both
containers.
"""

from __future__ import annotations

from typing import Any

import yaml
from lightkube import codecs
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from rollguard.agent import config as agent_config
from rollguard.peers.processes import ROOT, wait_until
from rollguard.peers.realkube import ControlPlane
from rollguard.roller.controller.names import OPT_IN
from rollguard.shared.cli import Parser

RECIPE = ROOT / "deploy" / "agent-sidecar"

CHART_STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: kafka
  labels: {app.kubernetes.io/name: kafka, rollguard.io/roll: "true"}
spec:
  serviceName: kafka-headless
  replicas: 2
  podManagementPolicy: Parallel
  updateStrategy: {type: RollingUpdate}
  selector:
    matchLabels: {app.kubernetes.io/name: kafka}
  template:
    metadata:
      labels: {app.kubernetes.io/name: kafka}
    spec:
      containers:
        - name: kafka
          image: docker.io/bitnami/kafka:4.0.0-debian-12-r3
          env:
            - {name: KAFKA_CFG_PROCESS_ROLES, value: "controller,broker"}
            - {name: KAFKA_HEAP_OPTS, value: "-Xmx1024m -Xms1024m"}
          ports:
            - {name: client, containerPort: 9092}
          readinessProbe:
            tcpSocket: {port: client}
          volumeMounts:
            - {name: data, mountPath: /bitnami/kafka}
            - {name: kafka-config, mountPath: /opt/bitnami/kafka/config/server.properties,
               subPath: server.properties}
      volumes:
        - name: kafka-config
          configMap: {name: kafka-configuration}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 8Gi}}
"""


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def check_patched(spec: dict[str, Any]) -> None:
    """What the recipe promises of a patched StatefulSet's spec (the API's or kustomize's)."""
    assert spec["updateStrategy"]["type"] == "OnDelete"
    pod = spec["template"]["spec"]
    containers = by_name(pod["containers"])
    assert list(containers) == ["kafka", "rollguard-agent"]
    kafka = containers["kafka"]
    env = {e["name"]: e.get("value") for e in kafka["env"]}
    # The chart's own env, probe, mounts: all there, JMX added.
    assert env["KAFKA_CFG_PROCESS_ROLES"] == "controller,broker" and "KAFKA_HEAP_OPTS" in env
    assert "-Dcom.sun.management.jmxremote.host=127.0.0.1" in env["KAFKA_JMX_OPTS"]
    assert "-Dcom.sun.management.jmxremote.port=9999" in env["KAFKA_JMX_OPTS"]
    assert kafka["readinessProbe"]["tcpSocket"]["port"] == "client"
    assert [m["name"] for m in kafka["volumeMounts"]] == ["data", "kafka-config"]
    assert set(by_name(pod["volumes"])) == {
        "kafka-config",
        "rollguard-agent-tls",
        "rollguard-client-ca",
    }
    agent = containers["rollguard-agent"]
    parser = agent_config.build_parser(Parser(prog="rollguard-agent"))
    settings = agent_config.load(
        parser.parse_args(agent["args"]), {"ROLLGUARD_AGENT_NODE_ID": "kafka-0"}
    )
    assert settings.jmx_url == "service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi"
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    assert ports["rollguard"] == settings.listen.port == 8443
    probe = agent["readinessProbe"]["httpGet"]
    assert probe["path"] == "/v1/ready" and ports[probe["port"]] == settings.probe_listen.port
    claims = {c["metadata"]["name"] for c in spec["volumeClaimTemplates"]}
    mounted = {m["name"] for m in agent["volumeMounts"]}
    assert mounted <= claims | set(by_name(pod["volumes"])), mounted  # every mount has a volume


def test_the_component_patches_the_statefulsets_the_controller_watches() -> None:
    component = yaml.safe_load((RECIPE / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    (patch,) = component["patches"]
    assert (RECIPE / patch["path"]).is_file()
    assert patch["target"]["kind"] == "StatefulSet"
    assert patch["target"]["labelSelector"] == f"{OPT_IN}=true"


def test_a_chart_s_statefulset_patched_on_a_real_api_server_keeps_its_own_and_runs_the_agent(
    kube: ControlPlane, kube_namespace: str
) -> None:
    client = kube.client()
    sts = codecs.load_all_yaml(CHART_STATEFULSET)[0]
    sts.metadata.namespace = kube_namespace  # type: ignore[union-attr]
    client.create(sts)
    labels = {"app.kubernetes.io/name": "kafka"}

    def pods() -> dict[str, Pod]:
        return {
            str(p.metadata.name): p
            for p in client.list(Pod, namespace=kube_namespace, labels=labels)
        }

    wait_until(lambda: len(pods()) == 2, 60, what="the chart's two pods")
    patch = yaml.safe_load((RECIPE / "sidecar.yaml").read_text())
    patch["metadata"]["name"] = "kafka"  # as the recipe says for `kubectl patch` (kustomize's
    # target picks the StatefulSets whatever the name)
    client.patch(
        StatefulSet, "kafka", patch, namespace=kube_namespace, patch_type=PatchType.STRATEGIC
    )
    found = client.get(StatefulSet, "kafka", namespace=kube_namespace)
    check_patched(found.to_dict()["spec"])

    def revision() -> str | None:
        status = client.get(StatefulSet, "kafka", namespace=kube_namespace).status
        return status.updateRevision if status and status.observedGeneration == 2 else None

    update = wait_until(revision, 60, what="the patched template's revision")
    # OnDelete: the pods the chart made stay as they are, out of date: what the controller rolls.
    before = pods()
    assert all(
        (p.metadata.labels or {}).get("controller-revision-hash") != update for p in before.values()
    )  # type: ignore[union-attr]
    client.delete(Pod, "kafka-0", namespace=kube_namespace)  # as a roll's restart

    def made() -> Pod | None:  # pending (its claim unbound here), made from the new template
        pod = pods().get("kafka-0")
        if pod is None or pod.metadata.uid == before["kafka-0"].metadata.uid:  # type: ignore[union-attr]
            return None
        return pod

    again = wait_until(made, 60, what="kafka-0 made again, from the patched template")
    assert [c.name for c in again.spec.containers] == ["kafka", "rollguard-agent"]  # type: ignore[union-attr]
    assert (again.metadata.labels or {}).get("controller-revision-hash") == update  # type: ignore[union-attr]
