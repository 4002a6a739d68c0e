"""The status annotation `rollguard.io/status` on each StatefulSet of a cluster: what the
controller does with it now, for `kubectl describe` and `kubectl get -o yaml` (pure).

One JSON object: `phase` (below), `rollId`, `node` (the one the roll works on, or waits for),
`reason` (why, in the roll's own words), `since` (ISO 8601 UTC: when the phase began), and what
the controller keeps for itself across restarts: `rolled` (the trigger key of the last roll
that completed: that change is in force), `kafkaVersion` (the Kafka version the templates named
then: a template naming another one is an upgrade, or a rollback, each pod verified on it) and
`attempt` (the fingerprint of a roll that was refused or failed, with `attempts`: it is tried
again after a backoff, or at once when its inputs change).

    Idle       nothing to do: the pods run their template and their ConfigMaps' values
    Rolling    a roll runs (`node`, `reason`: what it does or waits for)
    Paused     held by `rollguard.io/paused`: no restart until it is removed
    Waiting    not yet: the StatefulSet controller has not computed the new revision, or
               another process holds the cluster's lease, or a failed roll waits to be retried
    Completed  the last roll completed (`reason`: what it did)
    Failed     the last roll failed (`reason`); resumed after a backoff
    Refused    nothing was done: a setting, a ConfigMap, a permission... (`reason` names it)
    Ignored    a StatefulSet with updateStrategy RollingUpdate: Kubernetes restarts its pods
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from rollguard.roller.roll.node.record import NodeRecord, Phase

__all__ = ["ControllerPhase", "Status", "working_on"]


class ControllerPhase(StrEnum):
    IDLE = "Idle"
    ROLLING = "Rolling"
    PAUSED = "Paused"
    WAITING = "Waiting"
    COMPLETED = "Completed"
    FAILED = "Failed"
    REFUSED = "Refused"
    IGNORED = "Ignored"


# The phases of a node the roll is working on, in the order the status prefers to name them.
_BUSY = (Phase.RESTARTING, Phase.RECOVERING, Phase.CATCHING_UP, Phase.CONFIGURING, Phase.WAITING)
_NAMES = {
    "phase": "phase",
    "roll_id": "rollId",
    "node": "node",
    "reason": "reason",
    "since": "since",
    "rolled": "rolled",
    "attempt": "attempt",
    "attempts": "attempts",
    "kafka_version": "kafkaVersion",
}


@dataclass(frozen=True, slots=True)
class Status:
    phase: ControllerPhase = ControllerPhase.IDLE
    roll_id: str = ""
    node: str = ""
    reason: str = ""
    since: str = ""
    rolled: str = ""  # the trigger key of the last completed roll
    attempt: str = ""  # the fingerprint of a refused or failed roll
    attempts: int = 0  # how many times in a row that one was tried
    kafka_version: str = ""  # what the templates named when their last roll completed

    def to_text(self) -> str:
        found = {_NAMES[k]: v for k, v in asdict(self).items() if v not in ("", 0)}
        return json.dumps(found, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str | None) -> Status | None:
        """The annotation's status; None when absent or not one of ours (written by hand): it
        is written anew."""
        if not text:
            return None
        try:
            data = json.loads(text)
            values: dict[str, Any] = {k: data[v] for k, v in _NAMES.items() if v in data}
            values["phase"] = ControllerPhase(values.get("phase", "Idle"))
            values["attempts"] = int(values.get("attempts", 0))
            return cls(**values)
        except (ValueError, TypeError, AttributeError):
            return None

    def moved(self, phase: ControllerPhase, now: str, **changes: Any) -> Status:
        """This status in `phase` (since `now` when the phase changes)."""
        since = self.since if phase is self.phase and self.since else now
        return replace(self, phase=phase, since=since, **changes)

    def same_as(self, other: Status | None) -> bool:
        """Nothing a person would see has changed (its `since` aside)."""
        return other is not None and replace(other, since=self.since) == self


def working_on(nodes: Mapping[str, NodeRecord]) -> tuple[str, str]:
    """The node a roll works on or waits for now, and why, from its nodes' records: a node on
    its way back first, then one waited for; ("", "") when none is."""
    for phase in _BUSY:
        for record in nodes.values():
            if record.phase is phase:
                reason = record.waiting.reason if record.waiting is not None else ""
                return record.name, reason or f"{record.phase}: {record.reason or record.why}"
    return "", ""
