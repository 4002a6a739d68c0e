"""`rollguard-agent`: the sidecar's command line.

Exit codes: 0 stopped by SIGTERM (how Kubernetes stops a container); 3 stopped by SIGINT
(Ctrl-C); 2 a bad flag, variable or file (one line on stderr names it, nothing is left
listening); 1 an unexpected failure while serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from rollguard.agent import config
from rollguard.agent.server import AgentCrashed, serve
from rollguard.agent.server_cert import check_server_certificate
from rollguard.shared import logs
from rollguard.shared.cli import ExitCode, Parser, run_until_signal
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)


class JsonFormatter(logs.JsonFormatter):
    """The shared JSON log line, with the agent's time as it has always written it (local)."""

    def when(self, record: logging.LogRecord) -> str:
        return self.formatTime(record, "%Y-%m-%dT%H:%M:%S")


def configure_logging(level: str, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn announces each of the two servers at INFO; the agent logs its own start line.
    if level != "debug":
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)


def _loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def build_parser() -> Parser:
    parser = Parser(
        prog="rollguard-agent",
        description="Reports a Kafka broker's state and log recovery over mutual TLS. "
        "Example:\n  rollguard-agent --cert kafka-0.crt --key kafka-0.key --cacert ca.crt "
        "--jmx 127.0.0.1:9999 --data-dir /var/lib/rollguard",
    )
    config.build_parser(parser)
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = config.load(args, os.environ if environ is None else environ)
        # A certificate no client would accept is refused now, not found at each handshake.
        warnings = check_server_certificate(settings.tls_cert, now=datetime.now(UTC))
    except ConfigError as exc:
        print(f"rollguard-agent: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    configure_logging(settings.log_level, settings.log_format)
    for warning in warnings:
        logger.warning("%s", warning)
    try:
        return run_until_signal(
            _serve(settings),
            on_sigterm=ExitCode.OK,
            loop_factory=_loop_factory(settings.event_loop),
        )
    except ConfigError as exc:
        print(f"rollguard-agent: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except AgentCrashed as exc:
        print(f"rollguard-agent: stopped because a component failed: {exc}", file=sys.stderr)
        return ExitCode.FAILED


async def _serve(settings: config.AgentSettings) -> int:
    await serve(settings)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
