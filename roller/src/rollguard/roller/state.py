"""`rollguard state URL...`: ask agents for their broker's state once, like curl.

Exit codes: 0 every agent reported, 1 some did not, 2 bad flags, variables or URLs. Every
option can also be set as `ROLLGUARD_<OPTION>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollguard.roller.agent_client import AgentAnswer, AgentClient, AgentReport, broker_state_url
from rollguard.roller.options import ENV_PREFIX, AgentOptions, OutputOptions
from rollguard.shared.cli import ExitCode, run_until_signal
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryStats


@dataclass(frozen=True, kw_only=True)
class StateOptions(AgentOptions, OutputOptions):
    """`rollguard state`'s options."""


def add_parser(sub: Any) -> None:
    state = sub.add_parser(
        "state",
        help="ask agents for their broker's state once",
        description="Ask agents for their broker's state once, like curl. Example:\n"
        "  rollguard state --cert roller.crt --key roller.key --cacert ca.crt "
        "https://kafka-0.kafka.prod.svc:8443",
    )
    state.add_argument(
        "urls", nargs="+", metavar="URL", help="agent URL, e.g. https://kafka-0.kafka.prod.svc:8443"
    )
    StateOptions.add_flags(state, ENV_PREFIX)
    state.set_defaults(run=state_command)


def describe(answer: AgentAnswer) -> str:
    if isinstance(answer, AgentReport):
        return answer.report.describe()
    status = f"HTTP {answer.status}" if answer.status is not None else "no HTTP answer"
    return f"unavailable ({status}, {answer.reason}): {answer.message}"


def as_json(answer: AgentAnswer) -> dict[str, Any]:
    if isinstance(answer, AgentReport):
        return {"url": answer.url, "status": 200, "report": answer.report.to_wire()}
    return {
        "url": answer.url,
        "status": answer.status,
        "error": answer.reason,
        "message": answer.message,
    }


async def query(urls: Sequence[str], client: AgentClient) -> list[AgentAnswer]:
    async with client:
        return list(await asyncio.gather(*(client.broker_state(url) for url in urls)))


async def _state(urls: Sequence[str], options: StateOptions, stats: RetryStats) -> int:
    answers = await query(urls, options.agent_client(stats))
    width = max(len(a.url) for a in answers)
    for answer in answers:
        if options.output == "json":
            print(json.dumps(as_json(answer)))
        else:
            print(f"{answer.url:<{width}}  {describe(answer)}")
    reported = sum(isinstance(a, AgentReport) for a in answers)
    print(
        f"{len(answers)} agents: {reported} reported, {len(answers) - reported} unavailable; "
        f"{stats.summary()}",
        file=sys.stderr,
    )
    return ExitCode.OK if reported == len(answers) else ExitCode.FAILED


def state_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = StateOptions.load(args, environ, ENV_PREFIX)
    urls = []
    for url in args.urls:
        try:
            urls.append(broker_state_url(url))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    stats = RetryStats()
    return run_until_signal(_state(urls, options, stats))
