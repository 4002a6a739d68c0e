"""How long a node that is not ready is waited for: from the last progress seen (pure).

A broker back from a restart goes through its stages at their own pace: a new process, BrokerState
STARTING, a log recovery of seconds or hours (waited for by its own rules: its rate, its stalls,
`--max-recovery-wait`), then seconds more in STARTING while it catches up with the metadata log and
registers (longer under load), RECOVERY, RUNNING. `--operation-timeout` is how long the roller
waits for the next step, not for the whole journey: counted from the restart, a recovery longer
than the timeout would end the roll the moment it completed, which is the very case the roller
exists for. So the readiness budget starts again at each step forward:

- a new process (the first one seen: later ones are the node crashing, not progress);
- a BrokerState further on than any seen since (NOT_RUNNING < STARTING < RECOVERY < RUNNING;
  the shutdown states are not forward);
- the end of a log recovery (its agent's recovery figures gone, by a readable answer).

The whole wait stays bounded: past the node's recovery budget plus the operation timeout from the
start (`limit`), nothing counts as progress any more, so a node that crash-loops through
recoveries still fails. The same record serves a node found not ready before its restart
(`pending`): a broker that ends a long recovery of its own is not force-restarted a moment later.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rollguard.roller.model import AgentAnswer, AgentReport, is_recovering
from rollguard.shared.states import BrokerState

__all__ = ["FORWARD", "ReadyWait"]

# The order a starting broker goes through; a state outside it is never a step forward.
FORWARD = (BrokerState.NOT_RUNNING, BrokerState.STARTING, BrokerState.RECOVERY, BrokerState.RUNNING)


@dataclass(frozen=True, slots=True)
class ReadyWait:
    """One node waited for to become ready: since when, and the last progress seen."""

    started: float  # the restart, or the first poll that found the node not ready
    limit: float  # seconds from `started` after which nothing counts as progress
    instance: str | None = None  # the process at the start (None: not known)
    progress_at: float = 0.0  # the last progress (the start, until there is one)
    since: str = "its restart"  # what that progress was, for the messages
    new_process: bool = False  # a process other than `instance` has been seen
    furthest: BrokerState | None = None  # the furthest state seen, in FORWARD's order
    recovering: bool = False  # in log recovery at the last readable answer

    @classmethod
    def start(
        cls, now: float, instance: str | None, limit: float, since: str = "its restart"
    ) -> ReadyWait:
        return cls(now, limit, instance, progress_at=now, since=since)

    def waited(self, now: float) -> float:
        """Seconds since the last progress: what the operation timeout is judged against."""
        return now - self.progress_at

    def observe(self, now: float, instance: str | None, answer: AgentAnswer | None) -> ReadyWait:
        """The record after one look at the node: its process (`instance`, None: not known)
        and its agent's answer."""
        progress: str | None = None
        new_process = self.new_process
        furthest, recovering = self.furthest, self.recovering
        if not new_process and instance is not None and instance != self.instance:
            new_process, furthest, progress = True, None, "its new process started"
        if isinstance(answer, AgentReport):
            state = answer.report.broker_state
            if state in FORWARD and (furthest is None or _rank(state) > _rank(furthest)):
                progress = progress or f"it reached {state.name}"
                furthest = state
            now_recovering = is_recovering(answer)
            if recovering and not now_recovering:
                progress = "its log recovery ended"
            recovering = now_recovering
        if progress is None or now - self.started >= self.limit:
            return replace(self, new_process=new_process, furthest=furthest, recovering=recovering)
        return replace(
            self,
            new_process=new_process,
            furthest=furthest,
            recovering=recovering,
            progress_at=now,
            since=progress,
        )


def _rank(state: BrokerState) -> int:
    return FORWARD.index(state)
