"""What the roll and the plan see of Kafka (through the Admin API) and of each node's platform;
its agent is read by the agent client (`AgentClient.ask`, one attempt a look: unknown, never
"not recovering", when it cannot be read).

Observation never changes anything and never writes the roll journal. A cluster that cannot be
observed is None (its transient errors retried first with the shared policy): nothing can be
proven safe without it, so every restart waits. A platform whose API does not answer
(`PlatformUnavailable`: the Kubernetes API server restarting) is waited out by the lease's rule
(`through_outage`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from rollguard.roller.model import ClusterView, Node, PlatformView
from rollguard.roller.platform import Platform, PlatformUnavailable
from rollguard.roller.roll.rules.safety import voter_caught_up
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.dataset import Event
from rollguard.shared.errors import RetryLater
from rollguard.shared.retry import Retrying, RetryPolicy, announce, retry_async

logger = logging.getLogger(__name__)

T = TypeVar("T")
ClusterObserver = Callable[[], Awaitable[ClusterView]]


class Observer:
    def __init__(
        self,
        platform: Platform,
        observe_cluster: ClusterObserver | None,
        events: EventLog,
        *,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        outage_limit: float = 30.0,
        outage_retry: float = 2.0,
    ) -> None:
        """`outage_limit`: how long a platform API that does not answer is waited out (the
        roll lease's duration); `outage_retry`: how often it is asked meanwhile."""
        self.platform = platform
        self.observe_cluster = observe_cluster
        self.events = events
        self.policy = policy or RetryPolicy()  # transient Admin API errors
        self.outage_limit = outage_limit
        self.outage_retry = outage_retry
        self.restarting = ""  # the nodes of the restart on its way back, while it is
        self._sleep = sleep
        self._clock = clock

    def _retrying(self, retrying: Retrying) -> None:
        """A retry of the Admin API, said: a warning, unless a restart is on its way back,
        which is expected to cost one (its broker refuses connections, Kafka does not know it
        for a moment): then an INFO line. Kafka that cannot be seen after every retry is said
        as a warning either way (`admin-unavailable`)."""
        if not self.restarting:
            announce(retrying)
        else:
            logger.info("%s (expected while %s restarts)", retrying, self.restarting)

    async def nodes(self) -> list[Node]:
        return await self.platform.nodes()

    async def cluster(self) -> ClusterView | None:
        """Kafka's view; an Admin API that may answer shortly (`RetryLater`) asked again with
        the shared policy, then None (nothing can be proven safe without it, so every restart
        waits). Any other error is not asked again: it stops the roll (a configuration one:
        exit 2)."""
        if self.observe_cluster is None:
            return None
        try:
            return await retry_async(
                self.observe_cluster,
                self.policy,
                operation="kafka-admin",
                retriable=(RetryLater,),  # a setting or a refusal is not asked again
                sleep=self._sleep,
                describe=str,  # an AdminApiError names the bootstrap servers and the cause
                on_retry=self._retrying,  # never silent while Kafka cannot be reached
            )
        except RetryLater as exc:
            self.events.say(None, "admin", Event.ADMIN_UNAVAILABLE, str(exc), logging.WARNING)
            return None

    async def view(self, node: Node, cluster: ClusterView | None) -> PlatformView:
        """The platform's view; a controller-only node is ready only when the KRaft quorum
        says it is caught up (it has no BrokerState that could say so)."""
        view = await self.platform_view(node)
        # Without the quorum its readiness cannot be judged; the quorum check that every
        # controller restart needs then holds it back anyway.
        if (
            view.ready
            and node.is_controller
            and not node.is_broker
            and cluster is not None
            and cluster.quorum is not None
        ):
            caught_up = voter_caught_up(
                node.node_id, cluster.quorum, cluster.quorum_fetch_timeout_ms
            )
            view = replace(view, ready=caught_up)
        return view

    async def platform_view(self, node: Node) -> PlatformView:
        """The platform's own view of `node`, through an outage of its API (`through_outage`)."""
        return await self.through_outage(lambda: self.platform.observe(node))

    async def through_outage(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call`, asked again every `outage_retry` seconds while the platform's API does not
        answer, for up to `outage_limit` seconds from the first failure; then its error.

        The lease's rule (`roll.lease.keep_renewed`) for every other call to that API: a roll
        that could not renew its lease for the lease's duration stops anyway, so an API that
        answers again within it costs the roll nothing, and one that does not fails it once,
        naming the call. Said once when it begins and once when it ends."""
        began: float | None = None
        while True:
            try:
                result = await call()
            except PlatformUnavailable as exc:
                now = self._clock()
                began = now if began is None else began
                if now - began + self.outage_retry >= self.outage_limit:
                    raise
                reason = (
                    f"{exc}; asking again every {self.outage_retry:g}s for up to "
                    f"{self.outage_limit:g}s (the roll lease's duration)"
                )
                self.events.say(
                    None, "platform", Event.PLATFORM_UNAVAILABLE, reason, logging.WARNING
                )
                await self._sleep(self.outage_retry)
                continue
            if began is not None:
                waited = self._clock() - began
                self.events.say(
                    None,
                    "platform",
                    Event.PLATFORM_UNAVAILABLE,
                    f"the platform's API answers again, after {waited:.0f}s",
                    seconds=round(waited, 3),
                )
            return result

    async def views(
        self, nodes: Sequence[Node], cluster: ClusterView | None
    ) -> dict[str, PlatformView]:
        return {n.name: await self.view(n, cluster) for n in nodes}
