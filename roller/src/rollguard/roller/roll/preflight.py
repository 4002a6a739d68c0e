"""Never act blind: before the first action, one request to every agent.

A roller whose client certificate the agents refuse (a CA rotation gone wrong), that does not
trust an agent's certificate, or whose clock is far from an agent's would otherwise take every
agent for "unreachable" and every node for "not ready". Those are configuration errors: the roll
does not start (exit 2), and the message names each agent, its URL and the cause. So are an agent
URL whose host does not resolve (a wrong `--agent-url`, `--service` or inventory) and agents of
which not one answers: a roll that went on would protect no recovering broker while the operator
believes it does. Rolling anyway is an explicit choice, `--on-agent-unreachable force`, which
the message names. One agent that does not answer while others do may be a node that is down:
that node is then *unknown* during the roll (waited for, never taken for "not recovering"), and
the check says so, with its URL, without stopping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from rollguard.roller.agent_client import AgentClient, Probe
from rollguard.roller.model import AgentUnavailable, Node, Unavailable
from rollguard.roller.roll.node.before import agent_unknown
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)

# The HTTP Date header has a resolution of one second.
DATE_RESOLUTION = 1.0
FORCE = "--on-agent-unreachable force"


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


def unresolved(answer: AgentUnavailable) -> str:
    """Why an agent URL's host has no address, for a person to act on."""
    try:
        host = urlsplit(answer.url).hostname or answer.url
    except ValueError:
        host = answer.url
    return f"its host {host!r} does not resolve ({answer.message})"


def _outcome(node: Node, probe: Probe) -> str:
    answer = probe.answer
    if isinstance(answer, AgentUnavailable) and agent_unknown(node, answer):
        return answer.reason
    return "ok"


async def preflight(
    agents: AgentClient,
    nodes: Sequence[Node],
    max_skew: float,
    events: EventLog,
    *,
    force: bool = False,
) -> None:
    """ConfigError naming every agent that cannot be trusted or found, with its URL; warnings
    for silent ones. `force` (`--on-agent-unreachable force`): the operator rolls without the
    agents that cannot be read, so those are warnings too."""
    with_agent = [n for n in nodes if n.agent_url is not None]
    if not with_agent:
        if nodes:
            logger.warning(
                "no node has an agent: nothing protects a broker in log recovery beyond its "
                "readiness"
            )
        return
    urls = [str(n.agent_url) for n in with_agent]
    probes = await asyncio.gather(*(agents.probe(url) for url in urls))
    problems, lost, silent = [], [], []
    answered = 0  # agents that gave an HTTP answer (a 503 is one: the agent is there)
    for node, url, probe in zip(with_agent, urls, probes, strict=True):
        answer = probe.answer
        found = problem(probe, max_skew)
        answered += not isinstance(answer, AgentUnavailable) or answer.status is not None
        if found is not None:
            problems.append(f"{node.name} ({url}): {found}")
        elif isinstance(answer, AgentUnavailable) and answer.reason == Unavailable.UNRESOLVED:
            lost.append(f"{node.name} ({url}): {unresolved(answer)}")
        elif isinstance(answer, AgentUnavailable) and agent_unknown(node, answer):
            silent.append(f"{node.name} ({url}): {answer.reason}: {answer.message}")
        events.write(
            node.name,
            Event.PREFLIGHT,
            found or _outcome(node, probe),
            skew=round(probe.skew, 3) if probe.skew is not None else None,
        )
    if problems:
        raise ConfigError(
            "nothing was restarted: the roller cannot read its agents safely: "
            + "; ".join(problems + lost)
        )
    if lost and not force:
        raise ConfigError(
            "nothing was restarted: agent URLs that do not resolve (check --agent-url, "
            "--service or the inventory; on Kubernetes the headless service must publish "
            "not-ready addresses, or a recovering broker's agent has no name): "
            + "; ".join(lost)
            + f"; to roll without these agents anyway, give {FORCE}"
        )
    if not answered and not force:
        raise ConfigError(
            "nothing was restarted: not one agent answers, so nothing would protect a broker "
            "in log recovery: "
            + "; ".join(silent + lost)
            + f"; to roll without the agents anyway, give {FORCE} (a node whose agent cannot "
            "be read is then restarted after --operation-timeout, recovering or not)"
        )
    for line in lost + silent:
        logger.warning(
            "%s; the node is unknown until its agent answers, and is %s",
            line,
            f"restarted after --operation-timeout ({FORCE})"
            if force
            else "not restarted while it is",
        )
