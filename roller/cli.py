"""`rollguard`: the roller's command line.

    rollguard state URL...     ask agents for their broker's state once, like curl

Every flag can also be set as `ROLLGUARD_<FLAG>`. Exit codes: 0 every agent reported; 1 some
agent gave no usable report (each is named on stdout); 2 bad flags, variables or files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from roller.agent_client import AgentAnswer, AgentClient, AgentReport, broker_state_url
from shared.errors import ConfigError
from shared.retry import RETRY_SETTINGS, RetryStats, policy_from_settings
from shared.settings import Flag, add_flags, resolve, retry_flags
from shared.tls import client_context

ENV_PREFIX = "ROLLGUARD_"
EXIT_UNAVAILABLE = 1
EXIT_CONFIG = 2


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"{text!r} is not a positive number of seconds")
    return value


def _output(text: str) -> str:
    if text not in ("text", "json"):
        raise ValueError(f"{text!r} is not 'text' or 'json'")
    return text


AGENT_FLAGS = (
    Flag("cert", None, Path, "client certificate (PEM) presented to agents", "PATH", True),
    Flag("key", None, Path, "its unencrypted PEM private key", "PATH", True),
    Flag("cacert", None, Path, "CA bundle (PEM) that agents' certificates chain to", "PATH", True),
    Flag("timeout", "5", _seconds, "seconds for one request to an agent", "SECONDS"),
    *retry_flags(),
)
STATE_FLAGS = (
    *AGENT_FLAGS,
    Flag("output", "text", _output, "text, or json (one object a line)", "FORMAT"),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_CONFIG, f"rollguard: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rollguard", description="Rolls Kafka clusters safely.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    state = sub.add_parser("state", help="ask agents for their broker's state once")
    state.add_argument("urls", nargs="+", metavar="URL",
                       help="agent URL, e.g. https://kafka-0.kafka.prod.svc:8443")
    add_flags(state, STATE_FLAGS, ENV_PREFIX)
    return parser


def describe(answer: AgentAnswer) -> str:
    if isinstance(answer, AgentReport):
        report = answer.report
        text = f"{report.broker_state.name} ({int(report.broker_state)})"
        if report.recovery is not None:
            text += (f": {report.recovery.remaining_logs} logs and "
                     f"{report.recovery.remaining_segments} segments left to recover")
        return text
    status = f"HTTP {answer.status}" if answer.status is not None else "no HTTP answer"
    return f"unavailable ({status}, {answer.reason}): {answer.message}"


def as_json(answer: AgentAnswer) -> dict[str, Any]:
    if isinstance(answer, AgentReport):
        return {"url": answer.url, "status": 200, "report": answer.report.to_wire()}
    return {"url": answer.url, "status": answer.status, "error": answer.reason,
            "message": answer.message}


async def query(urls: Sequence[str], client: AgentClient) -> list[AgentAnswer]:
    async with client:
        return list(await asyncio.gather(*(client.broker_state(url) for url in urls)))


def state(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    values = resolve(args, environ, STATE_FLAGS, ENV_PREFIX)
    policy = policy_from_settings({s.name: values[s.name] for s in RETRY_SETTINGS})
    tls = client_context(values["cacert"], values["cert"], values["key"])
    urls = []
    for url in args.urls:
        try:
            urls.append(broker_state_url(url))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    stats = RetryStats()
    client = AgentClient(tls, policy, stats=stats, timeout=values["timeout"])
    answers = asyncio.run(query(urls, client))
    width = max(len(a.url) for a in answers)
    for answer in answers:
        if values["output"] == "json":
            print(json.dumps(as_json(answer)))
        else:
            print(f"{answer.url:<{width}}  {describe(answer)}")
    reported = sum(isinstance(a, AgentReport) for a in answers)
    print(f"{len(answers)} agents: {reported} reported, {len(answers) - reported} unavailable; "
          f"{stats.summary()}", file=sys.stderr)
    return 0 if reported == len(answers) else EXIT_UNAVAILABLE


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="rollguard: %(levelname)s %(message)s")
    try:
        return state(args, os.environ if environ is None else environ)
    except ConfigError as exc:
        print(f"rollguard: {exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
