"""Where nodes come from and how they are restarted: one interface, two implementations.

`InventoryPlatform` (VMs, bare metal) reads a YAML file and restarts with a command;
`roller.kubernetes.KubernetesPlatform` lists pods and deletes them. The roll loop only sees
`Platform`, so the decisions do not know which one they are working with.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml

from roller.agent_client import AgentClient
from roller.model import BROKER_STATE_MISSING, AgentReport, Node, PlatformView, Role
from shared.errors import ConfigError, RollguardError
from shared.wire import format_time


class RestartError(RollguardError):
    """A restart could not be carried out (the command failed, the API refused)."""


class Platform(Protocol):
    async def nodes(self) -> list[Node]: ...

    async def observe(self, node: Node) -> PlatformView: ...

    async def restart(self, node: Node) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class InventoryNode:
    node: Node
    restart: str


def load_inventory(path: Path) -> list[InventoryNode]:
    """Read and check an inventory file; ConfigError naming the file and the entry."""
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"inventory {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"inventory {path}: not valid YAML ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise ConfigError(f"inventory {path}: expected a mapping with a 'nodes' list")
    result: list[InventoryNode] = []
    for index, entry in enumerate(document["nodes"]):
        where = f"inventory {path}: nodes[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} is not a mapping")
        missing = [key for key in ("id", "agent", "restart") if key not in entry]
        if missing:
            raise ConfigError(f"{where} lacks {', '.join(missing)}")
        node_id = entry["id"]
        if isinstance(node_id, bool) or not isinstance(node_id, int) or node_id < 0:
            raise ConfigError(f"{where}: id {node_id!r} is not a node id")
        roles_raw = entry.get("roles", ["broker"])
        try:
            roles = frozenset(Role(r) for r in roles_raw)
        except (ValueError, TypeError):
            raise ConfigError(
                f"{where}: roles {roles_raw!r} must be broker and/or controller"
            ) from None
        if not roles:
            raise ConfigError(f"{where}: roles is empty")
        name = str(entry.get("name", f"node-{node_id}"))
        node = Node(node_id, name, roles, str(entry["agent"]))
        result.append(InventoryNode(node, str(entry["restart"])))
    ids = [n.node.node_id for n in result]
    names = [n.node.name for n in result]
    if len(set(ids)) != len(ids) or len(set(names)) != len(names):
        raise ConfigError(f"inventory {path}: node ids and names must be unique")
    return result


class InventoryPlatform:
    """Nodes from a file; readiness from the agent (RUNNING or later, sampled after the last
    restart), restart by running the node's command with a time limit."""

    def __init__(
        self,
        inventory: list[InventoryNode],
        agents: AgentClient,
        *,
        restart_timeout: float = 300,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._inventory = {n.node.name: n for n in inventory}
        self._agents = agents
        self._restart_timeout = restart_timeout
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
        return PlatformView(exists=True, ready=ready, up_to_date=False)

    async def restart(self, node: Node) -> None:
        command = self._inventory[node.name].restart
        env = {
            **os.environ,
            "ROLLGUARD_NODE_ID": str(node.node_id),
            "ROLLGUARD_NODE_NAME": node.name,
        }
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(self._restart_timeout):
                output, _ = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            raise RestartError(
                f"restart command for {node.name} did not finish within {self._restart_timeout:g}s"
            ) from None
        self._restarted_at[node.name] = self._clock()
        if process.returncode != 0:
            tail = output.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise RestartError(
                f"restart command for {node.name} exited {process.returncode}: {tail[0][:200]}"
            )

    async def close(self) -> None:
        """The agent client belongs to the caller."""
