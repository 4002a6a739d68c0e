"""Log lines on stderr, as text or JSON, for a command whose output may be redirected.

A command's entry point configures logging once (`configure_logging`), when it knows its
`--log-format`: `text`, one timestamped line a record (`2026-11-26T10:15:02.311Z WARNING ...`,
UTC), or `json`, one object a line (`{"time", "level", "logger", "message"}`). Every line goes
to stderr; stdout is the command's result alone, so that `cmd > result` and `cmd 2> log` each
get one whole thing.

Two loggers are channels rather than modules:

- `PROGRESS` carries a command's progress lines (a node restarting, a summary): shown at INFO
  while the others show WARNING and above.
- `FAILURE` carries the one line that says why a command failed (`rollguard: <why>`, without a
  timestamp, as people expect of a command's error; a JSON object like any other with `json`).

The handler looks `sys.stderr` up at each record, so that a live display that redirects stderr
(rich's `Live`) shows log lines above itself instead of being torn by them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TextIO

__all__ = [
    "FAILURE",
    "LOG_FORMATS",
    "PROGRESS",
    "JsonFormatter",
    "StderrHandler",
    "TextFormatter",
    "configure_logging",
]

PROGRESS = "rollguard.progress"
FAILURE = "rollguard.failure"
LOG_FORMATS = ("text", "json")


def _utc(record: logging.LogRecord) -> str:
    """ISO 8601 UTC with milliseconds, as every time rollguard writes."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    """`2026-11-26T10:15:02.311Z WARNING message`, and a traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{_utc(record)} {record.levelname} {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    """One object a line: time, level (lower case), logger, message (and exception). The time
    is `when(record)`: UTC with milliseconds here; a subclass may say it otherwise."""

    def when(self, record: logging.LogRecord) -> str:
        return _utc(record)

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.when(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class _Prefixed(logging.Formatter):
    """`prog: message`: a command's failure line in the text format."""

    def __init__(self, prog: str) -> None:
        super().__init__()
        self.prog = prog

    def format(self, record: logging.LogRecord) -> str:
        return f"{self.prog}: {record.getMessage()}"


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler on whatever `sys.stderr` is when a record is written."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """Ignored: the stream is always the current stderr."""


_NO_LEVELS: Mapping[str, int] = MappingProxyType({})


def configure_logging(
    log_format: str,
    *,
    prog: str,
    level: int = logging.WARNING,
    levels: Mapping[str, int] = _NO_LEVELS,
) -> None:
    """Every record on stderr in `log_format`: the root logger at `level`, `PROGRESS` at INFO,
    `FAILURE` as `prog: message` (text) and the loggers named in `levels` at theirs."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"{log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    formatter: logging.Formatter = JsonFormatter() if log_format == "json" else TextFormatter()
    handler = StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger(PROGRESS).setLevel(logging.INFO)
    failure = StderrHandler()
    failure.setFormatter(formatter if log_format == "json" else _Prefixed(prog))
    failures = logging.getLogger(FAILURE)
    failures.handlers[:] = [failure]
    failures.propagate = False
    failures.setLevel(logging.INFO)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)
