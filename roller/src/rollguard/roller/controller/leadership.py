"""Two replicas, one acting: a coordination.k8s.io Lease (`rollguard-controller` in the
controller's namespace), kept as the roll keeps its own (`roll.stores.lease`: taken with the
API's optimistic concurrency, so of two candidates exactly one wins; renewed every sixth of its
duration; a failed renewal retried for as long as the lease cannot have expired).

The replica that holds it runs the controller; the other waits, asking again every
`retry` seconds, and takes the Lease once its holder stopped renewing it for its whole duration
(killed, partitioned, its node gone) or released it (stopped cleanly). A leader that loses the
Lease (not renewed in time, or taken over) stops at once: its rolls are interrupted (their
journals say so) and the process exits with 1, so that Kubernetes starts it again as a standby.
The new leader resumes each roll from its journal; each cluster's own Lease, held by the dead
leader's process until it expires, keeps the two from ever acting on one cluster at once.

Why not kopf's peering: it needs two CRDs installed cluster-wide, and its rule for operators
of the same priority (two replicas of one Deployment) is that every one of them pauses: none
acts. Distinct priorities would make one act, but a peer's keep-alive is no lock: two can act
until each has read the other's, and a paused one's running rolls go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from rollguard.roller.roll.stores.lease import LeaseHeld, LeaseUnavailable, renewing
from rollguard.roller.roll.stores.lease_kubernetes import KubernetesLease
from rollguard.shared.errors import RollguardError

__all__ = ["LEADER_LEASE", "lead"]

logger = logging.getLogger(__name__)

LEADER_LEASE = "rollguard-controller"
RETRY = 2.0  # seconds between a standby's tries, as client-go's leader election's retryPeriod


async def lead(
    client: Any,
    namespace: str,
    name: str,
    holder: str,
    duration: float,
    work: Callable[[], Awaitable[int]],
    *,
    retry: float = RETRY,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> int:
    """Wait for the Lease, then run `work` while it is held: its exit code. LeaseLost when the
    Lease is lost (the work is cancelled first)."""
    lease = KubernetesLease(
        client, namespace, name, holder=holder, roll_id="controller", duration=duration
    )
    waiting_for = ""
    while True:
        try:
            await lease.acquire()
            break
        except LeaseHeld as held:
            if held.holder != waiting_for:
                waiting_for = held.holder
                logger.info(
                    "standby: %s leads (%s; it expires in %.0fs unless renewed)",
                    held.holder,
                    lease.describe(),
                    held.expires_in,
                )
        except LeaseUnavailable as exc:
            logger.warning("%s; trying again in %gs", exc, retry)
        await sleep(retry)
    logger.info("leading: %s taken by %s", lease.describe(), holder)
    try:
        async with renewing(lease, duration / 6):
            return await work()
    finally:
        try:
            await asyncio.shield(lease.release())
        except RollguardError as exc:
            logger.warning("%s; it expires by itself", exc)
