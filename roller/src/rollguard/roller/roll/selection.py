"""Which nodes a roll takes (`rules.taking.wanted`: --skip, --only, --all, a node out of date,
one already on the target version) and those it leaves out, on record; --hold keeps a node for
a later `roll --resume`. With a target version, a node whose version is not known when the
roll starts (not started yet) is taken and looked at again just before its restart.
"""

from __future__ import annotations

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import Node, PlatformView, kafka_build
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.planning import HELD
from rollguard.roller.roll.restarts import Restarts, RollResult
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.roller.roll.rules.taking import NO_REVISION, UP_TO_DATE, wanted
from rollguard.roller.roll.stores.journal import RollRecord
from rollguard.shared.wire import KafkaBuild


class Selection:
    def __init__(
        self,
        observer: Observer,
        agents: AgentClient,
        restarts: Restarts,
        settings: RollSettings,
        *,
        revisions: bool,
    ) -> None:
        self.observer = observer
        self.agents = agents
        self.restarts = restarts
        self.settings = settings
        self.revisions = revisions  # an inventory has none: with a target, what each runs decides
        self._version_unknown: set[str] = set()  # taken without knowing what they run

    async def take(self, node: Node, record: RollRecord, result: RollResult) -> bool:
        """Whether the roll takes `node`; one it leaves out is on record."""
        view = await self.observer.platform_view(node)
        taken, why, running = await self._wanted(node, view)
        held = taken and node.name in self.settings.hold
        if not taken or held:
            await self.restarts.leave_out(node, HELD if held else why, record, result, held=held)
            return False
        if self.settings.kafka_version is not None and running is None:
            self._version_unknown.add(node.name)  # looked at again before its restart
        return True

    async def on_target(
        self, node: Node, view: PlatformView, record: RollRecord, result: RollResult
    ) -> bool:
        """True for a node about to be restarted that the roll took without knowing what it
        ran (not started at the roll's start: its agent says its version once it has) and that
        now says it runs the target: left out, as those known to run it were."""
        if node.name not in self._version_unknown:
            return False
        self._version_unknown.discard(node.name)
        taken, why, _ = await self._wanted(node, view)
        if not taken:
            await self.restarts.leave_out(node, why, record, result)
        return not taken

    async def _wanted(self, node: Node, view: PlatformView) -> tuple[bool, str, KafkaBuild | None]:
        """`taking.wanted` for `node` now, and the Kafka it runs by its agent (asked only when
        the roll has a target version to compare)."""
        running = None
        if self.settings.kafka_version is not None:
            running = kafka_build(await self.agents.ask(node))
        taken, why = wanted(node, view, self.settings, revisions=self.revisions, running=running)
        configs = self.restarts.configs  # with desired configurations: their plan
        plan = configs.plan.node(node.name) if configs is not None else None
        if plan is not None and why in (NO_REVISION, UP_TO_DATE):  # its configuration decides
            taken, why = plan.changes, plan.why()
        elif taken and configs is not None:
            configs.restarting.add(node.name)  # restarted for another reason
        return taken, why, running
