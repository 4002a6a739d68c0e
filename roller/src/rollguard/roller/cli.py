"""`rollguard`: the roller's command line, one sub-command per room.

    rollguard roll | plan | state ...     the roll          (rollguard.roller.roll.cli)
    rollguard collect ...                 the collector     (rollguard.roller.collect.cli)
    rollguard connect ... | mm2 ...       Kafka Connect     (rollguard.roller.connect.cli)

Each room registers its commands with `add_parsers(sub)`, each command's function is
`run(args, environ) -> exit code`. Errors are translated here, once: a ConfigError (bad flags,
variables or files, found before anything changed) is exit 2, a rollguard error from a peer or
a platform exit 1, each a single line on stderr. `rollguard` alone prints help (exit 2).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence

from rollguard.roller import state
from rollguard.roller.collect import cli as collect_cli
from rollguard.roller.connect import cli as connect_cli
from rollguard.roller.roll import cli as roll_cli
from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.errors import ConfigError, RollguardError


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


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="rollguard: %(levelname)s %(message)s")
    # kafka-python logs every refused or reset connection, with a traceback, at ERROR; a roll
    # causes those on purpose. Its errors reach the roller as exceptions and are reported there.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    environ = os.environ if environ is None else environ
    try:
        return int(args.run(args, environ))
    except ConfigError as exc:
        print(f"rollguard: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except RollguardError as exc:  # a platform's or a peer's error, translated at its boundary
        print(f"rollguard: {exc}", file=sys.stderr)
        return ExitCode.FAILED


if __name__ == "__main__":
    sys.exit(main())
