"""A plan as data, for library users (an operator, a notebook): what a roll would do now.

`plan()` observes the cluster, the platform and the agents exactly as `rollguard plan` does, and
returns the entries; it writes nothing (no journal, no events, no lease), so it is safe to call
from a reconcile loop as often as the cluster can bear the Admin API calls.
"""

from __future__ import annotations

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.platform import Platform
from rollguard.roller.roll.journal import EventLog, RollRecord
from rollguard.roller.roll.roller import ClusterObserver, PlanEntry, Roller, RollSettings
from rollguard.shared.retry import RetryPolicy


class _NoJournal:
    """A journal store that keeps nothing: planning never writes one."""

    def load(self, roll_id: str) -> RollRecord | None:
        return None

    def save(self, record: RollRecord) -> None:
        raise AssertionError("planning wrote to the roll journal")


async def plan(
    platform: Platform,
    observe_cluster: ClusterObserver,
    agents: AgentClient,
    settings: RollSettings | None = None,
    *,
    policy: RetryPolicy | None = None,
) -> list[PlanEntry]:
    """What a roll with `settings` would do now, node by node in roll order, with reasons.

    `observe_cluster` is a `KafkaObserver(...).observe`; `agents` an `AgentClient` with the
    roller's client certificate. Raises `RollFailed` when the cluster cannot be observed (a plan
    without it would be a guess) and `ConfigError` for names in `settings.only`/`skip` that no
    node has. `policy` retries the Admin API's transient errors (default: `RetryPolicy()`)."""
    roller = Roller(
        platform,
        observe_cluster,
        agents,
        _NoJournal(),
        EventLog(None, "plan"),
        settings=settings or RollSettings(),
        policy=policy,
    )
    return await roller.plan()
