"""What a roll says, as Kubernetes Events on its StatefulSets and pods (pure: `Teller` turns
the roll's own events, `voice.EventLog`'s entries, into `Notice`s; `rolls.py` posts them).

`kubectl describe statefulset` then reads as the roll goes: "prod-broker-1: waiting for its log
recovery, 14 logs (1,204 segments) left, ETA 6m", "prod-broker-2 restarted", "roll completed:
3 restarted, 0 skipped". A node's Event goes to its pod too, when it has one. Waits are said
once per change of their reason by the roll itself; a recovery, which the roll reports at every
poll, is told once its ETA is known (or 15 s after it began), then at most once a `every` (a
minute) with its new figures: an Event is an
object in etcd, not a log line. The roll's end is told by whoever ran it (`ended`), with what the
roll did (its nodes' records).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event

__all__ = ["CLUSTER", "Notice", "Teller", "ended"]

CLUSTER = ""  # a notice for the cluster's StatefulSets, not for one pod
NORMAL, WARNING = "Normal", "Warning"


@dataclass(frozen=True, slots=True)
class Notice:
    """One Event to post: on the cluster's StatefulSets (`node` empty), or on a node's own
    StatefulSet and pod."""

    node: str
    type: str
    reason: str  # CamelCase, as Kubernetes' own (`kubectl describe` shows it)
    message: str


# An event's action -> (type, Event reason, how its message reads); None: not told.
_NODE = {
    Event.RESTART: (NORMAL, "Restarting", "{node}: restarting"),
    Event.READY: (NORMAL, "Restarted", "{node} restarted: {reason}"),
    Event.RESTART_NOT_OBSERVED: (NORMAL, "RestartNotObserved", "{node}: {reason}"),
    Event.DEFER: (NORMAL, "Deferred", "{node}: {reason}"),
    Event.WAIT_READY: (NORMAL, "WaitingForReady", "{node}: {reason}"),
    Event.CONFIGURE: (NORMAL, "Configuring", "{node}: changing {reason} live"),
    Event.CONFIGURED: (NORMAL, "Configured", "{node}: configured live, {reason}"),
}
_CLUSTER = {
    Event.GATE_CLOSED: (NORMAL, "Held", "{reason}"),
    Event.GATE_OPEN: (NORMAL, "GoingOn", "every gate is open: the roll goes on"),
    Event.PLATFORM_UNAVAILABLE: (WARNING, "KubernetesUnavailable", "{reason}"),
    Event.ADMIN_UNAVAILABLE: (WARNING, "KafkaUnavailable", "{reason}"),
    Event.CANARY_FAILING: (WARNING, "CanaryFailing", "{reason}"),
}


class Teller:
    """One roll's notices, from its events (`tell` is an `EventLog` listener's body)."""

    def __init__(
        self,
        roll_id: str,
        why: str,
        *,
        every: float = 60.0,
        eta_wait: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.roll_id = roll_id
        self.why = why  # what the roll is for: its first Event says it
        self.every = every
        self.eta_wait = eta_wait
        self._clock = clock
        self._recovery: dict[str, float] = {}  # node -> when its recovery was last told
        self._first: dict[str, float] = {}  # node -> its recovery's first report

    def tell(self, entry: Mapping[str, Any]) -> list[Notice]:
        action, node = entry.get("action"), entry.get("node") or ""
        reason = str(entry.get("reason") or "")
        if action == Event.WAIT_RECOVERY:
            return self._recovering(node, entry)
        if entry.get("repeated"):
            return []  # said before, unchanged
        if action in (Event.RESTART, Event.READY):  # a recovery after it is a new one
            self._recovery.pop(node, None)
            self._first.pop(node, None)
        if action == Event.ROLL_START:
            resumed = " (resumed)" if reason == "resumed" else ""
            target = entry.get("kafkaVersion")
            to = f", every node to Kafka {target}" if target else ""
            return [
                Notice(
                    CLUSTER, NORMAL, "RollStarted", f"roll {self.roll_id}{resumed}{to}: {self.why}"
                )
            ]
        if action == Event.DEFER and entry.get("kind") == "gate":
            return []  # the gate's own notice (Held, GateClosed) says it for the whole roll
        if action in _NODE and node:
            kind, title, text = _NODE[action]
            return [Notice(node, kind, title, text.format(node=node, reason=reason))]
        if action in _CLUSTER:
            kind, title, text = _CLUSTER[action]
            if action == Event.GATE_CLOSED and entry.get("gate") != "pause":
                title = "GateClosed"
            return [Notice(CLUSTER, kind, title, text.format(reason=reason))]
        return []

    def _recovering(self, node: str, entry: Mapping[str, Any]) -> list[Notice]:
        """A recovery, told once its ETA is known (its rate needs two reports) or `eta_wait`
        after its first report, whichever comes first; then once a `every` at most."""
        now = self._clock()
        first = self._first.setdefault(node, now)
        if entry.get("eta") is None and now - first < self.eta_wait:
            return []
        last = self._recovery.get(node)
        if last is not None and now - last < self.every:
            return []
        self._recovery[node] = now
        return [Notice(node, NORMAL, "WaitingForRecovery", recovery_text(node, entry))]


def recovery_text(node: str, entry: Mapping[str, Any]) -> str:
    """`kafka-1: waiting for its log recovery, 14 logs (1,204 segments) left, ETA 6m00s`."""
    logs, segments = entry.get("remainingLogsToRecover"), entry.get("remainingSegmentsToRecover")
    left = []
    if logs is not None:
        left.append(f"{int(logs):,} log{'' if logs == 1 else 's'}")
    if segments is not None:
        left.append(f"({int(segments):,} segments)" if left else f"{int(segments):,} segments")
    eta = entry.get("eta")
    when = f", ETA {format_duration(float(eta))}" if eta else ", ETA not known yet"
    figures = f", {' '.join(left)} left" if left else ""
    verdict = entry.get("reason") or ""
    said = f" ({verdict})" if verdict and verdict != "progressing" else ""
    return f"{node}: waiting for its log recovery{figures}{when}{said}"


def ended(
    state: str,
    *,
    restarted: int = 0,
    skipped: int = 0,
    configured: int = 0,
    held: tuple[str, ...] = (),
    reason: str = "",
) -> Notice:
    """The roll's last notice: completed with what it did, or why it failed or was refused."""
    if state == "completed":
        text = f"roll completed: {restarted} restarted, {skipped} skipped"
        if configured:
            text += f", {configured} configured live"
        if held:
            text += f", held for later: {', '.join(held)}"
        return Notice(CLUSTER, NORMAL, "RollCompleted", text)
    if state == "interrupted":
        return Notice(CLUSTER, NORMAL, "RollInterrupted", f"roll interrupted: {reason}")
    title = "RollRefused" if state == "refused" else "RollFailed"
    return Notice(CLUSTER, WARNING, title, f"roll {state}: {reason}")
