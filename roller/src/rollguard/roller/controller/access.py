"""May the controller's credentials do what it does in a namespace, beside a roll's own needs
(`kubernetes_access.roll_permissions`, checked by each roll as `rollguard roll` checks them)?
Asked before each roll, with the same SelfSubjectAccessReviews: a Role without a verb is a
refused roll whose Event names the verb, not a 403 in the controller's log half way through.

    watch the StatefulSets     get, list, watch statefulsets.apps        (kopf, observe.py)
    the status annotation      patch statefulsets.apps                   (reconciler.py)
    their pods and ConfigMaps  list pods; get, list, watch configmaps    (observe.py, kopf)
    say what it does           create events                              (kopf.event)
    a Lease per cluster        get, create, update leases                 (the roll's)

The leadership Lease lives in the controller's own namespace (`leadership.py`): its get,
create and update are checked when the controller starts.
"""

from __future__ import annotations

from typing import Any

from rollguard.roller.kubernetes_access import (
    APPS,
    COORDINATION,
    Credentials,
    Permission,
    check_access,
)

__all__ = ["CHART_RBAC", "CONTROLLER", "check", "controller_permissions", "leader_permissions"]

CHART_RBAC = "the rollguard chart's Role (deploy/helm/rollguard/templates/rbac.yaml)"
# A refusal, the controller's own check's or its rolls', names the chart's Role.
CONTROLLER = Credentials("the controller's", CHART_RBAC)


def controller_permissions() -> list[Permission]:
    return [
        Permission("get", "statefulsets", APPS),
        Permission("list", "statefulsets", APPS),
        Permission("watch", "statefulsets", APPS),
        Permission("patch", "statefulsets", APPS),
        Permission("list", "pods"),
        Permission("list", "configmaps"),
        Permission("watch", "configmaps"),
        Permission("create", "events"),
    ]


def leader_permissions(lease: str) -> list[Permission]:
    return [
        Permission("get", "leases", COORDINATION, name=lease),
        Permission("create", "leases", COORDINATION),
        Permission("update", "leases", COORDINATION, name=lease),
    ]


async def check(client: Any, namespace: str, needed: list[Permission]) -> None:
    """ConfigError naming each permission the controller's credentials lack in `namespace`,
    and the chart's Role that grants it."""
    await check_access(client, namespace, needed, CONTROLLER)
