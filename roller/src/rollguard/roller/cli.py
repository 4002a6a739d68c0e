"""`rollguard`: the roller's command line, one sub-command per room.

    rollguard roll | plan | state ...     the roll          (rollguard.roller.roll.cli)
    rollguard collect ...                 the collector     (rollguard.roller.collect.cli)
    rollguard connect ... | mm2 ...       Kafka Connect     (rollguard.roller.connect.cli)

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
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from rollguard.roller import state
from rollguard.roller.collect import cli as collect_cli
from rollguard.roller.connect import cli as connect_cli
from rollguard.roller.connect.options import ENV_PREFIX as CONNECT_PREFIX
from rollguard.roller.options import ENV_PREFIX, OutputOptions
from rollguard.roller.roll import cli as roll_cli
from rollguard.roller.roll import pause
from rollguard.shared.cli import Parser, run_command
from rollguard.shared.errors import ConfigError
from rollguard.shared.logs import configure_logging
from rollguard.shared.settings import resolve


def build_parser() -> Parser:
    parser = Parser(
        prog="rollguard",
        description="Rolls Kafka clusters safely, collects recovery timelines, operates Kafka "
        "Connect.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    state.add_parser(sub)
    roll_cli.add_parsers(sub)
    collect_cli.add_parsers(sub)
    connect_cli.add_parsers(sub)
    return parser


def output_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str]:
    """`--output` and `--log-format` (`OutputOptions`, in every command), read before the
    command runs: its failures are told in the one, its log lines written in the other. A value
    that does not convert counts as `text` here; the command refuses it itself (exit 2)."""
    prefix = CONNECT_PREFIX if args.command in ("connect", "mm2") else ENV_PREFIX
    found: dict[str, str] = {}
    for flag in OutputOptions.flags():
        try:
            found.update(resolve(args, environ, [flag], prefix))
        except ConfigError:
            found[flag.name] = "text"
    return found["output"], found["log-format"]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `rollguard roll pause|resume` has a parser of its own (roll.pause.parse says why).
    args = pause.parse(argv) or build_parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    output, log_format = output_settings(args, environ)
    # kafka-python logs every refused or reset connection, with a traceback, at ERROR; a roll
    # causes those on purpose. Its errors reach the roller as exceptions and are reported there.
    configure_logging(log_format, prog="rollguard", levels={"kafka": logging.CRITICAL})
    return run_command(lambda: args.run(args, environ), json_output=output == "json")


if __name__ == "__main__":
    sys.exit(main())
