"""What a roll is told and how it fails: the bottom of the roll package.

`RollSettings` is the one frozen settings object of a roll (built by `roll/cli/roll.py` from
flags and the environment, or by a library user); `RollFailed` (a `Fatal` error) is the one
error the roll loop raises, its message naming the node and the cause. Every other module of the
package may import this one; it imports none of them.

What a user decides about a roll is declared here once, as options (`RollChoices`): the flag,
its variable, default, conversion, help and section of --help, and whether `plan` takes it too
(`commands=ROLL`: `roll` alone). `RollOptions` (roll/cli/options.py) composes them with the
connection's; a library user gets the same defaults from `RollSettings()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rollguard.shared.converters import (
    boolean,
    choice,
    duration_between,
    integer,
    milliseconds_to_duration,
    names,
)
from rollguard.shared.errors import Fatal
from rollguard.shared.settings import Group, Options, option

ROLL = ("roll",)  # the flags only a roll reads

NODES = Group("nodes", "which nodes a roll takes (default: those out of date; all of an inventory)")
SAFETY = Group("safety", "what may be restarted, and what a roll does when it cannot tell")
TIMING = Group("timing", "how long a roll waits for a node, and how often it looks")
BATCHES = Group("batches", "restarting several brokers at once")


class RollFailed(Fatal):
    """The roll stopped; the message names the node and the cause."""


class OnAgentUnreachable(StrEnum):
    """What a node whose agent cannot be read gets once the operation timeout has passed."""

    WAIT = "wait"  # unknown is not "not recovering": wait within the safety budget
    FORCE = "force"  # the old rule, on explicit request: force-restart it


def _on_agent_unreachable(text: str) -> OnAgentUnreachable:
    return OnAgentUnreachable(choice(*(o.value for o in OnAgentUnreachable))(text))


def _rack_aware(text: str) -> bool | None:
    """auto (None: on when brokers report racks), or true/false."""
    return None if text.strip().lower() == "auto" else boolean(text)


# A Kafka release as Kafka names it (`4.4.0`, `4.1.0-rc2`): what a node's app-info reports.
KAFKA_RELEASE = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(-[0-9A-Za-z.]{1,20})?")


def kafka_version(text: str) -> str:
    text = text.strip()
    if not KAFKA_RELEASE.fullmatch(text):
        raise ValueError(f"{text!r}: a Kafka version is MAJOR.MINOR.PATCH, such as 4.4.0")
    return text


def _duration(default: str, low: str, high: str, help: str, **kwargs: Any) -> Any:
    return option(default, duration_between(low, high), help, "DURATION", **kwargs)


@dataclass(frozen=True, kw_only=True)
class RollChoices(Options):
    """What a user decides about a roll, each with its flag (`rollguard roll` and `plan`)."""

    operation_timeout: float = _duration(
        "5m", "10ms", "7d",
        "how long a node not ready may go without progress (a new process, a state further "
        "on, the end of its recovery) before its agent decides",
        deprecated=(("operation-timeout-ms", milliseconds_to_duration),), group=TIMING,
    )  # fmt: skip
    poll_interval: float = _duration(
        "2s", "10ms", "1h", "time between readiness, safety and agent checks",
        group=TIMING, commands=ROLL,
    )  # fmt: skip
    max_recovery_wait: float = _duration(
        "6h", "10ms", "30d", "longest wait for a broker in log recovery that makes progress",
        group=TIMING,
    )  # fmt: skip
    stall_timeout: float = _duration(
        "10m", "10ms", "7d", "a recovery with no progress for this long is stalled",
        group=TIMING, commands=ROLL,
    )  # fmt: skip
    # waiting until a restart is safe: budget without progress
    safety_wait: float = _duration(
        "30m", "10ms", "30d",
        "how long a roll waits without progress for a restart to become safe and for a "
        "restarted broker to rejoin its ISRs",
        group=SAFETY, commands=ROLL,
    )  # fmt: skip
    on_agent_unreachable: OnAgentUnreachable = option(
        "wait", _on_agent_unreachable,
        "a node whose agent cannot answer: wait (within --safety-wait) or force (restart it "
        "after --operation-timeout)",
        "wait|force", group=SAFETY,
    )  # fmt: skip
    # between the roller and any agent, checked before acting
    max_clock_skew: float = _duration(
        "30s", "10ms", "1d",
        "largest clock difference between the roller and an agent before anything is done",
        group=SAFETY,
    )  # fmt: skip
    # node names; empty: every node that needs it
    only: frozenset[str] = option(
        "", names, "restart only these nodes (comma-separated names)", "NODES", group=NODES
    )
    skip: frozenset[str] = option(
        "", names, "never restart these nodes (comma-separated names)", "NODES", group=NODES
    )
    hold: frozenset[str] = option(  # kept for later: the roll ends without them
        "", names,
        "keep these nodes for later (comma-separated names): the roll ends without them and "
        "`roll --resume` takes those no longer held",
        "NODES", group=NODES,
    )  # fmt: skip
    all_nodes: bool = option(  # restart nodes that are already up to date too
        "false", boolean,
        "restart pods that are already up to date too, or with --kafka-version nodes that "
        "already run it (a switch)",
        switch=True, group=NODES, flag="all",
    )  # fmt: skip
    # The Kafka version every node must run after its restart (an upgrade, or a rollback):
    # nodes already on it are left out (unless all_nodes), a node back on another one stops the
    # roll. None: a roll for any other change, whatever version each node runs.
    kafka_version: str | None = option(
        None, kafka_version,
        "the Kafka version every node must run after its restart (an upgrade or a rollback): "
        "nodes already on it are left out unless --all, a node back on another version stops "
        "the roll; an inventory's `install` command gets it as ROLLGUARD_KAFKA_VERSION",
        "VERSION", group=NODES,
    )  # fmt: skip
    max_batch_size: int = option(  # brokers restarted together; 1 is the serial roll
        "1", integer(1, 100_000),
        "restart up to N brokers at once when no partition can spare fewer (1: one at a time)",
        "N", group=BATCHES,
    )  # fmt: skip
    rack_aware: bool | None = option(  # None: when brokers report racks
        "auto", _rack_aware,
        "batches of one rack first (auto: when brokers report racks; false: ignore racks)",
        "auto|true|false", group=BATCHES,
    )  # fmt: skip
    elect_preferred_leaders: bool = option(  # after each batch (--max-batch-size above 1)
        "true", boolean, "after each batch, elect the preferred leaders of its brokers' partitions",
        "true|false", group=BATCHES, commands=ROLL,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RollSettings(RollChoices):
    """A roll's settings: the user's choices, and what the roller sets itself."""

    # A 60 s lease renewed every 10 s, a failed renewal tried again every 2 s (lease.py): an API
    # that refuses everything for up to ~48 s does not cost the roll its lease.
    lease_renew_interval: float = 10.0
    election_wait: float = 10.0  # how long to watch a batch's preferred leaders come back
    # per node name: its log recovery's wait budget from history (`--expectations`), never
    # above max_recovery_wait; a node without one gets max_recovery_wait
    # (`node_wait.recovery_budget_of`)
    recovery_budgets: Mapping[str, float] = field(default_factory=dict)
