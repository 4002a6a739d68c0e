"""Each pod's desired server.properties on Kubernetes (`rollguard.roller.roll.configs.kubernetes`):
which ConfigMap volume holds the file, from which spec (a StatefulSet's template, else the pod's
own), what a start script sets (not compared), and every failure a ConfigError naming the pod,
the ConfigMap, the key and the line, never a value. Lightkube's own model objects, read through
an in-process stand-in for its AsyncClient: no network."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.apps_v1 import StatefulSetSpec
from lightkube.models.core_v1 import (
    ConfigMapProjection,
    ConfigMapVolumeSource,
    Container,
    KeyToPath,
    PodSpec,
    PodTemplateSpec,
    ProjectedVolumeSource,
    Volume,
    VolumeMount,
    VolumeProjection,
)
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta, OwnerReference, Status
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod

from rollguard.roller.model import Node, Role
from rollguard.roller.roll.configs.kubernetes import (
    PodConfig,
    Source,
    placeholder_keys,
    read_pod_configs,
    sources,
)
from rollguard.shared.errors import ConfigError
from rollguard.shared.javaprops import Property

SECRET = "s3cret-in-the-configmap"
FILE = f"num.io.threads=8\nlog.dirs=/var/lib/kafka\nssl.keystore.password={SECRET}\n"


def mount(volume: str, path: str, sub: str | None = None) -> VolumeMount:
    return VolumeMount(name=volume, mountPath=path, subPath=sub)


def spec(
    *volumes: Volume,
    mounts: Sequence[VolumeMount] = (),
    init: Sequence[VolumeMount] = (),
) -> PodSpec:
    containers = [Container(name="kafka", volumeMounts=list(mounts))]
    inits = [Container(name="init", volumeMounts=list(init))] if init else None
    return PodSpec(containers=containers, initContainers=inits, volumes=list(volumes))


def cm_volume(
    name: str, configmap: str, items: Mapping[str, str] | None = None, optional: bool = False
) -> Volume:
    paths = [KeyToPath(key=k, path=p) for k, p in items.items()] if items is not None else None
    source = ConfigMapVolumeSource(name=configmap, items=paths, optional=optional or None)
    return Volume(name=name, configMap=source)


# ---- which volume holds the file (pure) ---------------------------------------------------


def test_a_bare_name_is_a_key_of_a_mounted_configmap_volume_or_an_items_file_name() -> None:
    plain = spec(cm_volume("config", "kafka-config"), mounts=[mount("config", "/etc/kafka")])
    assert sources(plain) == [Source("config", "kafka-config", "server.properties", False, False)]
    # `items` may rename the key: the file the pod sees is what counts, or the key named
    renamed = spec(
        cm_volume("config", "kafka", {"broker.conf": "server.properties"}),
        mounts=[mount("config", "/etc/kafka")],
    )
    assert sources(renamed) == [Source("config", "kafka", "broker.conf", True, False)]
    assert sources(renamed, "broker.conf") == sources(renamed)
    # a volume no container mounts is not the file Kafka reads
    unmounted = spec(cm_volume("config", "kafka-config"), mounts=[])
    assert sources(unmounted) == []
    # an items volume without the file
    other = spec(cm_volume("logs", "log4j", {"log4j2.yaml": "log4j2.yaml"}),
                 mounts=[mount("logs", "/etc/kafka/log4j")])  # fmt: skip
    assert sources(other) == []


def test_an_init_container_mount_counts_as_does_a_projected_configmap() -> None:
    # a start script in an init container copies the template and fills it in
    copied = spec(cm_volume("template", "kafka-template"), init=[mount("template", "/templates")])
    assert [s.configmap for s in sources(copied)] == ["kafka-template"]
    projected = Volume(
        name="all",
        projected=ProjectedVolumeSource(
            sources=[
                VolumeProjection(configMap=ConfigMapProjection(name="kafka-a")),
                VolumeProjection(
                    configMap=ConfigMapProjection(
                        name="kafka-b", items=[KeyToPath(key="broker", path="server.properties")]
                    )
                ),
            ]
        ),
    )
    found = sources(spec(projected, mounts=[mount("all", "/etc/kafka")]))
    assert [(s.configmap, s.key, s.mapped) for s in found] == [
        ("kafka-a", "server.properties", False),
        ("kafka-b", "broker", True),
    ]


def test_a_path_is_where_a_container_sees_the_file_on_its_folder_or_through_subpath() -> None:
    two = spec(
        cm_volume("brokers", "kafka-brokers"),
        cm_volume("tools", "kafka-tools"),
        mounts=[mount("brokers", "/opt/kafka/config"), mount("tools", "/opt/tools")],
    )
    assert [s.configmap for s in sources(two)] == ["kafka-brokers", "kafka-tools"]  # a name: both
    path = sources(two, "/opt/kafka/config/server.properties")
    assert [s.configmap for s in path] == ["kafka-brokers"]
    assert sources(two, "/opt/kafka/config/sub/server.properties") == []  # a key is no folder
    sub = spec(
        cm_volume("config", "kafka-config"),
        mounts=[mount("config", "/opt/kafka/config/server.properties", sub="broker.properties")],
    )
    assert sources(sub, "/opt/kafka/config/server.properties") == [
        Source("config", "kafka-config", "broker.properties", False, False)
    ]
    assert sources(sub, "/opt/kafka/config/other.properties") == []


def test_a_placeholder_a_start_script_fills_is_found_by_its_key_alone() -> None:
    props = [
        Property("node.id", "${NODE_ID}", 1),
        Property("advertised.listeners", "PLAINTEXT://$POD_NAME.kafka:9092", 2),
        Property("broker.rack", "{{ zone }}", 3),
        Property("ssl.keystore.password", "${file:/etc/secrets/ks.properties:password}", 4),
        Property("num.io.threads", "8", 5),
        Property("log.dirs", "/var/lib/kafka$", 6),  # a `$` alone is no placeholder
    ]
    assert placeholder_keys(props) == {
        "node.id",
        "advertised.listeners",
        "broker.rack",
        "ssl.keystore.password",
    }


# ---- reading the ConfigMaps (an in-process client) -----------------------------------------


class FakeClient:
    """lightkube's AsyncClient `get`, from objects by (kind, name); anything else 404. `gets`:
    every get asked, in order."""

    def __init__(self, *objects: Any, refuse: str | None = None) -> None:
        self.objects = {(type(o).__name__, o.metadata.name): o for o in objects}
        self.refuse = refuse
        self.gets: list[tuple[str, str]] = []

    async def get(self, kind: type[Any], name: str, *, namespace: str) -> Any:
        assert namespace == "kafka"
        self.gets.append((kind.__name__, name))
        if self.refuse == name:
            raise ApiError(status=Status(code=403, reason="Forbidden", message="no"))
        found = self.objects.get((kind.__name__, name))
        if found is None:
            raise ApiError(status=Status(code=404, reason="NotFound", message="not found"))
        return found


def node(i: int, *roles: Role, prefix: str = "kafka") -> Node:
    return Node(i, f"{prefix}-{i}", frozenset(roles or {Role.BROKER}), f"https://{prefix}-{i}")


def pod(name: str, pod_spec: PodSpec, owner: str | None = None) -> Pod:
    owners = [OwnerReference(apiVersion="apps/v1", kind="StatefulSet", name=owner, uid="u")]
    return Pod(
        metadata=ObjectMeta(name=name, ownerReferences=owners if owner else None), spec=pod_spec
    )


def statefulset(name: str, template: PodSpec) -> StatefulSet:
    return StatefulSet(
        metadata=ObjectMeta(name=name),
        spec=StatefulSetSpec(
            selector=LabelSelector(matchLabels={"app": name}),
            serviceName=name,
            template=PodTemplateSpec(spec=template),
        ),
    )


def configmap(name: str, data: Mapping[str, str] | None = None, **binary: str) -> ConfigMap:
    return ConfigMap(
        metadata=ObjectMeta(name=name),
        data=dict(data) if data is not None else None,
        binaryData={k.replace("_", "."): v for k, v in binary.items()} or None,
    )


def mounting(configmap_name: str, key: str = "server.properties") -> PodSpec:
    items = None if key == "server.properties" else {key: "server.properties"}
    return spec(cm_volume("config", configmap_name, items), mounts=[mount("config", "/etc/kafka")])


def read(client: FakeClient, nodes: Sequence[Node], **kwargs: Any) -> dict[str, PodConfig]:
    return asyncio.run(read_pod_configs(client, "kafka", nodes, **kwargs))


def test_a_statefulsets_pods_get_what_its_current_template_mounts_read_once() -> None:
    # the pods still mount v1; the template (what a restarted pod gets) mounts v2
    old, new = mounting("kafka-config-v1"), mounting("kafka-config-v2")
    client = FakeClient(
        pod("kafka-0", old, owner="kafka"),
        pod("kafka-1", old, owner="kafka"),
        statefulset("kafka", new),
        configmap("kafka-config-v1", {"server.properties": "num.io.threads=4\n"}),
        configmap("kafka-config-v2", {"server.properties": FILE + "node.id=0\n"}),
    )
    found = read(client, [node(0), node(1)])
    assert {c.configmap for c in found.values()} == {"kafka-config-v2"}
    assert [(p.key, p.line) for p in found["kafka-0"].properties][:2] == [
        ("num.io.threads", 1),
        ("log.dirs", 2),
    ]
    # a template is every replica's: the ids in it are set at each pod's start
    assert found["kafka-0"].unchecked == {"node.id", "broker.id"}
    # each object read once, however many pods share it
    assert sorted(client.gets) == [
        ("ConfigMap", "kafka-config-v2"),
        ("Pod", "kafka-0"),
        ("Pod", "kafka-1"),
        ("StatefulSet", "kafka"),
    ]


def test_per_pod_configmaps_are_compared_whole_and_a_shared_one_leaves_ids_to_the_start() -> None:
    # StrimziPodSet-style: each pod (no StatefulSet) its own ConfigMap, its own id in it
    client = FakeClient(
        pod("kafka-0", mounting("kafka-0", key="server.config")),
        pod("kafka-1", mounting("kafka-1", key="server.config")),
        configmap("kafka-0", {"server.config": "node.id=0\nnum.io.threads=8\n"}),
        configmap("kafka-1", {"server.config": "node.id=1\nnum.io.threads=8\n"}),
    )
    found = read(client, [node(0), node(1)], file="server.config")
    assert found["kafka-1"].properties[0] == Property("node.id", "1", 1)
    assert found["kafka-1"].unchecked == frozenset()
    # two bare pods mounting one ConfigMap: it cannot hold each one's id
    shared = FakeClient(
        pod("kafka-0", mounting("kafka-config")),
        pod("kafka-1", mounting("kafka-config")),
        configmap("kafka-config", {"server.properties": "num.io.threads=8\n"}),
    )
    assert read(shared, [node(0), node(1)])["kafka-0"].unchecked == {"node.id", "broker.id"}
    assert read(shared, [node(0)])["kafka-0"].unchecked == frozenset()  # one pod: its own


def test_placeholders_and_keys_set_at_start_are_left_unchecked() -> None:
    text = "node.id=${ORDINAL}\nadvertised.listeners=PLAINTEXT://$(POD):9092\nnum.io.threads=8\n"
    client = FakeClient(
        pod("kafka-0", mounting("kafka-config")),
        configmap("kafka-config", {"server.properties": text}),
    )
    found = read(client, [node(0)], set_at_start=["advertised.listeners", "broker.rack"])
    assert found["kafka-0"].unchecked == {"node.id", "advertised.listeners", "broker.rack"}


def test_controller_only_pods_are_not_read_and_binary_data_is_text() -> None:
    data = base64.b64encode(b"num.io.threads=8\n").decode()
    client = FakeClient(
        pod("kafka-0", mounting("kafka-config")),
        configmap("kafka-config", server_properties=data),
    )
    found = read(client, [node(0), node(3, Role.CONTROLLER)])
    assert found["kafka-0"].properties == (Property("num.io.threads", "8", 1),)
    assert found["kafka-3"] == PodConfig(())
    assert ("Pod", "kafka-3") not in client.gets


def refusal(client: FakeClient, nodes: Sequence[Node] = (node(0),), **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        read(client, nodes, **kwargs)
    said = str(caught.value)
    assert SECRET not in said
    return said


def test_what_cannot_be_read_is_a_config_error_naming_pod_configmap_key_and_line() -> None:
    bad = FILE + "listeners=\\u00zz\n"  # a malformed \uXXXX: Java refuses it
    said = refusal(
        FakeClient(
            pod("kafka-0", mounting("kafka-config")),
            configmap("kafka-config", {"server.properties": bad}),
        )
    )
    assert said == (
        "pod kafka-0: ConfigMap kafka-config key server.properties, line 4: malformed \\uxxxx "
        "escape in the value of listeners"  # never the value: it may be a password
    )
    assert "00zz" not in said
    assert refusal(FakeClient(pod("kafka-0", mounting("kafka-config")))) == (
        "pod kafka-0: ConfigMap kafka-config (volume config) does not exist in namespace kafka"
    )
    no_volume = refusal(FakeClient(pod("kafka-0", spec(mounts=[]))))
    assert no_volume.startswith(
        "pod kafka-0: no ConfigMap volume it mounts holds server.properties (its ConfigMap "
        "volumes: none)"
    )
    without_key = refusal(
        FakeClient(
            pod("kafka-0", mounting("kafka-config")), configmap("kafka-config", {"log4j2.yaml": ""})
        )
    )
    assert without_key == (
        "pod kafka-0: no ConfigMap it mounts has server.properties (ConfigMap kafka-config)"
    )
    mapped = refusal(
        FakeClient(
            pod("kafka-0", mounting("kafka-config", key="broker")),
            configmap("kafka-config", {"log4j2.yaml": ""}),
        )
    )
    assert mapped == (
        "pod kafka-0: ConfigMap kafka-config key broker: no such key (volume config maps it)"
    )
    binary = refusal(
        FakeClient(pod("kafka-0", mounting("kafka-config")),
                   configmap("kafka-config", server_properties=base64.b64encode(b"\xff").decode()))
    )  # fmt: skip
    assert binary.endswith("key server.properties: binaryData that is not UTF-8 text")
    orphan = refusal(FakeClient(pod("kafka-0", mounting("c"), owner="gone")))
    assert orphan == "pod kafka-0: its StatefulSet gone does not exist"


def test_two_configmaps_holding_the_file_ask_for_its_path_and_the_path_decides() -> None:
    both = spec(
        cm_volume("a", "kafka-a"),
        cm_volume("b", "kafka-b"),
        mounts=[mount("a", "/opt/kafka/config"), mount("b", "/opt/other")],
    )
    objects = (
        pod("kafka-0", both),
        configmap("kafka-a", {"server.properties": "num.io.threads=8\n"}),
        configmap("kafka-b", {"server.properties": "num.io.threads=2\n"}),
    )
    said = refusal(FakeClient(*objects))
    assert said == (
        "pod kafka-0: server.properties is in ConfigMap kafka-a key server.properties, "
        "ConfigMap kafka-b key server.properties: name the file's path in the container with "
        "--config-key"
    )
    found = read(FakeClient(*objects), [node(0)], file="/opt/kafka/config/server.properties")
    assert found["kafka-0"].configmap == "kafka-a"


def test_an_optional_configmap_that_is_missing_shows_no_file_and_a_refusal_is_the_apis() -> None:
    optional = spec(
        cm_volume("extra", "kafka-extra", optional=True),
        cm_volume("config", "kafka-config"),
        mounts=[mount("extra", "/etc/extra"), mount("config", "/etc/kafka")],
    )
    client = FakeClient(
        pod("kafka-0", optional),
        configmap("kafka-config", {"server.properties": "num.io.threads=8\n"}),
    )
    assert read(client, [node(0)])["kafka-0"].configmap == "kafka-config"
    from rollguard.roller.kubernetes import KubernetesRefused

    refused = FakeClient(pod("kafka-0", mounting("kafka-config")), refuse="kafka-config")
    with pytest.raises(KubernetesRefused, match="get configmap kafka-config: 403 Forbidden"):
        read(refused, [node(0)])
