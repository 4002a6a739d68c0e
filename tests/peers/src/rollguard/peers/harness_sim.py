"""The roll harness on the simulator (`harness`): `SimRoll`, rolls of a `sim.SimCluster` by the
production roller in process (`sim.make_roller`), on the cluster's virtual clock.

    done = SimRoll(cluster).roll(max_batch_size=2)  # the flags as RollSettings, changed by name
    assert (done.returncode, done.stderr) == (0, "")  # 1 and why, had it failed
    assert done.journal["nodes"]["kafka-0"]["batch"] == 1  # its journal and events, read after
    assert SimRoll(cluster).restarted() == [...]  # the simulator's own log of restarts
    entries = SimRoll(cluster).entries()  # the roll's first look, as the roller's own entries

The simulator's peculiarities stay its own: its virtual clock (`cluster.clock`), its check of
every restart (`cluster.violations`), its restart log with each restart's moments (`cluster.log`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollguard.peers.harness import Done, read_events
from rollguard.peers.sim import SimCluster, SimPlatform, default_settings, make_roller, rolled
from rollguard.roller.agent_client import AgentClient
from rollguard.roller.roll.planning import plan_lines
from rollguard.roller.roll.rules.settings import RollSettings

if TYPE_CHECKING:
    from rollguard.roller.roll.configs.live import LiveConfigs
    from rollguard.roller.roll.planning import PlanEntry
    from rollguard.roller.roll.roller import Roller

__all__ = ["SimRoll"]


@dataclass(frozen=True)
class SimRoll:
    """Rolls of the simulator (`sim.SimCluster`) by the production roller in process, on the
    cluster's virtual clock (`cluster.clock`): a roll of hours takes a second. Its flags are a
    `RollSettings` (`settings`, the simulator's defaults otherwise), changed per roll by name
    (`roll(max_batch_size=2)`); its journal and events in `folder` (none: a folder of its own
    for each roll, gone after it, as a property test over many clusters needs)."""

    cluster: SimCluster
    folder: Path | None = None
    settings: RollSettings | None = None
    platform: Callable[[SimCluster, AgentClient, Path], SimPlatform] | None = None
    roll_id: str = "sim"
    configs: LiveConfigs | None = None  # the desired configurations' live steps, if any

    def roll(
        self, settings: RollSettings | None = None, *, resume: bool = False, **changes: Any
    ) -> Done:
        """The roll to its end: exit code 0, or 1 with why it failed as its stderr."""
        with self._folder() as folder:
            roller = self.roller(folder, settings, **changes)
            failure = asyncio.run(rolled(roller, self.roll_id, resume=resume))
            return Done((), 0 if failure is None else 1, "", failure or "",
                        read_events(folder / "events.jsonl"), self.journal(folder))  # fmt: skip

    def journal(self, folder: Path | None = None) -> Mapping[str, Any] | None:
        """The roll's journal in `folder` (else its own) as it is now (None: none there)."""
        where = folder or self.folder
        path = where / f"roll-{self.roll_id}.json" if where else None
        return json.loads(path.read_text()) if path and path.exists() else None

    def entries(
        self, settings: RollSettings | None = None, *, check_agents: bool = True, **changes: Any
    ) -> list[PlanEntry]:
        """The roll's first look as the roller's own entries (`Roller.plan`: the agents
        checked first, as `rollguard plan` does, unless `check_agents` is false: a node whose
        agent does not answer is then in the plan, held); nothing written in `folder`."""
        with tempfile.TemporaryDirectory() as folder:
            roller = self.roller(Path(folder), settings, **changes)

            async def planned() -> list[PlanEntry]:
                try:
                    return await roller.plan(check_agents=check_agents)
                finally:
                    await roller.agents.aclose()

            return asyncio.run(planned())

    def plan(
        self, settings: RollSettings | None = None, *, output: str = "text", **changes: Any
    ) -> Done:
        """`entries` as `rollguard plan` prints them (`output` "json": one object a line)."""
        entries = self.entries(settings, **changes)
        if output == "json":
            lines = [json.dumps(entry.to_json()) for entry in entries]
        else:
            lines = plan_lines(entries)
        return Done((), 0, "".join(f"{line}\n" for line in lines), "")

    def roller(self, folder: Path, settings: RollSettings | None = None, **changes: Any) -> Roller:
        """The production roller on the cluster (`sim.make_roller`), with these settings."""
        chosen = replace(settings or self.settings or default_settings(), **changes)
        return make_roller(
            self.cluster, folder, chosen, platform=self.platform, configs=self.configs
        )

    @contextlib.contextmanager
    def _folder(self) -> Iterator[Path]:
        if self.folder is not None:
            yield self.folder
            return
        with tempfile.TemporaryDirectory() as folder:
            yield Path(folder)

    def restarted(self) -> list[str]:
        """The simulator's own log of restarts (`SimCluster.log`), in order."""
        return [entry.name for entry in self.cluster.log]
