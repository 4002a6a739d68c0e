"""`rollguard state URL...`: ask agents for their broker's state once, like curl.

One line (or JSON object) an agent on stdout, at once: its report, its 503 reason and message
(an answer: its broker is not ready), or why it cannot be read. A quick look, so fewer retries
than a roll's by default (`--retry-max-retries 2`: a closed port is reported in about a second,
each retry announced on stderr as it happens). The summary is a line on stderr.

Exit codes: 0 every agent reported, 1 some did not (with `--output json`, a last `{"error": ...}`
object says so), 2 bad flags, variables or URLs. Every option can also be set as
`ROLLGUARD_<OPTION>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollguard.roller.agent_client import (
    AgentAnswer,
    AgentClient,
    AgentReport,
    AgentUnavailable,
    broker_state_url,
)
from rollguard.roller.model import kafka_build
from rollguard.roller.options import ENV_PREFIX, AgentOptions, OutputOptions
from rollguard.shared.cli import ExitCode, report_failure, run_until_signal
from rollguard.shared.errors import ConfigError
from rollguard.shared.logs import PROGRESS
from rollguard.shared.retry import RetryStats
from rollguard.shared.retry_options import max_retries_option

progress = logging.getLogger(PROGRESS)

# A look, like curl: a closed port or a dead host is reported after two quick retries (about a
# second), not after a roll's five (twelve seconds). A 503 is an answer and not retried at all.
STATE_RETRIES = "2"


@dataclass(frozen=True, kw_only=True)
class StateOptions(AgentOptions, OutputOptions):
    """`rollguard state`'s options: the agents' and the output's, with fewer retries."""

    retry_max_retries: int = max_retries_option(STATE_RETRIES)


def add_parsers(sub: Any) -> None:
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
    """`RUNNING (3); Kafka 4.4.0 (a0f9be8d5fe3bd18)`: the state, and the Kafka the node runs
    once its server has started (a controller-only node's too)."""
    kafka = kafka_build(answer)
    runs = ""
    if kafka is not None:
        runs = f"; Kafka {kafka.version}" + (f" ({kafka.commit_id})" if kafka.commit_id else "")
    if isinstance(answer, AgentReport):
        return answer.report.describe() + runs
    status = f"HTTP {answer.status}" if answer.status is not None else "no HTTP answer"
    what = "not ready" if answer.not_ready else "unavailable"
    return f"{what} ({status}, {answer.reason}): {answer.message}{runs}"


def as_json(answer: AgentAnswer) -> dict[str, Any]:
    if isinstance(answer, AgentReport):
        return {"url": answer.url, "status": 200, "report": answer.report.to_wire()}
    said = {
        "url": answer.url,
        "status": answer.status,
        "error": answer.reason,
        "message": answer.message,
    }
    return said | (answer.kafka.to_wire() if answer.kafka is not None else {})


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
    summary = f"{summarise(answers)}; {stats.summary()}"
    if all(isinstance(a, AgentReport) for a in answers):
        progress.info("%s", summary)
        return ExitCode.OK
    return report_failure(summary, ExitCode.FAILED, json_output=options.output == "json")


def summarise(answers: Sequence[AgentAnswer]) -> str:
    """`3 agents: 1 reported, 1 answered not ready, 1 unavailable` (none not ready: left out)."""
    reported = sum(isinstance(a, AgentReport) for a in answers)
    waiting = sum(isinstance(a, AgentUnavailable) and a.not_ready for a in answers)
    text = f"{len(answers)} agent{'' if len(answers) == 1 else 's'}: {reported} reported"
    if waiting:
        text += f", {waiting} answered not ready"
    return text + f", {len(answers) - reported - waiting} unavailable"


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
