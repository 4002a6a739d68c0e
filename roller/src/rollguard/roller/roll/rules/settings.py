"""What a roll is told and how it fails: the bottom of the roll package.

`RollSettings` is the one frozen settings object of a roll, plain data: built by the command
line from its flags and the environment (`roll/cli/choices.py` declares each flag, its variable,
default, help and section), or by a library user, who gets the same defaults from
`RollSettings()`. `RollFailed` is the one error the roll loop raises, its
message naming the node and the cause. Every other module of the package may import this one;
it imports none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rollguard.shared.errors import RollguardError


class RollFailed(RollguardError):
    """The roll stopped; the message names the node and the cause."""


class OnAgentUnreachable(StrEnum):
    """What a node whose agent cannot be read gets once the operation timeout has passed."""

    WAIT = "wait"  # unknown is not "not recovering": wait within the safety budget
    FORCE = "force"  # the old rule, on explicit request: force-restart it


@dataclass(frozen=True, kw_only=True)
class RollSettings:
    """A roll's settings: the user's choices (each a flag: `roll/cli/choices.py`, which a test
    holds to these defaults), and what the roller sets itself. Durations in seconds."""

    operation_timeout: float = 300.0  # a node not ready without progress, before its agent decides
    poll_interval: float = 2.0
    max_recovery_wait: float = 6 * 3600.0  # a log recovery that makes progress
    stall_timeout: float = 600.0  # a log recovery without progress
    safety_wait: float = 1800.0  # without progress: a restart becoming safe, a node rejoining
    on_agent_unreachable: OnAgentUnreachable = OnAgentUnreachable.WAIT
    max_clock_skew: float = 30.0  # between the roller and any agent, checked before acting
    # node names; empty: every node that needs it
    only: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    hold: frozenset[str] = frozenset()  # kept for later: the roll ends without them
    all_nodes: bool = False  # restart nodes that are already up to date too
    # The Kafka version every node must run after its restart (an upgrade, or a rollback):
    # nodes already on it are left out (unless all_nodes), a node back on another one stops the
    # roll. None: a roll for any other change, whatever version each node runs.
    kafka_version: str | None = None
    max_batch_size: int = 1  # brokers restarted together; 1 is the serial roll
    rack_aware: bool | None = None  # None: when brokers report racks
    elect_preferred_leaders: bool = True  # after each batch (--max-batch-size above 1)
    # What the roller sets itself.
    # A 60 s lease renewed every 10 s, a failed renewal tried again every 2 s (lease.py): an API
    # that refuses everything for up to ~48 s does not cost the roll its lease.
    lease_renew_interval: float = 10.0
    election_wait: float = 10.0  # how long to watch a batch's preferred leaders come back
    # per node name: its log recovery's wait budget from history (`--expectations`), never
    # above max_recovery_wait; a node without one gets max_recovery_wait
    # (`node_wait.recovery_budget_of`)
    recovery_budgets: Mapping[str, float] = field(default_factory=dict)
