"""May the roller's Kubernetes credentials do what the command is about to do? Asked before it
does anything.

A Role without a verb otherwise shows half way through a roll (`delete pod X: 403 Forbidden`),
after the lease was taken, the journal written and brokers restarted. So `roll` and `plan` first
ask the API server, with one SelfSubjectAccessReview (authorization.k8s.io/v1) per permission,
made with the roller's own credentials (every authenticated user may create one: the built-in
`system:basic-user` ClusterRole grants it), and refuse with a `ConfigError` (exit 2) naming
every permission refused, the namespace and the documented Role.

The permissions are those of the calls the code makes, and only those:

    plan and roll  list pods (the nodes), get pods (each observation), get statefulsets.apps
                   (a pod's update revision)                              (kubernetes.py)
    plan --compare-config
                   get configmaps (the ConfigMaps the pods mount, whatever their names: each
                   pod's desired server.properties)        (roll/configs/kubernetes.py)
    roll           delete pods (the restart)                              (kubernetes.py)
                   get, create, update configmaps (the journal: read, made, replaced)
                                                    (roll/stores/journal.py, configmap.py)
                   get, create, update leases.coordination.k8s.io (taken, renewed, released
                   by clearing its holder: never deleted)
                                                    (roll/stores/lease_kubernetes.py)
    roll --resume  list configmaps: only to name the rolls on record when there is no journal
                   to resume; the roll does without it, so a refusal is a warning, not exit 2

A review that cannot be made (the API refuses or fails the request) proves nothing either way:
one warning says so and the command goes on; a call it may not make still fails in one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rollguard.roller.kubernetes import API_ERRORS, api_error
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)

ROLE_FILE = "deploy/kubernetes/roller/role.yaml"
APPS, COORDINATION = "apps", "coordination.k8s.io"


@dataclass(frozen=True, slots=True)
class Credentials:
    """Whose credentials a refusal names, and the Role that grants what they lack."""

    whose: str  # "the roller's"
    role: str  # "the roller's Role is deploy/kubernetes/roller/role.yaml"


ROLLER = Credentials("the roller's", f"the roller's Role is {ROLE_FILE}")


@dataclass(frozen=True, slots=True)
class Permission:
    """`verb` on `resource` of API `group` ("" is the core group) in the namespace; on the one
    object `name` when given (a Role may grant it by name). `lost` says what the command goes
    without when it is refused; "" when it cannot go without it."""

    verb: str
    resource: str
    group: str = ""
    name: str | None = None
    lost: str = ""

    def __str__(self) -> str:
        """`delete pods`, `update leases.coordination.k8s.io`: as `kubectl auth can-i` and a
        Role's rules name them."""
        return f"{self.verb} {self.resource}{f'.{self.group}' if self.group else ''}"


def plan_permissions(*, configs: bool = False) -> list[Permission]:
    """What `plan` (and a roll's observation) reads; it writes nothing. `configs`: it also reads
    the ConfigMaps the pods mount (`--compare-config`)."""
    needed = [
        Permission("list", "pods"),
        Permission("get", "pods"),
        Permission("get", "statefulsets", APPS),
    ]
    if configs:
        needed.append(Permission("get", "configmaps"))
    return needed


def roll_permissions(
    *, journal: str, lease: str, resume: bool, configs: bool = False
) -> list[Permission]:
    """What `roll` does: `plan`'s reads, the restarts, the journal in ConfigMap `journal` and
    the Lease `lease` (`configs`: `plan_permissions`'s)."""
    needed = [
        *plan_permissions(configs=configs),
        Permission("delete", "pods"),
        Permission("get", "configmaps", name=journal),
        Permission("create", "configmaps"),  # a create is never granted by name: RBAC
        Permission("update", "configmaps", name=journal),
        Permission("get", "leases", COORDINATION, name=lease),
        Permission("create", "leases", COORDINATION),
        Permission("update", "leases", COORDINATION, name=lease),
    ]
    if resume:
        lost = "--resume without a journal cannot name the rolls on record"
        needed.append(Permission("list", "configmaps", lost=lost))
    return needed


async def check_access(
    client: Any,
    namespace: str,
    needed: Iterable[Permission],
    credentials: Credentials | None = None,
) -> None:
    """ConfigError naming each permission in `needed` that `namespace` refuses the client's
    credentials (`credentials`: whose, for the message; the roller's by default); a warning for
    one the command can do without. `client`: a lightkube AsyncClient."""
    asked = list(dict.fromkeys(needed))
    # Side by side: a dozen small requests, before the first that matters.
    answers = await asyncio.gather(
        *(_allowed(client, namespace, p) for p in asked), return_exceptions=True
    )
    refused, unchecked = [], []
    for permission, answer in zip(asked, answers, strict=True):
        if isinstance(answer, API_ERRORS):
            unchecked.append(answer)
        elif isinstance(answer, BaseException):
            raise answer
        elif not answer:
            refused.append(permission)
    fatal = [p for p in refused if not p.lost]
    if fatal:
        said = credentials or ROLLER
        raise ConfigError(
            f"{said.whose} Kubernetes credentials may not: {', '.join(map(str, fatal))} "
            f"(namespace {namespace}; {said.role})"
        )
    for permission in refused:
        logger.warning(
            "the roller's Kubernetes credentials may not %s (namespace %s): %s; the roller's "
            "Role (%s) grants it",
            permission,
            namespace,
            permission.lost,
            ROLE_FILE,
        )
    if unchecked:
        logger.warning(
            "the roller's Kubernetes permissions in namespace %s could not be checked (%s); "
            "going on: a call they do not allow fails when it is made",
            namespace,
            api_error("create selfsubjectaccessreview", unchecked[0]),
        )


async def _allowed(client: Any, namespace: str, permission: Permission) -> bool:
    from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
    from lightkube.resources.authorization_v1 import SelfSubjectAccessReview

    attributes = ResourceAttributes(
        namespace=namespace,
        verb=permission.verb,
        group=permission.group,
        resource=permission.resource,
        name=permission.name,
    )
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(resourceAttributes=attributes)
    )
    answer = await client.create(review)
    return answer.status is not None and answer.status.allowed is True
