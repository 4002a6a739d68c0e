"""`rollguard controller` on a real Kubernetes API server: its Helm chart (deploy/helm/rollguard)
linted and installed with `helm install`, its replicas run as the chart's ServiceAccount with the
chart's RBAC, and what it does with StatefulSets that cannot or must not be rolled, judged by the
API's own record (the pods' UIDs, the Lease, the Events): a bad setting is a Warning naming the
annotation and its value, a StatefulSet with updateStrategy RollingUpdate gets its warning and
nothing is deleted, `kubectl rollout restart`'s annotation is a new roll tried at once, a Role
without a verb the roll needs, agents that resolve to nothing and a ConfigMap that does not parse
are each a refused roll naming it, and of two replicas one acts and the other takes over when it
is killed (SIGKILL).

No Kafka runs here: the StatefulSets' pods are kwok's, run nothing, and nothing reaches a broker
(a refused roll stops before the agents and Kafka are asked). Real Kafka behind the pods, and the
rolls: tests/real/test_controller_roll.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lightkube.models.core_v1 import ConfigMapVolumeSource, Volume, VolumeMount
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod, Service, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.types import PatchType

from rollguard.peers.processes import BIN, wait_until
from rollguard.peers.realkube import ControlPlane
from rollguard.peers.realkube_binaries import KubeBinariesMissing, find_helm
from rollguard.peers.realkube_controller import (
    CHART,
    Controller,
    Helm,
    Said,
    events,
    holder,
    status,
    wait_for_event,
)
from rollguard.peers.realkube_objects import may
from rollguard.roller.cli import build_parser
from rollguard.roller.controller.options import ControllerOptions
from rollguard.roller.options import ENV_PREFIX

from helpers import Pki, missing_tier

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

SYSTEM, WATCHED = "ctl-a-system", "ctl-a-kafka"
RELEASE = "rollguard"  # the chart names its objects after it
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"  # what `kubectl rollout restart` sets
LEASE_S = "15s"  # the leadership Lease: a killed leader's replica takes over within that


@pytest.fixture(scope="module")
def chart(kube: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> tuple[Helm, Path]:
    """The chart linted and installed in SYSTEM, watching WATCHED; the kubeconfig of its
    ServiceAccount, once RBAC lets it watch StatefulSets there."""
    try:
        binary = find_helm()
    except KubeBinariesMissing as missing:
        missing_tier(str(missing))
    helm = Helm(binary, tmp_path_factory.mktemp("helm"), kube.admin_kubeconfig)
    for namespace in (SYSTEM, WATCHED):
        kube.create_namespace(namespace)
    values = {"watchNamespaces": [WATCHED], "replicas": 2, "leaderLeaseDuration": LEASE_S}
    installed = helm.install(RELEASE, SYSTEM, values)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    account = kube.service_account_kubeconfig(SYSTEM, RELEASE)
    wait_until(
        lambda: may(account, WATCHED, "watch", "statefulsets", "apps"),
        30,
        what="the chart's RoleBinding to reach the authorizer",
    )
    return helm, account


def replica(name: str, account: Path, pki: Pki, folder: Path) -> Controller:
    """A replica as the chart's Deployment runs it (its args), with the chart's ServiceAccount."""
    args = [
        str(BIN / "rollguard"), "controller", "--watch-namespace", WATCHED,
        "--leader-namespace", SYSTEM, "--leader-lease", RELEASE,
        "--leader-lease-duration", LEASE_S, *pki.client_flags(),
        "--state-dir", str(folder / name),
    ]  # fmt: skip
    env = {"KUBECONFIG": str(account), "PATH": "/usr/bin:/bin"}
    return Controller(name, args, env, folder)


@pytest.fixture(scope="module")
def replicas(
    kube: ControlPlane, chart: tuple[Helm, Path], pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Controller]]:
    """Two replicas: `a` started first and leading, `b` its standby."""
    folder = tmp_path_factory.mktemp("controllers")
    found = {n: replica(n, chart[1], pki, folder) for n in ("a", "b")}
    try:
        found["a"].start()
        wait_until(
            lambda: holder(kube.client(), SYSTEM, RELEASE) == found["a"].identity(),
            60,
            what="replica a to lead",
        )
        found["b"].start()
        wait_until(lambda: "standby" in found["b"].log(), 60, what="replica b to stand by")
        yield found
    finally:
        for controller in found.values():
            controller.stop()
        for controller in found.values():
            print(f"--- replica {controller.name}:\n{controller.log()[-4000:]}")


def statefulset(
    kube: ControlPlane,
    name: str,
    *,
    annotations: dict[str, str],
    strategy: str = "OnDelete",
    configmap: str | None = None,
) -> dict[str, str]:
    """A StatefulSet of 2 kwok pods in WATCHED (mounting `configmap` at /opt/kafka/config),
    opted in with `annotations`, once its pods are Ready: their UIDs."""
    volumes, mounts = [], []
    if configmap is not None:
        volumes = [Volume(name="config", configMap=ConfigMapVolumeSource(name=configmap))]
        mounts = [VolumeMount(name="config", mountPath="/opt/kafka/config")]
    kube.apply_statefulset(
        WATCHED, name, 2, pod_labels={"kafka": name}, volumes=volumes, mounts=mounts
    )
    patch = {
        "metadata": {"labels": {"rollguard.io/roll": "true"}, "annotations": annotations},
        "spec": {"updateStrategy": {"type": strategy}},
    }
    kube.client().patch(StatefulSet, name, patch, namespace=WATCHED, patch_type=PatchType.MERGE)
    pods = kube.wait_pods_ready(WATCHED, name, 2)
    return {str(p.metadata.name): str(p.metadata.uid) for p in pods if p.metadata}


def uids(kube: ControlPlane, name: str) -> dict[str, str]:
    return {
        str(p.metadata.name): str(p.metadata.uid) for p in kube.pods(WATCHED, name) if p.metadata
    }


def test_the_chart_lints_clean_and_installs_the_controller_with_its_least_rbac(
    kube: ControlPlane, chart: tuple[Helm, Path]
) -> None:
    helm, _ = chart
    linted = helm.run("lint", "--strict", str(CHART), "--set", f"watchNamespaces={{{WATCHED}}}")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in linted.stdout
    assert "[WARNING]" not in linted.stdout and "[ERROR]" not in linted.stdout
    client = kube.client()
    deployment = client.get(Deployment, RELEASE, namespace=SYSTEM)
    assert deployment.spec is not None and deployment.spec.replicas == 2
    container = deployment.spec.template.spec.containers[0]  # type: ignore[union-attr]
    assert container.args is not None and container.args[0] == "controller"
    assert f"--watch-namespace={WATCHED}" in container.args
    # Its flags are the command's own, as the chart's pod gives them (the namespace from the API).
    parsed = build_parser("controller").parse_args(container.args)
    options = ControllerOptions.load(parsed, {"ROLLGUARD_LEADER_NAMESPACE": SYSTEM}, ENV_PREFIX)
    assert options.watch_namespace == (WATCHED,) and options.leader_at == SYSTEM
    assert options.leader_lease == RELEASE and options.metrics_listen is not None
    client.get(ServiceAccount, RELEASE, namespace=SYSTEM)
    assert client.get(Service, f"{RELEASE}-metrics", namespace=SYSTEM).spec is not None
    role = client.get(Role, RELEASE, namespace=WATCHED)
    rules = {
        (tuple(r.apiGroups or ()), tuple(r.resources or ())): set(r.verbs) for r in role.rules or ()
    }
    assert rules == {
        (("apps",), ("statefulsets",)): {"get", "list", "watch", "patch"},
        (("",), ("pods",)): {"get", "list", "delete"},
        (("",), ("configmaps",)): {"get", "list", "watch", "create", "update"},
        (("coordination.k8s.io",), ("leases",)): {"get", "create", "update"},
        (("",), ("events",)): {"create"},
    }
    leader = client.get(Role, f"{RELEASE}-leader", namespace=SYSTEM)
    assert {v for r in leader.rules or () for v in r.verbs} == {"get", "create", "update"}
    client.get(RoleBinding, RELEASE, namespace=WATCHED)
    # Its two pods, as Kubernetes made them (kwok's: they run nothing; the replicas below are
    # what their containers would run).
    wait_until(
        lambda: (
            len(
                list(
                    client.list(
                        Pod, namespace=SYSTEM, labels={"app.kubernetes.io/name": "rollguard"}
                    )
                )
            )
            == 2
        ),
        60,
        what="the Deployment's two pods",
    )


def test_a_bad_setting_is_a_warning_naming_its_annotation_and_value_and_nothing_is_rolled(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    before = statefulset(
        kube,
        "bad-timeout",
        annotations={
            "rollguard.io/bootstrap": "kafka:9092",
            "rollguard.io/operation-timeout": "5 minutes",
        },
    )
    said = wait_for_event(kube.client(), WATCHED, "bad-timeout", "InvalidSettings", 60)
    assert said.type == "Warning" and said.source == "rollguard"
    assert (
        "annotation rollguard.io/operation-timeout (StatefulSet bad-timeout)='5 minutes'"
        in said.message
    )
    assert "is not a duration" in said.message
    found = status(kube.client(), WATCHED, "bad-timeout")
    assert found["phase"] == "Refused" and "5 minutes" in found["reason"]
    assert uids(kube, "bad-timeout") == before


def test_a_rolling_update_statefulset_gets_its_warning_and_nothing_is_deleted(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    before = statefulset(
        kube,
        "rolling",
        annotations={"rollguard.io/bootstrap": "kafka:9092"},
        strategy="RollingUpdate",
    )
    said = wait_for_event(kube.client(), WATCHED, "rolling", "RollingUpdate", 60)
    assert said.type == "Warning"
    assert said.message.startswith("updateStrategy RollingUpdate: Kubernetes restarts this")
    assert "Set spec.updateStrategy.type to OnDelete" in said.message
    assert status(kube.client(), WATCHED, "rolling")["phase"] == "Ignored"
    # Its template changed: Kubernetes itself rolls it (its pods replaced one by one), rollguard
    # says nothing more and deletes nothing: one warning, no roll.
    change = {"spec": {"template": {"metadata": {"annotations": {"example.com/v": "2"}}}}}
    kube.client().patch(
        StatefulSet, "rolling", change, namespace=WATCHED, patch_type=PatchType.MERGE
    )
    wait_until(lambda: set(uids(kube, "rolling").values()).isdisjoint(before.values()), 60,
               what="Kubernetes' own RollingUpdate of the pods")  # fmt: skip
    mine = [e for e in events(kube.client(), WATCHED, "rolling") if e.source == "rollguard"]
    assert [e.reason for e in mine] == ["RollingUpdate"], mine


def test_a_role_without_a_verb_the_roll_needs_is_a_refused_roll_naming_it(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    client = kube.client()
    role = client.get(Role, RELEASE, namespace=WATCHED)
    kept = [r for r in role.rules or () if r.resources != ["pods"]]
    without = [*kept, PolicyRule(apiGroups=[""], resources=["pods"], verbs=["get", "list"])]
    client.patch(Role, RELEASE, {"rules": [r.to_dict() for r in without]}, namespace=WATCHED,
                 patch_type=PatchType.MERGE)  # fmt: skip
    account = replicas["a"].env["KUBECONFIG"]
    wait_until(lambda: not may(Path(account), WATCHED, "delete", "pods"), 30,
               what="the Role's change to reach the authorizer")  # fmt: skip
    try:
        since = datetime.now(UTC)
        before = statefulset(
            kube, "no-delete", annotations={"rollguard.io/bootstrap": "127.0.0.1:9"}
        )
        said = wait_for_event(client, WATCHED, "no-delete", "RollRefused", 90, since=since)
        assert said.type == "Warning"
        assert "may not: delete pods" in said.message, said.message
        assert "the rollguard chart's Role" in said.message
        found = status(client, WATCHED, "no-delete")
        assert found["phase"] == "Refused" and "delete pods" in found["reason"]
        assert uids(kube, "no-delete") == before
    finally:
        client.patch(Role, RELEASE, {"rules": [r.to_dict() for r in role.rules or ()]},
                     namespace=WATCHED, patch_type=PatchType.MERGE)  # fmt: skip


def test_a_statefulset_whose_agents_resolve_to_nothing_is_a_refused_roll_naming_them(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    """No agent beside these brokers: the agents' URLs (the default template, the pods' headless
    service) resolve to nothing, and the roll says so before anything is done."""
    before = statefulset(kube, "no-agents", annotations={"rollguard.io/bootstrap": "127.0.0.1:9"})
    said = wait_for_event(kube.client(), WATCHED, "no-agents", "RollRefused", 90)
    assert "agent URLs that do not resolve" in said.message, said.message
    assert "no-agents-0 (https://no-agents-0.no-agents." in said.message
    assert status(kube.client(), WATCHED, "no-agents")["phase"] == "Refused"
    assert uids(kube, "no-agents") == before


def test_kubectl_rollout_restart_is_a_new_roll_tried_at_once(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    """A user asks for a roll as `kubectl rollout restart statefulset` does: a time in the
    template's `kubectl.kubernetes.io/restartedAt` annotation. The StatefulSet controller makes
    a new revision of the template, and the controller a new roll (a new id), tried at once, not
    after the refused first roll's backoff (a minute). With no agents beside these pods that
    roll is refused too, and nothing is deleted."""
    client = kube.client()

    def revision() -> str:
        found = client.get(StatefulSet, "asked", namespace=WATCHED).status
        return str(found.updateRevision if found else "")

    def refusals() -> list[Said]:
        return [e for e in events(client, WATCHED, "asked") if e.reason == "RollRefused"]

    before = statefulset(kube, "asked", annotations={"rollguard.io/bootstrap": "127.0.0.1:9"})
    wait_for_event(client, WATCHED, "asked", "RollRefused", 90)
    first, was, refused = status(client, WATCHED, "asked"), revision(), len(refusals())
    assert first["phase"] == "Refused" and first["rollId"].startswith("asked-"), first
    now = datetime.now(UTC).isoformat(timespec="seconds")
    change = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}}
    client.patch(StatefulSet, "asked", change, namespace=WATCHED, patch_type=PatchType.MERGE)
    wait_until(
        lambda: (
            status(client, WATCHED, "asked").get("rollId") not in (None, first["rollId"])
            and len(refusals()) > refused
        ),
        40,  # within the first roll's backoff of 60 s: the new trigger, not a retry
        what="a new roll of the asked-for revision, refused",
    )
    again = status(client, WATCHED, "asked")
    assert again["phase"] == "Refused", again
    assert "agent URLs that do not resolve" in refusals()[-1].message
    assert revision() != was
    assert uids(kube, "asked") == before


def test_a_configmap_that_does_not_parse_is_a_refused_roll_naming_its_line(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    text = "num.io.threads=8\nlog.dirs=/var/lib/kafka/data\nssl.key.password=\\u12\n"
    meta = ObjectMeta(name="bad-config", namespace=WATCHED)
    kube.client().create(ConfigMap(metadata=meta, data={"server.properties": text}))
    before = statefulset(
        kube,
        "bad-config",
        annotations={"rollguard.io/bootstrap": "127.0.0.1:9"},
        configmap="bad-config",
    )
    said = wait_for_event(kube.client(), WATCHED, "bad-config", "RollRefused", 90)
    assert (
        "pod bad-config-0: ConfigMap bad-config key server.properties, line 3: malformed \\uxxxx "
        "escape" in said.message
    ), said.message
    assert uids(kube, "bad-config") == before


def test_of_two_replicas_one_acts_and_the_other_takes_over_when_it_is_killed_or_stopped(
    kube: ControlPlane, replicas: dict[str, Controller]
) -> None:
    """Replica a has led from the start: every Event of the controller so far is a's (its
    reportingInstance), none b's. Killed (SIGKILL: no release), b takes the Lease once it has
    expired and acts: the next StatefulSet's warning is b's. Stopped cleanly (SIGTERM), b
    releases it, and a, started again meanwhile, takes over at once."""
    a, b = replicas["a"], replicas["b"]
    client = kube.client()
    ours = [e for e in events(client, WATCHED) if e.source == "rollguard"]
    assert ours and {e.instance for e in ours} == {a.identity()}, ours
    assert a.kill() == -9
    killed = datetime.now(UTC)
    wait_until(lambda: holder(client, SYSTEM, RELEASE) == b.identity(), 60,
               what="replica b to take the Lease over")  # fmt: skip
    statefulset(
        kube,
        "after",
        annotations={"rollguard.io/bootstrap": "kafka:9092", "rollguard.io/safety-wait": "forever"},
    )
    said = wait_for_event(client, WATCHED, "after", "InvalidSettings", 60, since=killed)
    assert said.instance == b.identity()
    assert "rollguard.io/safety-wait (StatefulSet after)='forever'" in said.message
    a.start()  # started again, as Kubernetes restarts its container: a standby now
    wait_until(lambda: "standby:" in a.log(), 60, what="replica a to stand by")
    assert holder(client, SYSTEM, RELEASE) == b.identity()
    # Stopped cleanly (SIGTERM, as a Deployment's update stops a pod): b releases the Lease
    # and exits 0, and a takes over at once, not a Lease's duration later.
    stopped = time.monotonic()
    assert b.stop() == 0
    wait_until(lambda: holder(client, SYSTEM, RELEASE) == a.identity(), 30,
               what="replica a to take the released Lease")  # fmt: skip
    assert time.monotonic() - stopped < 15  # the Lease's duration: it was released, not expired
