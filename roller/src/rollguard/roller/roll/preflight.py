"""Never act blind: before the first action, one request to every agent.

A roller whose client certificate the agents refuse (a CA rotation gone wrong), that does not
trust an agent's certificate, or whose clock is far from an agent's would otherwise take every
agent for "unreachable" and every node for "not ready". Those are configuration errors: the roll
does not start (exit 2), and the message names each agent and the cause. An agent that simply
does not answer may be a node that is down: that node is then *unknown* during the roll (it is
waited for, never taken for "not recovering"), and the check says so without stopping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from rollguard.roller.agent_client import AgentClient, Probe
from rollguard.roller.model import AgentUnavailable, Node, Unavailable
from rollguard.roller.roll.decide import agent_unknown
from rollguard.roller.roll.journal import EventLog
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)

# The HTTP Date header has a resolution of one second.
DATE_RESOLUTION = 1.0


def problem(probe: Probe, max_skew: float) -> str | None:
    """What makes acting on this agent blind, or None (pure)."""
    answer = probe.answer
    if isinstance(answer, AgentUnavailable):
        if answer.reason == Unavailable.TLS_REFUSED:
            return f"the agent refused the roller's client certificate ({answer.message})"
        if answer.reason == Unavailable.TLS_UNTRUSTED:
            return f"the agent's certificate is not trusted ({answer.message})"
        if answer.status is not None and 400 <= answer.status < 500:
            return f"HTTP {answer.status} ({answer.reason}): is this URL an agent's?"
    if probe.skew is not None and abs(probe.skew) > max_skew + DATE_RESOLUTION:
        side = "ahead of" if probe.skew > 0 else "behind"
        return (
            f"its clock is {abs(probe.skew):.0f}s {side} the roller's (at most "
            f"{max_skew:g}s allowed, --max-clock-skew): fix NTP on one side"
        )
    return None


def _outcome(node: Node, probe: Probe) -> str:
    answer = probe.answer
    if isinstance(answer, AgentUnavailable) and agent_unknown(node, answer):
        return answer.reason
    return "ok"


async def preflight(
    agents: AgentClient, nodes: Sequence[Node], max_skew: float, events: EventLog
) -> None:
    """ConfigError naming every agent that cannot be trusted; warnings for silent ones."""
    with_agent = [n for n in nodes if n.agent_url is not None]
    probes = await asyncio.gather(*(agents.probe(str(n.agent_url)) for n in with_agent))
    problems = []
    for node, probe in zip(with_agent, probes, strict=True):
        found = problem(probe, max_skew)
        if found is not None:
            problems.append(f"{node.name} ({probe.answer.url}): {found}")
        elif isinstance(probe.answer, AgentUnavailable) and agent_unknown(node, probe.answer):
            logger.warning(
                "%s: its agent does not answer (%s: %s); the node is unknown until it does, "
                "and is not restarted while it is",
                node.name,
                probe.answer.reason,
                probe.answer.message,
            )
        events.write(
            node.name,
            Event.PREFLIGHT,
            found or _outcome(node, probe),
            skew=round(probe.skew, 3) if probe.skew is not None else None,
        )
    if problems:
        raise ConfigError(
            "nothing was restarted: the roller cannot read its agents safely: "
            + "; ".join(problems)
        )
