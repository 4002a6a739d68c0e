"""The roller checks its Kubernetes RBAC before its first action (`kubernetes_access`).

On the shared real control plane (`kube`, RBAC on), each test in a namespace of its own: a
StatefulSet `prod-kafka` of 3 pods (kwok runs them) made out of date by a new template, the
Kafka-protocol peer for Kafka and RUNNING agents. The roller is the installed `rollguard`
command with the token of a ServiceAccount bound to the documented Role
(deploy/kubernetes/roller/role.yaml), or to that Role less one verb. The path where the check
itself cannot be made: with anonymous credentials (which may not create a
SelfSubjectAccessReview: `system:basic-user` grants it to authenticated users only), and with a
client that fails every review.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from lightkube import ApiError, codecs
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewStatus
from lightkube.models.meta_v1 import Status
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.rbac_authorization_v1 import Role

from rollguard.peers.harness import kafka_peer
from rollguard.peers.harness_pods import LABELS, PodRoll
from rollguard.peers.realkube import ControlPlane
from rollguard.peers.realkube_objects import bind
from rollguard.roller.kubernetes_access import (
    ROLE_FILE,
    check_access,
    plan_permissions,
    roll_permissions,
)
from rollguard.shared.errors import ConfigError

from helpers import ROOT, HttpsPeer, Pki, running_agent

STS = "prod-kafka"
PODS = ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]
ROLL_ID = "r1"
QUICK = ("--poll-interval", "0.2", "--operation-timeout", "5s", "--retry-max-retries", "2")
APP = {"app": STS}  # the StatefulSet's pods


def documented_role(namespace: str, *, without: tuple[str, str, str] | None = None) -> Role:
    """The Role of deploy/kubernetes/roller/role.yaml in `namespace`; `without` (verb, API
    group, resource) takes that one verb out of it."""
    role = codecs.load_all_yaml((ROOT / ROLE_FILE).read_text())[0]
    assert isinstance(role, Role) and role.metadata is not None and role.rules
    role.metadata.namespace = namespace
    if without is not None:
        verb, group, resource = without
        rule = next(r for r in role.rules if r.apiGroups == [group] and resource in r.resources)
        assert verb in rule.verbs
        rule.verbs = [v for v in rule.verbs if v != verb]
    return role


def account(cluster: PodRoll[ControlPlane], role: Role) -> PodRoll[ControlPlane]:
    """The cluster's rolls with a ServiceAccount bound to `role` (applied first), as the roll
    Job runs."""
    assert role.metadata is not None and role.metadata.name is not None
    kube = cluster.kube
    kube.client().apply(role, force=True)
    name = role.metadata.name
    kubeconfig = kube.service_account_kubeconfig(cluster.namespace, "rollguard-roller", role=name)
    return cluster.using(kubeconfig=kubeconfig)


def anonymous(cluster: PodRoll[ControlPlane], role: Role) -> PodRoll[ControlPlane]:
    """The cluster's rolls with no credentials at all (the API server's `system:anonymous`),
    bound to `role` in the namespace."""
    assert role.metadata is not None and role.metadata.name is not None
    kube = cluster.kube
    kube.client().apply(role, force=True)
    bind(kube.client(), "system:anonymous", "User", cluster.namespace, "Role", role.metadata.name)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "real",
                "cluster": {
                    "server": kube.server,
                    "certificate-authority": str(kube.pki / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "anonymous", "user": {}}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": "anonymous"}}],
        "current-context": "real",
    }
    path = cluster.folder / "anonymous.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return cluster.using(kubeconfig=path)


@pytest.fixture
def cluster(
    kube: ControlPlane, kube_namespace: str, pki: Pki, tmp_path: Path
) -> Iterator[PodRoll[ControlPlane]]:
    """3 Ready pods of `prod-kafka`, all out of date (a new template; OnDelete: the StatefulSet
    controller restarts none of them), Kafka's peer and RUNNING agents; rolls with the admin's
    credentials until a test gives others."""
    kube.apply_statefulset(kube_namespace, STS, 3, pod_labels=LABELS)
    kube.wait_pods_ready(kube_namespace, STS, 3)
    kube.apply_statefulset(
        kube_namespace,
        STS,
        3,
        pod_labels=LABELS,
        pod_annotations={"example.com/generation": "2"},
    )
    with kafka_peer() as kafka, HttpsPeer(running_agent, pki) as agents:
        cluster = PodRoll(
            kafka, kube_namespace, kube.admin_kubeconfig, tmp_path, pki, kube,
            agent_url=agents.url + "/agents/{pod}/v1/broker-state",
            timings=QUICK, roll_id=ROLL_ID, timeout=180,
        )  # fmt: skip
        cluster.until_out_of_date(STS)
        yield cluster


def refusal(namespace: str, *missing: str) -> str:
    return (
        f"the roller's Kubernetes credentials may not: {', '.join(missing)} (namespace "
        f"{namespace}; the roller's Role is deploy/kubernetes/roller/role.yaml)"
    )


# ---- on a real API server ------------------------------------------------------------------


def test_the_documented_role_passes_the_check_and_the_roll_restarts_every_pod(
    cluster: PodRoll[ControlPlane],
) -> None:
    roller = account(cluster, documented_role(cluster.namespace))
    before = cluster.uids(APP)
    done = roller.roll()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "may not" not in done.stderr and "could not be checked" not in done.stderr
    # Restarted by deletion: the StatefulSet made each pod again (a new UID), through kwok.
    cluster.kube.wait_pods_ready(cluster.namespace, STS, 3)
    after = cluster.uids(APP)
    assert sorted(after) == PODS
    assert all(after[name] != before[name] for name in PODS)
    assert done.journal is not None and done.journal["state"] == "completed"
    lease = cluster.lease()
    assert lease.spec is not None and not lease.spec.holderIdentity  # released
    # `--resume` of a roll with no journal lists the rolls on record: the Role's `list`.
    resumed = roller.roll("--resume", "nothere", roll_id=None)
    assert resumed.returncode == 2, resumed.stderr
    assert "--resume nothere: no roll journal" in resumed.stderr
    assert f"the rolls on record there: {ROLL_ID}" in resumed.stderr
    assert "may not" not in resumed.stderr


def test_a_role_without_delete_on_pods_stops_the_roll_before_anything_changes(
    cluster: PodRoll[ControlPlane],
) -> None:
    roller = account(cluster, documented_role(cluster.namespace, without=("delete", "", "pods")))
    before = cluster.uids(APP)
    done = roller.roll()
    assert done.returncode == 2, done.stderr[-3000:]
    assert refusal(cluster.namespace, "delete pods") in done.stderr
    assert "Traceback" not in done.stderr
    assert cluster.uids(APP) == before  # no pod deleted
    assert cluster.leases() == []  # no lease taken
    assert cluster.journals() == []  # no journal written
    assert not (cluster.state / f"events-{ROLL_ID}.jsonl").exists()
    # `plan` only reads: the same Role lets it plan every pod's restart.
    planned = roller.plan("--output", "json")
    assert planned.returncode == 0, planned.stderr[-3000:]
    entries = planned.entries()
    assert sorted((e["node"], e["action"]) for e in entries) == [(p, "restart") for p in PODS]
    assert cluster.uids(APP) == before


def test_a_role_without_update_on_leases_is_exit_2_naming_only_that(
    cluster: PodRoll[ControlPlane],
) -> None:
    role = documented_role(cluster.namespace, without=("update", "coordination.k8s.io", "leases"))
    before = cluster.uids(APP)
    done = account(cluster, role).roll()
    assert done.returncode == 2, done.stderr[-3000:]
    assert refusal(cluster.namespace, "update leases.coordination.k8s.io") in done.stderr
    assert cluster.uids(APP) == before and cluster.leases() == [] and cluster.journals() == []


def test_credentials_that_may_not_review_their_access_are_warned_about_and_the_roll_goes_on(
    cluster: PodRoll[ControlPlane],
) -> None:
    # Anonymous: the Role binds it, but only authenticated users may create the reviews. The
    # check says so once and steps aside; the refused delete then fails the roll in one line.
    nobody = anonymous(cluster, documented_role(cluster.namespace, without=("delete", "", "pods")))
    before = cluster.uids(APP)
    done = nobody.roll()
    assert done.returncode == 1, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if "could not be checked" in line]
    assert len(warnings) == 1, done.stderr[-3000:]
    assert f"permissions in namespace {cluster.namespace} could not be checked" in warnings[0]
    assert "create selfsubjectaccessreview: 403 Forbidden" in warnings[0]
    assert "Traceback" not in done.stderr
    assert "delete pod prod-kafka-" in done.stderr and "403 Forbidden" in done.stderr
    assert cluster.uids(APP) == before
    assert cluster.leases() == ["rollguard-roll"]  # it went on: the lease was taken
    assert done.journal is not None and done.journal["state"] == "failed"


# ---- the module, with a client of our own ---------------------------------------------------


class Reviews:
    """A client whose SelfSubjectAccessReviews allow all but `refused` (`str` of a
    Permission), or fail with `error`."""

    def __init__(
        self, refused: frozenset[str] = frozenset(), error: Exception | None = None
    ) -> None:
        self.refused = refused
        self.error = error
        self.asked: list[ResourceAttributes] = []

    async def create(self, review: SelfSubjectAccessReview) -> SelfSubjectAccessReview:
        attributes = review.spec.resourceAttributes
        assert attributes is not None
        self.asked.append(attributes)
        if self.error is not None:
            raise self.error
        group = f".{attributes.group}" if attributes.group else ""
        asked = f"{attributes.verb} {attributes.resource}{group}"
        review.status = SubjectAccessReviewStatus(allowed=asked not in self.refused)
        return review


def forbidden() -> ApiError:
    message = (
        'selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "system:anonymous" '
        'cannot create resource "selfsubjectaccessreviews"'
    )
    return ApiError(status=Status(code=403, reason="Forbidden", message=message))


def test_every_refused_permission_is_named_with_the_namespace_and_the_role() -> None:
    client = Reviews(frozenset({"delete pods", "update leases.coordination.k8s.io"}))
    needed = roll_permissions(journal="rollguard-roll-r1", lease="rollguard-roll", resume=False)
    with pytest.raises(ConfigError) as refused:
        asyncio.run(check_access(client, "kafka", needed))
    assert str(refused.value) == (
        "the roller's Kubernetes credentials may not: delete pods, update "
        "leases.coordination.k8s.io (namespace kafka; the roller's Role is "
        "deploy/kubernetes/roller/role.yaml)"
    )
    assert len(client.asked) == len(needed) == 10
    assert {a.namespace for a in client.asked} == {"kafka"}
    lease = [a for a in client.asked if a.resource == "leases" and a.verb != "create"]
    assert {(a.group, a.name) for a in lease} == {("coordination.k8s.io", "rollguard-roll")}


def test_plan_asks_only_for_reads() -> None:
    client = Reviews(
        frozenset({"delete pods", "create configmaps", "update leases.coordination.k8s.io"})
    )
    asyncio.run(check_access(client, "kafka", plan_permissions()))
    assert sorted(f"{a.verb} {a.resource}" for a in client.asked) == [
        "get pods",
        "get statefulsets",
        "list pods",
    ]


def test_a_refused_list_on_resume_is_a_warning_not_a_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    needed = roll_permissions(journal="rollguard-roll-r1", lease="rollguard-roll", resume=True)
    assert str(needed[-1]) == "list configmaps" and needed[-1].lost
    with caplog.at_level(logging.WARNING):
        asyncio.run(check_access(Reviews(frozenset({"list configmaps"})), "kafka", needed))
    assert [r.getMessage() for r in caplog.records] == [
        "the roller's Kubernetes credentials may not list configmaps (namespace kafka): "
        "--resume without a journal cannot name the rolls on record; the roller's Role "
        "(deploy/kubernetes/roller/role.yaml) grants it"
    ]


def test_reviews_that_cannot_be_created_are_one_warning_and_no_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = Reviews(error=forbidden())
    needed = roll_permissions(journal="rollguard-roll-r1", lease="rollguard-roll", resume=False)
    with caplog.at_level(logging.WARNING):
        asyncio.run(check_access(client, "kafka", needed))
    assert len(client.asked) == len(needed)
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert message.startswith(
        "the roller's Kubernetes permissions in namespace kafka could not be checked "
        "(Kubernetes API: create selfsubjectaccessreview: 403 Forbidden: "
        "selfsubjectaccessreviews.authorization.k8s.io is forbidden"
    )
    assert message.endswith("going on: a call they do not allow fails when it is made")


def test_the_documented_role_grants_exactly_what_a_roll_asks_for() -> None:
    role = documented_role("kafka")
    granted = {
        (verb, resource, group)
        for rule in role.rules or []
        for group in rule.apiGroups or []
        for resource in rule.resources or []
        for verb in rule.verbs
    }
    needed = roll_permissions(journal="rollguard-roll-r1", lease="rollguard-roll", resume=True)
    assert granted == {(p.verb, p.resource, p.group) for p in needed}
    assert {str(p) for p in plan_permissions()} == {
        "list pods",
        "get pods",
        "get statefulsets.apps",
    }
    # plan --compare-config reads the pods' ConfigMaps too, whatever their names
    configs = plan_permissions(configs=True)
    assert {str(p) for p in configs} - {str(p) for p in plan_permissions()} == {"get configmaps"}
    assert {(p.verb, p.resource, p.group) for p in configs} <= granted
