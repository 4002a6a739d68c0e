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
    ROLE_FILE,
    Permission,
    check_access,
)
from rollguard.shared.errors import ConfigError

__all__ = ["CHART_RBAC", "check", "controller_permissions", "in_chart_words", "leader_permissions"]

CHART_RBAC = "the rollguard chart's Role (deploy/helm/rollguard/templates/rbac.yaml)"


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
    try:
        await check_access(client, namespace, needed)
    except ConfigError as exc:
        raise ConfigError(in_chart_words(str(exc))) from None


def in_chart_words(message: str) -> str:
    """A refusal of the roll's access check (which names the roll Job's Role) as the
    controller's, naming the chart's Role."""
    return (
        message.replace(f"the roller's Role is {ROLE_FILE}", CHART_RBAC)
        .replace(ROLE_FILE, CHART_RBAC)
        .replace("the roller's Kubernetes", "the controller's Kubernetes")
    )
