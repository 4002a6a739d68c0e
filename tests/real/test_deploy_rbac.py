"""The roller's documented Role (deploy/kubernetes/roller/role.yaml) on a real API server's RBAC
(the shared control plane, `kube`): its lease verbs are exactly those the roller's lease uses.
The manifests themselves are tests/unit/test_deploy.py."""

from __future__ import annotations

import asyncio
import copy

import lightkube
import pytest
from lightkube import KubeConfig, codecs
from lightkube.resources.rbac_authorization_v1 import Role
from test_deploy import one

from rollguard.peers.realkube import ControlPlane
from rollguard.roller.roll.stores.lease import LeaseError
from rollguard.roller.roll.stores.lease_kubernetes import KubernetesLease

LEASE_RULE = (["coordination.k8s.io"], ["leases"])


def account_with(
    kube: ControlPlane, namespace: str, name: str, lease_verbs: set[str]
) -> KubeConfig:
    """A ServiceAccount `name` bound to a Role `name`: the documented roller Role with only
    `lease_verbs` left on leases; returned once the authorizer sees the binding."""
    doc = copy.deepcopy(one("roller", "Role"))
    doc["metadata"].update(name=name, namespace=namespace)
    for rule in doc["rules"]:
        if (rule["apiGroups"], rule["resources"]) == LEASE_RULE:
            rule["verbs"] = sorted(lease_verbs)
    role = codecs.from_dict(doc)
    assert isinstance(role, Role)
    some = (sorted(lease_verbs)[0], "leases", "coordination.k8s.io")
    return KubeConfig.from_file(kube.role_account(namespace, role, name, can=some))


def lease_cycle(config: KubeConfig, namespace: str, name: str) -> None:
    """What a roller does with its Lease: create it, renew it, have it taken over once expired
    (an update), release it; each step as the roller does it, through lightkube."""
    now = [1_800_000_000.0]

    async def rolls() -> None:
        client = lightkube.AsyncClient(config=config, trust_env=False)
        try:
            for holder in ("roller-a:1", "roller-b:1"):
                lease = KubernetesLease(
                    client, namespace, name, holder=holder, roll_id="r1", clock=lambda: now[0]
                )
                await lease.acquire()
                await lease.renew()
                now[0] += lease.duration + 1  # it expired: the second takes it over (an update)
            await lease.release()
        finally:
            await client.close()

    asyncio.run(rolls())


def test_the_roles_lease_verbs_are_the_ones_the_rollers_lease_uses(
    kube: ControlPlane, kube_namespace: str
) -> None:
    """On a real API server with RBAC: acquire, renew, a takeover and release pass as a
    ServiceAccount bound to the documented Role, and fail with the API server's 403 naming the
    verb when any one of the Role's lease verbs is taken away: the verbs the lease uses are
    exactly those the Role grants on leases."""
    role = one("roller", "Role")
    granted = {
        v
        for rule in role["rules"]
        if (rule["apiGroups"], rule["resources"]) == LEASE_RULE
        for v in rule["verbs"]
    }
    assert granted == {"get", "create", "update"}
    ns = kube_namespace
    lease_cycle(account_with(kube, ns, "rollguard-roller", granted), ns, "rollguard")
    for verb in sorted(granted):
        config = account_with(kube, ns, f"without-{verb}", granted - {verb})
        with pytest.raises(LeaseError) as refused:
            lease_cycle(config, ns, f"rollguard-without-{verb}")
        message = str(refused.value)
        assert "403 Forbidden" in message, message
        assert f'cannot {verb} resource "leases" in API group "coordination.k8s.io"' in message
