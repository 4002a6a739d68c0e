"""What the roll does with a node that needs a restart, at one look (pure, table-tested in
tests/unit/test_decide.py): `decide`, the library's "what to do with one node now".

The rules, in order:
1. stuck (a pod that waiting will not cure): restart it if a new revision is the cure, else fail;
2. its agent reports log recovery (figures in STARTING or RECOVERY, or RECOVERY): never
   restart it (that would start the recovery over), wait;
3. within the operation timeout, counted from the last progress seen: wait;
4. past it, the agent readable and the broker not recovering: force-restart (Strimzi's rule);
5. past it, the agent unreadable: the state is *unknown*, not "not recovering". Force only when
   the platform proves the broker process is gone, or with `--on-agent-unreachable force`;
   otherwise wait within the safety budget.
A ready node is restarted when no safety rule blocks it, else deferred.
"""

from __future__ import annotations

from rollguard.roller.model import (
    BROKER_STATE_MISSING,
    AgentAnswer,
    AgentReport,
    AgentUnavailable,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
)
from rollguard.roller.roll.node.actions import (
    FORCE,
    Action,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Defer,
    Fail,
    Restart,
)
from rollguard.roller.roll.rules.safety import describe_blockers, restart_blockers
from rollguard.shared.wire import LOADING_STATES

__all__ = ["agent_unknown", "decide"]


def agent_unknown(node: Node, answer: AgentAnswer | None) -> bool:
    """True when the agent's answer says nothing about the broker: no agent, no HTTP answer,
    or an error other than a controller-only node's expected `broker-state-missing`."""
    if answer is None:
        return True
    if isinstance(answer, AgentReport):
        return False
    return not (answer.reason == BROKER_STATE_MISSING and not node.is_broker)


def decide(
    node: Node,
    view: PlatformView,
    cluster: ClusterView | None,
    *,
    agent: AgentAnswer | None = None,
    waited: float = 0.0,
    timeout: float = 300.0,
    force_unknown: bool = False,
    since: str = "it was found not ready",
) -> Action:
    """The next action for a node that needs a restart.

    `agent`: what its agent said at this poll (None: no agent, or not asked); `waited`: seconds
    the node has been waited for without becoming ready since its last progress (`since` says
    what that was); `timeout`: the operation timeout; `force_unknown`: `--on-agent-unreachable
    force`.
    """
    if view.stuck:
        if view.up_to_date:
            return Fail(
                f"{node.name} is stuck ({view.stuck}) and already runs the desired "
                "revision: restarting it will not help"
            )
        return Restart(f"{FORCE}: stuck in {view.stuck}", force=True)
    if not view.ready:
        # Never restart a broker in log recovery: that would start the recovery over.
        if is_recovering(agent):
            return AwaitRecovery(
                f"{node.name} is performing log recovery: {describe_answer(agent)}"
            )
        if waited < timeout:
            starting = (
                isinstance(agent, AgentReport) and agent.report.broker_state in LOADING_STATES
            )
            return AwaitReady(
                f"{node.name} is not ready; agent: {describe_answer(agent)}", starting=starting
            )
        if not agent_unknown(node, agent):
            return Restart(
                f"{FORCE}: not ready after {timeout:g}s (since {since}); agent: "
                f"{describe_answer(agent)}",
                force=True,
            )
        if view.process_gone:
            return Restart(
                f"{FORCE}: not ready after {timeout:g}s and the platform shows its process is "
                f"gone; agent: {describe_answer(agent)}",
                force=True,
            )
        if force_unknown:
            return Restart(
                f"{FORCE} (--on-agent-unreachable force): not ready after {timeout:g}s; "
                f"agent: {describe_answer(agent)}",
                force=True,
            )
        return AwaitUnknown(
            f"{node.name} is not ready and its agent cannot be read "
            f"({_unavailable(agent)}): its broker may be recovering, so it is not restarted"
        )
    blockers = restart_blockers(node, cluster)
    if blockers:
        return Defer(describe_blockers(blockers), tuple(blockers))
    return Restart("restart")


def _unavailable(answer: AgentAnswer | None) -> str:
    if isinstance(answer, AgentUnavailable):
        return answer.describe()  # with the agent's URL, as every message about an agent
    return describe_answer(answer)
