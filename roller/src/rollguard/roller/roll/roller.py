"""The roll loop, on one page: observe, step each node's record, apply the effect, record.

    take the cluster's lease; ask every agent once (a refused certificate, an untrusted agent
    or a skewed clock is a configuration error: nothing is restarted)
    the first look: each node taken, left out or held (`node.taking`), a restart on record
      found again by identity (a resumed roll); what the roll cannot do is refused now
    each poll: a restart on its way back? a look at each of its nodes; else observe Kafka,
      order the pending nodes, and for each: view, agent -> step (node/step.py) -> apply;
      a restart ends the poll; no single restart: a batch of ready brokers (--max-batch-size)
    a poll that restarts nothing is not a failure: the roller keeps observing while the cluster
    makes progress, and fails only after --safety-wait without any, naming what never became safe

Each node has one record (`node.record.NodeRecord`) from the first look to the end: the
journal's (`RollRecord.nodes`), which one pure `step` moves at each look, every budget included,
and whose `Outcome` says the one effect to apply and what the look says. Around the loop:
`observer.py` sees (Kafka, the platform; `AgentClient.ask` each agent), `voice.py` says,
`effects.py` acts and writes the journal (the intent before every restart, every outcome after
it). `plan` is the roll's first look with its effects noted, not applied (`planning.Planned`).

The one rule above all others: a broker its agent reports in RECOVERY is never restarted, and a
broker whose agent cannot be read is unknown, never "not recovering". The lease is renewed
beside the loop by `lease.renewing`: a failed renewal is retried until the lease could have
expired; then, or when another holder takes it, the roll stops with the journal saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import Node
from rollguard.roller.platform import Platform
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.effects import Effects, LeaderElection
from rollguard.roller.roll.gates.keeper import GateKeeper, Gates
from rollguard.roller.roll.looks import Looks
from rollguard.roller.roll.node.record import How, NodeRecord, Phase
from rollguard.roller.roll.node.step import recovery_budget_of
from rollguard.roller.roll.observer import ClusterObserver, Observer
from rollguard.roller.roll.planning import PlanEntry, Planned, check_names
from rollguard.roller.roll.preflight import preflight
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollFailed, RollSettings
from rollguard.roller.roll.stores.journal import (
    JournalStore,
    RollRecord,
    RollState,
    nothing_to_resume,
    resumed_target,
)
from rollguard.roller.roll.stores.lease import Lease, LeaseLost, release, renewing
from rollguard.roller.roll.voice import EventLog, Progress, Voice, Wall, utc_now
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.retry import RetryPolicy

__all__ = ["RollResult", "Roller"]

logger = logging.getLogger(__name__)
NO_LEASE = contextlib.nullcontext()


@dataclass(frozen=True)
class RollResult:
    """A roll's outcome, read from its nodes' records: the whole roll's, a resumed one's
    earlier runs included."""

    roll_id: str
    state: RollState
    restarted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # left out: `left_out` says why
    held: list[str] = field(default_factory=list)  # --hold: for a later `roll --resume`
    configured: list[str] = field(default_factory=list)  # changed live, not restarted
    left_out: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, roll_id: str, state: RollState, nodes: Mapping[str, NodeRecord]) -> RollResult:
        done = [r for r in nodes.values() if r.phase is Phase.DONE]
        left = [r for r in nodes.values() if r.phase is Phase.LEFT_OUT]
        return cls(
            roll_id,
            state,
            restarted=[r.name for r in done if r.how is How.RESTART],
            skipped=[r.name for r in left],
            held=[r.name for r in nodes.values() if r.phase is Phase.HELD],
            configured=[r.name for r in done if r.how is How.LIVE],
            left_out={r.name: r.why for r in left},
        )


class Roller:
    def __init__(
        self,
        platform: Platform,
        observe_cluster: ClusterObserver | None,
        agents: AgentClient,
        journal: JournalStore,
        events: EventLog,
        *,
        settings: RollSettings,
        policy: RetryPolicy | None = None,
        lease: Lease | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Wall = utc_now,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_progress: Progress | None = None,
        elect_leaders: LeaderElection | None = None,
        gates: Gates | None = None,
        configs: LiveConfigs | None = None,
    ) -> None:
        """`clock` measures every wait (monotonic seconds); `wall` stamps the journal."""
        self.settings = settings  # the roll's, set once: its waits and rules read them here
        self.platform = platform
        self.agents = agents
        self.journal = journal
        self.events = events
        self.lease = lease
        # the lease's rule for every call to the platform's API: see Observer.through_outage
        outage = lease.duration if lease is not None else 30.0
        self.observer = Observer(
            platform,
            observe_cluster,
            events,
            policy=policy,
            sleep=sleep,
            clock=clock,
            outage_limit=outage,
        )
        self.voice = Voice(events, on_progress)
        self.effects = Effects(
            platform,
            self.observer,
            self.voice,
            journal,
            settings,
            clock=clock,
            wall=wall,
            sleep=sleep,
            elect_leaders=elect_leaders,
            configs=configs,
        )
        self.gates = GateKeeper(gates or Gates(), self.observer, self.voice.progress)
        self._clock = clock
        self._wall = wall
        self._sleep = sleep

    def _looks(self, voice: Voice, gates: GateKeeper) -> Looks:
        """The looks of one roll, or of one plan (its own voice and gates: it says nothing)."""
        return Looks(
            self.observer,
            self.agents,
            voice,
            gates,
            self.effects,
            self.settings,
            clock=self._clock,
            wall=self._wall,
            sleep=self._sleep,
            revisions=getattr(self.platform, "revisions", True),  # an inventory has none
        )

    def recovery_budget(self, node: str) -> float:
        """How long `node`'s log recovery is waited for (its budget from history, or
        --max-recovery-wait)."""
        return recovery_budget_of(node, self.settings)

    @property
    def configs(self) -> LiveConfigs | None:
        """The desired configurations' live steps, and what the roll refuses of them."""
        return self.effects.configs

    # ---- plan: the roll's first look, its effects noted ---------------------------------------

    async def plan(self, *, check_agents: bool = True) -> list[PlanEntry]:
        """What a roll would do now, node by node in roll order, with why (`planning`): the
        roll's own first look and first poll, their effects noted and none applied, nothing
        said; writes nothing. The agents are checked as a roll checks them first
        (`check_agents`): what would stop a roll stops the plan (exit 2). RollFailed when the
        cluster cannot be observed: a plan without it would be a guess."""
        nodes = await self.platform.nodes()
        check_names(nodes, self.settings)  # a name that does not exist: before any request
        if check_agents:
            await self._preflight(nodes)
        roll, planned = RollRecord("plan", ""), Planned()
        quiet = EventLog(None, "plan", quiet=True)  # a plan says nothing but what it returns
        voice = Voice(quiet)
        looks = self._looks(
            voice, GateKeeper(self.gates.gates, self.observer, voice.progress, quiet)
        )
        looks.apply = planned
        for node, outcome in await looks.first_look(nodes, roll):
            await looks.apply_first(node, outcome, roll)
        cluster = await self.observer.cluster()
        if cluster is None:
            raise RollFailed(
                "the Kafka Admin API cannot be reached: no plan can be made without the cluster"
            )
        await looks.poll(roll, cluster)
        return planned.entries(nodes, roll.nodes, cluster, self.settings)

    async def _preflight(self, nodes: list[Node]) -> None:
        """Never act blind: every agent answers over TLS, or the roll does not start."""
        force = self.settings.on_agent_unreachable == OnAgentUnreachable.FORCE
        await preflight(self.agents, nodes, self.settings.max_clock_skew, self.events, force=force)

    # ---- roll ---------------------------------------------------------------------------------

    async def roll(self, roll_id: str, *, resume: bool = False) -> RollResult:
        nodes = await self.platform.nodes()
        check_names(nodes, self.settings)
        record = await asyncio.to_thread(self.journal.load, roll_id) if resume else None
        if resume and record is None:
            raise nothing_to_resume(self.journal, roll_id)  # exit 2: nothing was done
        if record is not None and record.kafka_version != self.settings.kafka_version:
            # A resumed upgrade goes on to the same version (the CLI takes the journal's).
            target = resumed_target(record, self.settings.kafka_version)
            raise ConfigError(
                f"--resume {roll_id}: that roll is an upgrade to Kafka {target}; resume it "
                "with that target version"
            )
        if self.lease is not None:
            await self.lease.acquire()
        try:
            await self._preflight(nodes)
            if record is None:
                now = self.effects.now()
                record = RollRecord(roll_id, now, kafka_version=self.settings.kafka_version)
            result = await self._guarded(record, nodes, resume)
        except BaseException:
            await release(self.lease, failed=True)
            raise
        await release(self.lease, failed=False)
        return result

    async def _guarded(self, record: RollRecord, nodes: list[Node], resume: bool) -> RollResult:
        record.state, record.reason = RollState.RUNNING, ""
        started, save = self._clock(), self.effects.save
        await save(record)
        target = {"kafkaVersion": v} if (v := self.settings.kafka_version) is not None else {}
        self.events.write(None, Event.ROLL_START, "resumed" if resume else "", **target)
        try:
            try:
                renew, lease = self.settings.lease_renew_interval, self.lease
                keep = (
                    renewing(lease, renew, sleep=self._sleep, clock=self._clock)
                    if lease
                    else NO_LEASE
                )
                async with keep:
                    result = await self._roll(record, nodes)
            except LeaseLost as exc:
                raise RollFailed(f"lost the roll lease, stopping: {exc}") from exc
        except RollguardError as exc:
            record.state, record.reason = RollState.FAILED, str(exc)
            try:
                await save(record)
            except RollguardError as also:
                logger.error("the roll failed and its journal cannot say so: %s", also)
            self.events.write(None, Event.ROLL_FAILED, str(exc), seconds=self._clock() - started)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.state, record.reason = RollState.INTERRUPTED, "interrupted"
            await save(record)
            self.events.write(None, Event.ROLL_INTERRUPTED, seconds=self._clock() - started)
            raise
        record.state = RollState.COMPLETED
        await save(record)
        self.events.write(None, Event.ROLL_COMPLETED, seconds=self._clock() - started)
        return result

    async def _roll(self, record: RollRecord, nodes: list[Node]) -> RollResult:
        looks = self._looks(self.voice, self.gates)
        for node, outcome in await looks.first_look(nodes, record):
            await looks.apply_first(node, outcome, record)
        while looks.pending(record) or looks.group is not None:
            if looks.group is not None:
                await looks.follow(looks.group, record)
            elif await looks.poll(record, await self.observer.cluster()):
                looks.waiting.reset()
            else:
                await self._sleep(self.settings.poll_interval)
        result = RollResult.of(record.roll_id, RollState.COMPLETED, record.nodes)
        if result.held:
            record.reason = f"held for later: {', '.join(result.held)}"
        return result


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
    without it would be a guess), and `ConfigError` for names in `settings.only`/`skip` that no
    node has.
    `policy` retries the Admin API's transient errors (default: `RetryPolicy()`)."""
    from rollguard.roller.roll.roller import Roller  # the roll's own first look

    roller = Roller(
        platform,
        observe_cluster,
        agents,
        _NoJournal(),
        EventLog(None, "plan"),
        settings=settings or RollSettings(),
        policy=policy,
    )
    return await roller.plan(check_agents=False)


class _NoJournal:
    """A plan writes nothing."""

    def load(self, roll_id: str) -> None:
        return None

    def save(self, record: object) -> None:
        raise AssertionError("a plan writes no journal")

    def where(self, roll_id: str) -> str:
        return "nowhere (a plan)"

    def rolls(self) -> list[str] | None:
        return []
