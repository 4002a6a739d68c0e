"""The rollguard roller, as a library: what an operator or a notebook needs to roll Kafka safely.

    from rollguard.roller import AgentClient, KafkaObserver, KubernetesPlatform, plan

- `AgentClient`: the agents' client (mutual TLS, the shared retry policy); `broker_state(url)`
  answers an `AgentReport` or an `AgentUnavailable` (a value: the agent could not be read, so the
  broker's state is unknown).
- `KafkaObserver(bootstrap, properties).observe`: the cluster through the Admin API, a
  `ClusterView` (partitions, ISRs, min ISR, quorum, reassignments).
- `InventoryPlatform`, `KubernetesPlatform`: where the nodes are and how one is restarted; both
  follow the `Platform` protocol, which an operator can implement for its own platform.
- The pure decisions: `roll_order`, `restart_blockers` (why a restart is not safe now) and
  `decide` (what to do with one node), over frozen values (`Node`, `ClusterView`).
- `plan(...)`: a roll's plan as data, writing nothing; `Roller`: the roll itself, with its
  `RollSettings`, journal and events.

The rooms behind it: `rollguard.roller.roll` (the roll), `rollguard.roller.collect` (recovery
timelines into a dataset) and `rollguard.roller.connect` (Kafka Connect). Names are imported on
first use, so `import rollguard.roller` costs nothing until one is used. docs/library.md has a
worked example (a kopf handler that asks for a plan).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollguard.roller.agent_client import AgentClient
    from rollguard.roller.kafka_admin import AdminApiError, KafkaObserver
    from rollguard.roller.kubernetes import KubernetesPlatform, KubernetesSettings
    from rollguard.roller.model import (
        AgentAnswer,
        AgentReport,
        AgentUnavailable,
        ClusterView,
        Node,
        PartitionInfo,
        PlatformView,
        QuorumInfo,
        Role,
    )
    from rollguard.roller.platform import InventoryPlatform, Platform, RestartError
    from rollguard.roller.roll.node.before import decide
    from rollguard.roller.roll.planning import PlanEntry
    from rollguard.roller.roll.roller import Roller, RollResult, plan
    from rollguard.roller.roll.rules.safety import Blocker, restart_blockers, roll_order
    from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollFailed, RollSettings
    from rollguard.roller.roll.stores.journal import FileJournalStore, JournalStore
    from rollguard.roller.roll.voice import EventLog

_WHERE = {
    "AgentClient": "rollguard.roller.agent_client",
    "KubernetesPlatform": "rollguard.roller.kubernetes",
    "KubernetesSettings": "rollguard.roller.kubernetes",
    "AgentAnswer": "rollguard.roller.model",
    "AgentReport": "rollguard.roller.model",
    "AgentUnavailable": "rollguard.roller.model",
    "ClusterView": "rollguard.roller.model",
    "Node": "rollguard.roller.model",
    "PartitionInfo": "rollguard.roller.model",
    "PlatformView": "rollguard.roller.model",
    "QuorumInfo": "rollguard.roller.model",
    "Role": "rollguard.roller.model",
    "InventoryPlatform": "rollguard.roller.platform",
    "Platform": "rollguard.roller.platform",
    "RestartError": "rollguard.roller.platform",
    "decide": "rollguard.roller.roll.node.before",
    "EventLog": "rollguard.roller.roll.voice",
    "FileJournalStore": "rollguard.roller.roll.stores.journal",
    "JournalStore": "rollguard.roller.roll.stores.journal",
    "AdminApiError": "rollguard.roller.kafka_admin",
    "KafkaObserver": "rollguard.roller.kafka_admin",
    "plan": "rollguard.roller.roll.roller",
    "PlanEntry": "rollguard.roller.roll.planning",
    "Roller": "rollguard.roller.roll.roller",
    "RollResult": "rollguard.roller.roll.roller",
    "OnAgentUnreachable": "rollguard.roller.roll.rules.settings",
    "RollFailed": "rollguard.roller.roll.rules.settings",
    "RollSettings": "rollguard.roller.roll.rules.settings",
    "Blocker": "rollguard.roller.roll.rules.safety",
    "restart_blockers": "rollguard.roller.roll.rules.safety",
    "roll_order": "rollguard.roller.roll.rules.safety",
}

__all__ = [
    "AdminApiError",
    "AgentAnswer",
    "AgentClient",
    "AgentReport",
    "AgentUnavailable",
    "Blocker",
    "ClusterView",
    "EventLog",
    "FileJournalStore",
    "InventoryPlatform",
    "JournalStore",
    "KafkaObserver",
    "KubernetesPlatform",
    "KubernetesSettings",
    "Node",
    "OnAgentUnreachable",
    "PartitionInfo",
    "PlanEntry",
    "Platform",
    "PlatformView",
    "QuorumInfo",
    "RestartError",
    "Role",
    "RollFailed",
    "RollResult",
    "RollSettings",
    "Roller",
    "decide",
    "plan",
    "restart_blockers",
    "roll_order",
]


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'rollguard.roller' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
