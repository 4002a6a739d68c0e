"""`rollguard-agent`: the sidecar's command line.

Exit codes: 0 stopped by SIGTERM/SIGINT; 2 a bad flag, variable or file (one line on stderr
names it, nothing is left listening); 1 an unexpected failure while serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from rollguard.agent import config
from rollguard.agent.server import AgentCrashed, serve
from rollguard.shared.cli import Parser
from rollguard.shared.errors import ConfigError

EXIT_CONFIG = 2


class _Parser(Parser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_CONFIG, f"rollguard-agent: {message} (see --help)\n")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


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


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = config.build_parser(
        _Parser(
            prog="rollguard-agent",
            description="Reports a Kafka broker's state and log recovery over mutual TLS.",
        )
    )
    args = parser.parse_args(argv)
    try:
        settings = config.load(args, os.environ if environ is None else environ)
    except ConfigError as exc:
        print(f"rollguard-agent: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(settings.log_level, settings.log_format)
    try:
        with asyncio.Runner(loop_factory=_loop_factory(settings.event_loop)) as runner:
            runner.run(serve(settings))
    except ConfigError as exc:
        print(f"rollguard-agent: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except AgentCrashed as exc:
        print(f"rollguard-agent: stopped because a component failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
