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
from rollguard.roller.model import ClusterView, Node, PlatformView, kafka_build
from rollguard.roller.platform import Platform
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.effects import Effects, Group, LeaderElection
from rollguard.roller.roll.gates.keeper import GateKeeper, Gates
from rollguard.roller.roll.node.actions import Defer
from rollguard.roller.roll.node.outcome import Do, Effect, Outcome, Seen
from rollguard.roller.roll.node.record import How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.node.speech import deferred, held_at_gates
from rollguard.roller.roll.node.step import restarted, step
from rollguard.roller.roll.observer import ClusterObserver, Observer
from rollguard.roller.roll.planning import PlanEntry, Planned, check_names
from rollguard.roller.roll.preflight import preflight
from rollguard.roller.roll.rules.batch import Batch, batchable, next_batch
from rollguard.roller.roll.rules.budgets import SafetyWait
from rollguard.roller.roll.rules.safety import roll_order
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollFailed, RollSettings
from rollguard.roller.roll.stores.journal import (
    JournalStore,
    RollRecord,
    RollState,
    nothing_to_resume,
    resumed_target,
)
from rollguard.roller.roll.stores.lease import Lease, LeaseLost, release, renewing
from rollguard.roller.roll.voice import EventLog, Progress, Voice, Wall, now_text, utc_now
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
        self._nodes: dict[str, Node] = {}
        self._group: Group | None = None  # the restart on its way back
        self._waiting = SafetyWait()  # --safety-wait, while nothing restarts
        self._revisions = getattr(platform, "revisions", True)  # an inventory has none
        self._apply: Effects | Planned = self.effects  # `plan`: the effects noted, not applied

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
        voice, gates = self.voice, self.gates
        quiet = EventLog(None, "plan", quiet=True)
        self._apply, self.voice = planned, Voice(quiet)
        self.gates = GateKeeper(gates.gates, self.observer, self.voice.progress, quiet)
        try:
            for node, outcome in await self._first_look(nodes, roll):
                await self._apply_first(node, outcome, roll)
            cluster = await self.observer.cluster()
            if cluster is None:
                raise RollFailed(
                    "the Kafka Admin API cannot be reached: no plan can be made without the cluster"
                )
            await self._poll(roll, cluster)
        finally:
            self._apply, self.voice, self.gates = self.effects, voice, gates
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
        self.events.write(None, Event.ROLL_START, "resumed" if resume else "", **self._target())
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
        for node, outcome in await self._first_look(nodes, record):
            await self._apply_first(node, outcome, record)
        while self._pending(record) or self._group is not None:
            if self._group is not None:
                await self._follow(self._group, record)
            elif await self._poll(record, await self.observer.cluster()):
                self._waiting.reset()
            else:
                await self._sleep(self.settings.poll_interval)
        result = RollResult.of(record.roll_id, RollState.COMPLETED, record.nodes)
        if result.held:
            record.reason = f"held for later: {', '.join(result.held)}"
        return result

    # ---- the first look -----------------------------------------------------------------------

    async def _first_look(
        self, nodes: list[Node], record: RollRecord
    ) -> list[tuple[Node, Outcome]]:
        """Each node's first look in this roll: a settled node of a resumed roll passed by, a
        restart on record judged by identity (None: waited for), every other one taken, left
        out or held. Nothing is applied yet: what the roll cannot do stops it here."""
        self._nodes = {n.name: n for n in nodes}
        resumed = Group([], resumed=True)
        looks: list[tuple[Node, Outcome]] = []
        for node in nodes:
            found = record.nodes.get(node.name)
            if found is not None and found.phase.settled:
                continue
            on_record = found is not None and found.how is How.RESTART
            if (
                on_record
                and found is not None
                and found.phase is not Phase.FAILED
                and await self.effects.on_record(node, found.instance)  # it did restart
            ):
                resumed.members.append(node.name)
                continue
            looks.append((node, await self._take(node)))
        if resumed.members:  # each waited for from its identity before its restart
            now = self._clock()
            for name in resumed.members:
                found = record.nodes[name]
                record.nodes[name] = restarted(
                    found, self._nodes[name], self.settings, now, found.instance, found.base
                )
            self._group = Group(resumed.members, resumed=True)
        refused = [o.effect.reason for _, o in looks if o.effect.do is Do.REFUSE]
        for node, outcome in looks:
            if outcome.effect.do is Do.FAIL_ROLL or outcome.effect.do is Do.REFUSE:
                self._apply.fail(node, outcome.effect.reason)
        if refused:
            raise ConfigError(
                "the desired configuration cannot take effect by a roll: " + "; ".join(refused)
            )
        return looks

    async def _take(self, node: Node) -> Outcome:
        view = await self.observer.platform_view(node)
        running = None
        if self.settings.kafka_version is not None:  # what it runs, to compare with the target
            running = kafka_build(await self.agents.ask(node))
        plan = self.configs.plan.node(node.name) if self.configs is not None else None
        self._apply.saw(node, view)
        refused = self.configs.refused.get(node.name) if self.configs is not None else None
        seen = Seen(
            node,
            self._clock(),
            now_text(self._wall),
            view=view,
            running=running,
            config=plan,
            refused=refused,
            revisions=self._revisions,
        )
        return step(NodeRecord(node.name), seen, self.settings)

    async def _apply_first(self, node: Node, outcome: Outcome, record: RollRecord) -> None:
        record.nodes[node.name] = outcome.record
        effect = outcome.effect
        if effect.do in (Do.LEAVE_OUT, Do.HOLD):
            await self._apply.leave_out(node, effect.reason, record, held=effect.do is Do.HOLD)

    def _pending(self, record: RollRecord) -> list[Node]:
        """The nodes taken and not yet restarted, in the platform's order."""
        return [
            node
            for name, node in self._nodes.items()
            if (r := record.nodes.get(name)) is not None
            and r.taken
            and not r.restarted
            and r.phase is not Phase.FAILED
        ]

    # ---- a restart on its way back ------------------------------------------------------------

    async def _follow(self, group: Group, record: RollRecord) -> None:
        """One look at the restart on its way back: at its first member not yet back (a batch's
        in order), what its phase needs. A member that failed stops the roll once the others
        are back (stopping while they restart would leave their partitions short)."""
        if group.waiting:
            name = group.waiting[0]
            node, found = self._nodes[name], record.nodes[name]
            view, answer, cluster = None, None, None
            if not found.watching_recovery:
                cluster = await self.observer.cluster()
            if found.catch_up is None and not found.watching_recovery:
                view = await self.observer.view(node, cluster)
            if found.asks_agent:
                answer = await self.agents.ask(node)
            seen = Seen(node, self._clock(), self.effects.now(), view, answer, cluster)
            outcome = step(found, seen, self.settings)
            self.voice.speak(node, outcome.said)
            record.nodes[name] = outcome.record
            effect = outcome.effect
            if effect.do in (Do.LOOK, Do.LOOK_NOW):
                if effect.do is Do.LOOK:
                    await self._sleep(self.settings.poll_interval)
                return
            group.waiting.remove(name)
            if effect.do is Do.BACK:
                await self.effects.back(node, effect.reason, record, **self._target())
            elif outcome.record.phase is Phase.FAILED:  # up, on another version: on record
                await self.effects.failed(record)
                if not group.resumed:
                    group.failures.append(effect.reason)
                else:  # on resume: taken again now, as any failed node of a resumed roll
                    outcome = await self._take(node)
                    await self._apply_first(node, outcome, record)
            else:
                group.failures.append(effect.reason)
            if group.waiting:
                return
        self._group = None
        self._waiting.reset()
        if (failed := group.failed()) is not None:
            raise failed
        if group.number is not None:
            members = [self._nodes[m] for m in group.members]
            await self.effects.elect_preferred(members, group.number)

    # ---- a poll of the pending nodes ----------------------------------------------------------

    async def _poll(self, record: RollRecord, cluster: ClusterView | None) -> bool:
        """One look at every pending node, in roll order, each step's effect applied: True when
        a restart (one node, or a batch) began, which ends the poll (the cluster changed: look
        again). Raises RollFailed when nothing became safe for --safety-wait."""
        pending = self._pending(record)
        views = await self.observer.views(pending, cluster)
        ready = {n.node_id: views[n.name].ready for n in pending}
        recovering: list[str] = []  # in log recovery: while any is, nothing else restarts
        starting: list[str] = []  # ... or on its way back (STARTING, RECOVERY), the same
        candidates: list[Node] = []  # ready brokers, for a batch once the others are handled
        gated: list[tuple[Node, Effect]] = []  # may restart, but a gate is closed
        waiting_nodes = False  # a node waited for within a budget of its own
        s = self.settings
        deferrals: dict[Node, Waiting] = {}  # held back by a rule, within --safety-wait
        for node in roll_order(pending, ready, cluster.active_controller if cluster else None):
            view = views[node.name]
            self._apply.saw(node, view)
            answer = None if view.ready else await self.agents.ask(node)
            found = record.nodes[node.name]
            running = kafka_build(answer) if answer is not None else None
            if found.version_unknown and view.ready:  # looked at again before its restart
                running = kafka_build(await self.agents.ask(node))
            seen = Seen(
                node,
                self._clock(),
                self.effects.now(),
                view,
                answer,
                cluster,
                running=running,
                revisions=self._revisions,
                recovering=tuple(recovering),
                starting=tuple(starting),
                batching=s.max_batch_size > 1 and batchable(node, view),
            )
            outcome = step(found, seen, s)
            self.voice.speak(node, outcome.said)
            record.nodes[node.name] = outcome.record
            effect, waiting = outcome.effect, outcome.record.waiting
            if effect.do is Do.FAIL_ROLL:
                self._apply.fail(node, effect.reason)
            elif effect.do is Do.LEAVE_OUT:
                await self._apply.leave_out(node, effect.reason, record, held=False)
            elif effect.do is Do.BATCH:
                candidates.append(node)
                self._apply.candidate(node)
            elif effect.do in (Do.RESTART, Do.CONFIGURE):
                if await self.gates.closed(ask=not gated):
                    gated.append((node, effect))
                elif await self._start([node], views, cluster, record, effect):
                    return True
            elif outcome.record.phase is Phase.RECOVERING:
                recovering.append(node.name)
                waiting_nodes = True
            elif waiting is not None and waiting.deferral:
                deferrals[node] = waiting
            elif waiting is not None:
                if waiting.starting:
                    starting.append(node.name)
                waiting_nodes = True
        while candidates:  # a `plan` goes on past the first batch: it shows every one
            batch = next_batch(
                candidates,
                cluster,
                max_size=s.max_batch_size,
                rack_aware=s.rack_aware,
                explain=False,
            )
            if batch.batch is None:
                for held in batch.held:
                    if held.blockers:
                        deferrals[held.node] = self._defer(
                            record, held.node, Defer(held.reason, held.blockers)
                        )
                break
            members = list(batch.batch.members)
            effect = Effect(Do.RESTART, batch.batch.reason)
            if await self.gates.closed(ask=not gated):
                gated += [(m, effect) for m in members]
            elif await self._start(members, views, cluster, record, effect, batch.batch):
                return True
            if not self._apply.dry:
                break
            candidates = [c for c in candidates if c not in members]
        if gated:
            at_gates, asked_for = self.gates.hold([n for n, _ in gated])
            for node, effect in gated:
                at = held_at_gates(record.nodes[node.name], self._clock(), at_gates.get(node))
                record.nodes[node.name] = at
                self._apply.gated(node, effect, self.gates.now)
                if at.waiting is not None and at.waiting.blockers:
                    deferrals[node] = at.waiting
            waiting_nodes = asked_for or waiting_nodes
        self._safety_wait(deferrals, waiting_nodes)
        for node, waiting in deferrals.items():
            self.voice.progress(node, f"waiting until safe: {waiting.reason}", None)
        return False

    def _defer(self, record: RollRecord, node: Node, defer: Defer) -> Waiting:
        """A node the batch rule holds back now, as any deferral."""
        seen = Seen(node, self._clock(), self.effects.now())
        outcome = deferred(record.nodes[node.name], seen, defer)
        self.voice.speak(node, outcome.said)
        record.nodes[node.name] = outcome.record
        assert outcome.record.waiting is not None
        return outcome.record.waiting

    async def _start(
        self,
        members: list[Node],
        views: Mapping[str, PlatformView],
        cluster: ClusterView | None,
        record: RollRecord,
        effect: Effect,
        batch: Batch | None = None,
    ) -> bool:
        """A restart (one node, or a batch), or a live step: True once it began; every member
        whose command worked is waited for from its identity before it."""
        group = await self._apply.start(members, views, cluster, record, effect, batch)
        if group is None:  # a plan: noted, not begun
            return False
        how = How.LIVE if effect.do is Do.CONFIGURE else How.RESTART
        now = self._clock()
        for name in group.members:
            found = record.nodes[name]
            record.nodes[name] = restarted(
                found, self._nodes[name], self.settings, now, found.instance, found.base, how=how
            )
        self._group = group
        return True

    def _safety_wait(self, deferrals: Mapping[Node, Waiting], waiting_nodes: bool) -> None:
        """Nothing restarted in this poll: the --safety-wait budget runs (`SafetyWait`)."""
        if waiting_nodes:
            self._waiting.reset()
            return
        held = [
            (n.name, w.reason, sum(b.deficit for b in w.blockers)) for n, w in deferrals.items()
        ]
        if (why := self._waiting.spent(self._clock(), held, self.settings.safety_wait)) is not None:
            raise RollFailed(why)

    def _target(self) -> dict[str, str]:
        """The roll's target version as an event's figure (`kafkaVersion`), when it has one."""
        version = self.settings.kafka_version
        return {"kafkaVersion": version} if version is not None else {}


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
