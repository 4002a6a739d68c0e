"""The roll's looks at its nodes (`roller.py` runs them): its first look at each (taken, left
out, held, or a restart on record found again by identity), a poll of the pending nodes in roll
order, and a look at the restart on its way back. Each look observes, steps the node's record
(`node.step`), says what it means (`voice`) and hands the effect to the applier (`effects`, or a
plan's `planning.Planned`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import ClusterView, Node, PlatformView, kafka_build
from rollguard.roller.roll.effects import Effects, Group
from rollguard.roller.roll.gates.keeper import GateKeeper
from rollguard.roller.roll.node.actions import Defer
from rollguard.roller.roll.node.outcome import Do, Effect, Outcome, Seen
from rollguard.roller.roll.node.record import How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.node.speech import deferred, held_at_gates
from rollguard.roller.roll.node.step import restarted, step
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.planning import Planned
from rollguard.roller.roll.rules.batch import Batch, batchable, next_batch
from rollguard.roller.roll.rules.budgets import SafetyWait
from rollguard.roller.roll.rules.safety import roll_order
from rollguard.roller.roll.rules.settings import RollFailed, RollSettings
from rollguard.roller.roll.stores.journal import RollRecord
from rollguard.roller.roll.voice import Voice, Wall, now_text
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)


class Looks:
    """The looks of one roll (or one plan): what they share between two looks is the nodes,
    the restart on its way back (`group`) and --safety-wait's budget."""

    def __init__(
        self,
        observer: Observer,
        agents: AgentClient,
        voice: Voice,
        gates: GateKeeper,
        effects: Effects,
        settings: RollSettings,
        *,
        clock: Callable[[], float],
        wall: Wall,
        sleep: Callable[[float], Awaitable[object]],
        revisions: bool,
    ) -> None:
        self.observer = observer
        self.agents = agents
        self.voice = voice
        self.gates = gates
        self.effects = effects
        self.apply: Effects | Planned = effects  # a plan's: its effects noted, not applied
        self.settings = settings
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._revisions = revisions  # an inventory has none
        self._nodes: dict[str, Node] = {}
        self.group: Group | None = None  # the restart on its way back
        self.waiting = SafetyWait()  # --safety-wait, while nothing restarts

    def target(self) -> dict[str, str]:
        """The roll's target version as an event's figure (`kafkaVersion`), when it has one."""
        version = self.settings.kafka_version
        return {"kafkaVersion": version} if version is not None else {}

    # ---- the first look -----------------------------------------------------------------------

    async def first_look(self, nodes: list[Node], record: RollRecord) -> list[tuple[Node, Outcome]]:
        """Each node's first look in this roll, its outcome (nothing applied yet: what the roll
        cannot do stops it here): taken, left out or held. A settled node of a resumed roll is
        passed by; a restart on record is judged by identity, and a node that did restart is
        waited for (the restart on its way back, `group`), one that did not is taken again."""
        self._nodes = {n.name: n for n in nodes}
        resumed = Group([], resumed=True)
        looks: list[tuple[Node, Outcome]] = []
        for node in nodes:
            found = record.nodes.get(node.name)
            if found is not None and found.phase.settled:
                continue
            if (
                found is not None
                and found.how is How.RESTART  # a live step on record is taken again
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
            self.group = Group(resumed.members, resumed=True)
            self.observer.restarting = ", ".join(resumed.members)
        stops = [(n, o.effect) for n, o in looks if o.effect.do in (Do.FAIL_ROLL, Do.REFUSE)]
        if self.apply.dry:  # a plan says each, node by node
            for node, effect in stops:
                self.apply.fail(node, effect.reason)
            return looks
        for node, effect in stops:  # a broker that cannot be compared: the roll fails (exit 1)
            if effect.do is Do.FAIL_ROLL:
                self.apply.fail(node, effect.reason)
        if refused := [e.reason for _, e in stops if e.do is Do.REFUSE]:  # exit 2, nothing done
            raise ConfigError(
                "the desired configuration cannot take effect by a roll: " + "; ".join(refused)
            )
        return looks

    async def _take(self, node: Node) -> Outcome:
        view = await self.observer.platform_view(node)
        running = None
        if self.settings.kafka_version is not None:  # what it runs, to compare with the target
            running = kafka_build(await self.agents.ask(node))
        configs = self.effects.configs  # the desired configurations, when given
        plan = configs.plan.node(node.name) if configs is not None else None
        refused = configs.refused.get(node.name) if configs is not None else None
        unknown = configs.unknown.get(node.name) if configs is not None else None
        self.apply.saw(node, view)
        seen = Seen(
            node,
            self._clock(),
            now_text(self._wall),
            view=view,
            running=running,
            config=plan,
            refused=refused,
            unknown=unknown,
            revisions=self._revisions,
        )
        return step(NodeRecord(node.name), seen, self.settings)

    async def apply_first(self, node: Node, outcome: Outcome, record: RollRecord) -> None:
        record.nodes[node.name] = outcome.record
        effect = outcome.effect
        if effect.do in (Do.LEAVE_OUT, Do.HOLD):
            await self.apply.leave_out(node, effect.reason, record, held=effect.do is Do.HOLD)

    def pending(self, record: RollRecord) -> list[Node]:
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

    async def follow(self, group: Group, record: RollRecord) -> None:
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
                await self.effects.back(node, effect.reason, record, **self.target())
            elif outcome.record.phase is Phase.FAILED:  # up, on another version: on record
                await self.effects.failed(record)
                if not group.resumed:
                    group.failures.append(effect.reason)
                else:  # on resume: taken again now, as any failed node of a resumed roll
                    outcome = await self._take(node)
                    await self.apply_first(node, outcome, record)
            else:
                group.failures.append(effect.reason)
            if group.waiting:
                return
        self.group = None
        self.observer.restarting = ""
        self.waiting.reset()
        if (failed := group.failed()) is not None:
            raise failed
        if group.number is not None:
            members = [self._nodes[m] for m in group.members]
            await self.effects.elect_preferred(members, group.number)

    # ---- a poll of the pending nodes ----------------------------------------------------------

    async def poll(self, record: RollRecord, cluster: ClusterView | None) -> bool:
        """One look at every pending node, in roll order, each step's effect applied: True when
        a restart (one node, or a batch) began, which ends the poll (the cluster changed: look
        again). Raises RollFailed when nothing became safe for --safety-wait."""
        pending = self.pending(record)
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
            self.apply.saw(node, view)
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
                self.apply.fail(node, effect.reason)
            elif effect.do is Do.LEAVE_OUT:
                await self.apply.leave_out(node, effect.reason, record, held=False)
            elif effect.do is Do.BATCH:
                candidates.append(node)
                self.apply.candidate(node)
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
            if not self.apply.dry:
                break
            candidates = [c for c in candidates if c not in members]
        if gated:
            at_gates, asked_for = self.gates.hold([n for n, _ in gated])
            for node, effect in gated:
                at = held_at_gates(record.nodes[node.name], self._clock(), at_gates.get(node))
                record.nodes[node.name] = at
                self.apply.gated(node, effect, self.gates.now)
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
        group = await self.apply.start(members, views, cluster, record, effect, batch)
        if group is None:  # a plan: noted, not begun
            return False
        how = How.LIVE if effect.do is Do.CONFIGURE else How.RESTART
        now = self._clock()
        for name in group.members:
            found = record.nodes[name]
            record.nodes[name] = restarted(
                found, self._nodes[name], self.settings, now, found.instance, found.base, how=how
            )
        self.group = group
        self.observer.restarting = ", ".join(group.members)
        return True

    def _safety_wait(self, deferrals: Mapping[Node, Waiting], waiting_nodes: bool) -> None:
        """Nothing restarted in this poll: the --safety-wait budget runs (`SafetyWait`)."""
        if waiting_nodes:
            self.waiting.reset()
            return
        held = [
            (n.name, w.reason, sum(b.deficit for b in w.blockers)) for n, w in deferrals.items()
        ]
        if (why := self.waiting.spent(self._clock(), held, self.settings.safety_wait)) is not None:
            raise RollFailed(why)
