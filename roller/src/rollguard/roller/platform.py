"""Where nodes come from and how they are restarted: one interface, two implementations.

`InventoryPlatform` (VMs, bare metal) reads a YAML file and restarts with a command;
`rollguard.roller.kubernetes.KubernetesPlatform` lists pods and deletes them. The roll loop only
sees `Platform`, so the decisions do not know which one they are working with.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.host_commands import CommandError, group_alive, run_command
from rollguard.roller.inventory import InventoryNode, load_inventory
from rollguard.roller.model import BROKER_STATE_MISSING, AgentReport, Node, PlatformView
from rollguard.shared.errors import NodeFailed, RetryLater
from rollguard.shared.files import atomic_write
from rollguard.shared.wire import format_time

__all__ = [
    "InventoryNode",
    "InventoryPlatform",
    "Platform",
    "PlatformUnavailable",
    "RestartError",
    "load_inventory",
]

logger = logging.getLogger(__name__)


class RestartError(NodeFailed):
    """A restart could not be carried out (the command failed, the API refused)."""


class PlatformUnavailable(RetryLater):
    """The platform's API did not answer, or answered that it cannot now (HTTP 429 or 5xx): the
    same call may work shortly. A roll waits it out for as long as its lease could not have
    expired (`rollguard.roller.roll.observer.Observer.through_outage`)."""


class Platform(Protocol):
    async def nodes(self) -> list[Node]: ...

    async def observe(self, node: Node) -> PlatformView: ...

    async def restart(self, node: Node, *, kafka_version: str | None = None) -> None:
        """Restart `node`; `kafka_version`: the version the roll brings it to (`--kafka-version`),
        for a platform that installs or switches the binaries itself (an inventory's `install`
        command); on Kubernetes the pod's new image is the change."""
        ...

    async def restart_pending(self, node: Node) -> bool:
        """A restart of this node started earlier (by a roller since stopped) is still going."""
        ...

    async def close(self) -> None: ...


class InventoryPlatform:
    """Nodes from an inventory file (`rollguard.roller.inventory`); readiness and identity from the
    agent; restart by running the node's command, and proof that its broker process is gone from its
    `health` command (`rollguard.roller.host_commands`: own process group, output to a log file)."""

    # An inventory says which nodes there are, not which revision each should run: every node
    # of it is out of date at every roll (`rollguard plan` says so).
    revisions = False

    def __init__(
        self,
        inventory: list[InventoryNode],
        agents: AgentClient,
        *,
        restart_timeout: float = 300,
        health_timeout: float = 30,
        folder: Path | None = None,
        roll_id: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`folder` (the state directory) holds the commands' log and the marker of a restart
        in progress; without it (`rollguard collect`) nothing can be restarted."""
        self._inventory = {n.node.name: n for n in inventory}
        self._agents = agents
        self._restart_timeout = restart_timeout
        self._health_timeout = health_timeout
        self._folder = folder or Path()
        self._log = self._folder / f"commands-{roll_id or 'adhoc'}.log"
        self._can_act = folder is not None
        self._clock = clock
        self._restarted_at: dict[str, float] = {}

    async def nodes(self) -> list[Node]:
        return [entry.node for entry in self._inventory.values()]

    async def observe(self, node: Node) -> PlatformView:
        """Ready: the agent reports RUNNING or later (a controller-only node: its agent answers
        `broker-state-missing`, so its JVM is up; the roller adds the quorum check). Identity:
        the broker JVM's start time from the agent, so a restart is judged by the process, not
        by comparing clocks; an agent that does not report it (Strimzi's) falls back to a
        sample taken after the restart command returned."""
        assert node.agent_url is not None
        answer = await self._agents.broker_state(node.agent_url, once=True)
        if isinstance(answer, AgentReport):
            report = answer.report
            ready = report.broker_state.is_ready
            instance = format_time(report.broker_started_at) if report.broker_started_at else None
            since = self._restarted_at.get(node.name)
            if ready and instance is None and since is not None:
                # A sample taken before the restart finished says nothing about the new process.
                ready = report.sampled_at is not None and report.sampled_at.timestamp() > since
            return PlatformView(exists=True, ready=ready, up_to_date=False, instance=instance)
        ready = answer.reason == BROKER_STATE_MISSING and not node.is_broker
        gone = not ready and await self._process_gone(node)
        return PlatformView(exists=True, ready=ready, up_to_date=False, process_gone=gone)

    async def _process_gone(self, node: Node) -> bool:
        """The node's health command exited non-zero: its broker process is not running. No
        health command, or one that could not say (timed out, could not start): not proven."""
        command = self._inventory[node.name].health
        if command is None or not self._can_act:
            return False
        try:
            result = await run_command(
                command,
                env=self._env(node),
                timeout=self._health_timeout,
                log_path=self._log,
                name=node.name,
                what="health command",
            )
        except CommandError as exc:
            logger.warning("%s: %s", node.name, exc)
            return False
        return result.exit_code > 0

    async def restart(self, node: Node, *, kafka_version: str | None = None) -> None:
        """Run the node's restart command; with `kafka_version`, its `install` command first
        (if it has one), both with ROLLGUARD_KAFKA_VERSION set to it. An install that fails
        restarts nothing."""
        if not self._can_act:
            raise RestartError(f"{node.name}: this inventory was loaded without a state directory")
        entry = self._inventory[node.name]
        env = self._env(node)
        if kafka_version is not None:
            env["ROLLGUARD_KAFKA_VERSION"] = kafka_version
            if entry.install is not None:
                await self._command(node, entry.install, env, "install command")
        await self._command(node, entry.restart, env, "restart command")
        self._restarted_at[node.name] = self._clock()

    async def _command(self, node: Node, command: str, env: dict[str, str], what: str) -> None:
        """One of the node's commands, on record while it runs (a resumed roll waits for it
        instead of running it again); RestartError when it fails."""
        marker = self._marker(node)

        def started(pid: int) -> None:
            atomic_write(marker, f"{pid}\n".encode())

        try:
            result = await run_command(
                command,
                env=env,
                timeout=self._restart_timeout,
                log_path=self._log,
                name=node.name,
                what=what,
                on_start=started,
            )
        except CommandError as exc:
            raise RestartError(str(exc)) from exc
        finally:
            marker.unlink(missing_ok=True)
        if not result.ok:
            raise RestartError(
                f"{what} for {node.name} {result.describe()} (output in {self._log})"
            )

    async def restart_pending(self, node: Node) -> bool:
        """A restart command for this node, started by an earlier roller, still runs."""
        try:
            pid = int(self._marker(node).read_text().strip())
        except (OSError, ValueError):
            return False
        return group_alive(pid)

    def _marker(self, node: Node) -> Path:
        return self._folder / f"restarting-{node.name}.pid"

    def _env(self, node: Node) -> dict[str, str]:
        return {
            **os.environ,
            "ROLLGUARD_NODE_ID": str(node.node_id),
            "ROLLGUARD_NODE_NAME": node.name,
        }

    async def close(self) -> None:
        """The agent client belongs to the caller."""
