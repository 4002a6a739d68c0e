"""What to do with one node, as a pure function of what was observed (table-tested).

The roll loop (`roller.roll`) does the I/O around it: it observes, asks `decide`, carries the
action out, and asks again with what it learnt (after waiting, the agent's answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from roller.agent_client import AgentAnswer, AgentReport
from roller.model import ClusterView, Node, PlatformView
from roller.safety import restart_blockers
from shared.states import BrokerState


@dataclass(frozen=True, slots=True)
class Restart:
    reason: str
    force: bool = False  # without the availability and quorum checks


@dataclass(frozen=True, slots=True)
class Defer:
    reason: str  # not safe now; other nodes go first, this one is tried again later


@dataclass(frozen=True, slots=True)
class Fail:
    reason: str  # fatal for the roll


@dataclass(frozen=True, slots=True)
class AwaitReady:
    reason: str  # not ready: wait up to the operation timeout, then ask its agent


@dataclass(frozen=True, slots=True)
class AwaitRecovery:
    reason: str  # in log recovery: wait while it progresses, never restart it


Action = Restart | Defer | Fail | AwaitReady | AwaitRecovery


def describe_answer(answer: AgentAnswer | None) -> str:
    if answer is None:
        return "no agent configured"
    if isinstance(answer, AgentReport):
        return answer.report.describe()
    return f"unavailable ({answer.reason}: {answer.message})"


def is_recovering(answer: AgentAnswer | None) -> bool:
    return isinstance(answer, AgentReport) and answer.report.broker_state is BrokerState.RECOVERY


def decide(
    node: Node,
    view: PlatformView,
    cluster: ClusterView | None,
    *,
    waited: bool = False,
    agent: AgentAnswer | None = None,
    timeout: float = 300.0,
) -> Action:
    """The next action for a node that needs a restart.

    `waited`: the node was given the operation timeout to become ready and did not; `agent` is
    then what its agent said. Proposal 048's rules, in order:
    """
    # A pod that waiting will not cure: restart it if a new revision is the cure, else fail.
    if view.stuck:
        if view.up_to_date:
            return Fail(
                f"{node.name} is stuck ({view.stuck}) and already runs the desired "
                "revision: restarting it will not help"
            )
        return Restart(f"force: stuck in {view.stuck}", force=True)
    if not view.ready:
        if not waited:
            return AwaitReady(f"{node.name} is not ready")
        # Never restart a broker in log recovery: that would start the recovery over.
        if is_recovering(agent):
            return AwaitRecovery(
                f"{node.name} is performing log recovery: {describe_answer(agent)}"
            )
        # Neither ready nor recovering, or its agent cannot tell: the previous behaviour.
        return Restart(
            f"force: not ready after {timeout:g}s; agent: {describe_answer(agent)}", force=True
        )
    blockers = restart_blockers(node, cluster)
    if blockers:
        return Defer("; ".join(blockers))
    return Restart("restart")
