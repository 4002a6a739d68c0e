"""What a roll test drives, whichever cluster it rolls: `RollCluster`, the protocol the simulated
cluster of real processes (`cluster.ProcessCluster`: test brokers, the Kafka-protocol peer) and
the real KRaft cluster (`realcluster.RealCluster`: Kafka's own jars) both implement.

Each has nodes by id, a real `rollguard-agent` beside each node, a Kafka bootstrap, a control
server playing the hosts' service manager (`control.ControlServer`), an inventory pointing the
nodes' commands at it, its own record of the restarts it was asked for, and the timing flags a
roll of it takes (`harness.InventoryRoll` runs `rollguard roll` on it as an operator types it).
How a node restarts, and what else each records, stays each cluster's own (the real one's
phases and installs, the simulated one's restart plans).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from rollguard.peers.control import ControlServer
from rollguard.peers.processes import Agent, Pki


class RollCluster(Protocol):
    """A cluster a roll test drives (`ProcessCluster`, `RealCluster`)."""

    name: str  # the inventory's `cluster`
    pki: Pki  # the agents' CA and certificates, and the roller's client pair
    folder: Path  # where its inventory, agents' data and state live
    control: ControlServer
    timings: tuple[str, ...]  # the roll's timing flags on it (none: the roll's defaults)

    @property
    def bootstrap(self) -> str:
        """The Kafka bootstrap the roller's Admin API client connects to."""
        ...

    def node_ids(self) -> list[int]: ...

    def node_name(self, node_id: int) -> str:
        """The node's name in the inventory and the roll's events (`kafka-<id>`)."""
        ...

    def roles(self, node_id: int) -> list[str]: ...

    def agent(self, node_id: int) -> Agent: ...

    def running(self, node_id: int) -> bool:
        """The node's process runs (its `health` command's answer)."""
        ...

    def restart(self, node_id: int) -> None:
        """What the node's `restart` command does."""
        ...

    def restarts_of(self, node_id: int) -> int:
        """How many restarts the control server was asked for (the test's record, not the
        roller's)."""
        ...

    def restarted(self) -> list[int]:
        """The nodes the control server was asked to restart, in order (the test's record)."""
        ...

    def inventory(self) -> Path: ...

    def stop(self) -> None: ...


def write_inventory(cluster: RollCluster) -> Path:
    """The cluster's inventory (`<folder>/inventory.yaml`, JSON being YAML): each node's id,
    name, roles, agent and the control server's commands."""
    path = cluster.folder / "inventory.yaml"
    nodes = [
        {
            "id": node_id,
            "name": cluster.node_name(node_id),
            "roles": cluster.roles(node_id),
            "agent": cluster.agent(node_id).api,
            **cluster.control.commands(node_id),
        }
        for node_id in cluster.node_ids()
    ]
    path.write_text(json.dumps({"cluster": cluster.name, "nodes": nodes}, indent=2))
    return path
