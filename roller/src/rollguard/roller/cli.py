"""`rollguard`: the roller's command line, one sub-command per room.

    rollguard roll | plan | state ...     the roll          (rollguard.roller.roll.cli.roll)
    rollguard features | finalize ...     an upgrade's features
                                            (rollguard.roller.roll.upgrades.finalize)
    rollguard collect ...                 the collector     (rollguard.roller.collect.cli)
    rollguard connect ... | mm2 ...       Kafka Connect     (rollguard.roller.connect.cli)
    rollguard controller ...              rolls StatefulSets by itself
                                            (rollguard.roller.controller.cli)

Each room registers its commands with `add_parsers(sub)`, each command's function is
`run(args, environ) -> exit code`. Errors are translated here, once (`shared.cli.run_command`):
a ConfigError (bad flags, variables or files, found before anything changed) is exit 2, a
rollguard error from a peer or a platform exit 1, each a single line on stderr and, with
`--output json`, one `{"error": ...}` object on stdout. Logging is configured here too, in the
command's `--log-format`, on stderr: stdout carries the command's result alone.
`rollguard` alone prints help (exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from rollguard.shared.cli import Parser, run_command
from rollguard.shared.errors import ConfigError
from rollguard.shared.logs import configure_logging

# httpx imports its own command line with itself when click, rich and pygments are installed (a
# third of this command's start, for a command it never runs).
# Hence the rooms are imported in the functions below, after this line: they import httpx.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "not importable"


# Each room's commands, by the module that registers them (`add_parsers(sub)`).
ROOMS = {
    "state": "rollguard.roller.state",
    "roll": "rollguard.roller.roll.cli.roll",
    "plan": "rollguard.roller.roll.cli.roll",
    "features": "rollguard.roller.roll.upgrades.finalize",
    "finalize": "rollguard.roller.roll.upgrades.finalize",
    "collect": "rollguard.roller.collect.cli",
    "connect": "rollguard.roller.connect.cli",
    "mm2": "rollguard.roller.connect.cli",
    "controller": "rollguard.roller.controller.cli",
}


def build_parser(command: str | None = None) -> Parser:
    """Every room's commands; with a known `command`, only its room's: a command does not pay
    for the others' modules (their settings are dataclasses, which cost their start). Help,
    a mistyped command and its suggestion get every room."""
    rooms = [ROOMS[command]] if command in ROOMS else list(dict.fromkeys(ROOMS.values()))
    parser = Parser(
        prog="rollguard",
        description="Rolls Kafka clusters safely, collects recovery timelines, operates Kafka "
        "Connect.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for room in rooms:
        importlib.import_module(room).add_parsers(sub)
    return parser


def output_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str]:
    """`--output` and `--log-format` (`OutputOptions`, in every command), read before the
    command runs: its failures are told in the one, its log lines written in the other. A value
    that does not convert counts as `text` here; the command refuses it itself (exit 2)."""
    from rollguard.roller.connect.options import ENV_PREFIX as CONNECT_PREFIX
    from rollguard.roller.options import ENV_PREFIX, OutputOptions

    prefix = CONNECT_PREFIX if args.command in ("connect", "mm2") else ENV_PREFIX
    found: dict[str, str] = {}
    for name in ("output", "log_format"):
        try:
            found.update(OutputOptions.read(args, environ, prefix, only=[name]))
        except ConfigError:
            found[name] = "text"
    return found["output"], found["log_format"]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    from rollguard.roller.roll.cli import pause

    argv = sys.argv[1:] if argv is None else argv
    # `rollguard roll pause|resume` has a parser of its own (roll/cli/pause.py says why).
    args = pause.parse(argv) or build_parser(argv[0] if argv else None).parse_args(argv)
    environ = os.environ if environ is None else environ
    output, log_format = output_settings(args, environ)
    # kafka-python logs every refused or reset connection, with a traceback, at ERROR; a roll
    # causes those on purpose. Its errors reach the roller as exceptions and are reported there.
    configure_logging(log_format, prog="rollguard", levels={"kafka": logging.CRITICAL})
    return run_command(lambda: args.run(args, environ), json_output=output == "json")


if __name__ == "__main__":
    sys.exit(main())
