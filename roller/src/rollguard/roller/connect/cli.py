"""`rollguard connect ...` and `rollguard mm2 ...`: Kafka Connect operations.

    rollguard connect status [NAME...]                       every connector and task; exit 1 if
                                                             anything is FAILED
    rollguard connect restart NAME [--include-tasks] [--only-failed] [--wait]
    rollguard connect restart --all-failed [--wait]
    rollguard connect stop NAME [--wait] | resume NAME [--wait]
    rollguard connect auto-restart [--connectors A,B] [--config FILE] [--once] ...
    rollguard connect offsets list|alter|reset --connector NAME           (key offsets.json)
    rollguard mm2 offsets list|alter|reset --connector 'east->west.MirrorSourceConnector'
        alter and reset: [--stop [--leave-stopped] [--resume]] [--dry-run]

Every command takes --connect-url and the TLS (--cacert, --cert, --key), basic-auth (--user,
--password-file or ROLLGUARD_CONNECT_PASSWORD), retry flags and --output text|json; every
option can also be set as ROLLGUARD_CONNECT_<OPTION> (`rollguard.roller.connect.options`).
Each runs under `run_until_signal`: SIGINT is exit 3, SIGTERM exit 3 too except for the
auto-restart service, for which it is the normal stop (exit 0). Exit codes: 0 done, 1 failed
(the message names the connector, the cause and the state left), 2 bad flags, variables or files,
or a worker too old (nothing sent), 3 interrupted, 4 no such connector, 5 Connect kept answering
409 (a rebalance) through every retry.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Mapping
from typing import Any

from rollguard.roller.connect import commands, watcher
from rollguard.roller.connect.options import (
    ENV_PREFIX,
    LEGACY_PREFIX,
    PASSWORD_ENV,
    AutoRestartOptions,
    ConnectOptions,
    OffsetsOptions,
    WaitOptions,
)
from rollguard.shared.cli import ExitCode, Parser, run_until_signal
from rollguard.shared.settings import Options

__all__ = ["PASSWORD_ENV", "add_parsers"]

EXIT_NOT_FOUND, EXIT_CONFLICT = commands.EXIT_NOT_FOUND, commands.EXIT_CONFLICT

# The flag tables, for the tests and docs that check every flag.
CONNECT_FLAGS = ConnectOptions.flags()
WAIT_FLAGS = WaitOptions.flags()
AUTO_RESTART_FLAGS = AutoRestartOptions.flags()
OFFSETS_FLAGS = OffsetsOptions.flags()

URL = "--connect-url https://connect.kafka.svc:8083"
EXAMPLES = {
    "status": f"rollguard connect status {URL} --cacert ca.crt --output json",
    "restart": f"rollguard connect restart my-sink --include-tasks --only-failed --wait {URL}",
    "stop": f"rollguard connect stop my-sink --wait {URL}",
    "resume": f"rollguard connect resume my-sink --wait {URL}",
    "auto-restart": f"rollguard connect auto-restart {URL} --state-configmap kafka/auto-restart "
    "--metrics-listen 0.0.0.0:9404",
    "list": "rollguard {tool} offsets list --connector {name} --to offsets/ " + URL,
    "alter": "rollguard {tool} offsets alter --connector {name} --from offsets/ --stop --dry-run "
    + URL,
    "reset": "rollguard {tool} offsets reset --connector {name} --stop " + URL,
}


def _described(actions: Any, name: str, text: str, example: str) -> Any:
    return actions.add_parser(
        name, help=text, description=f"{text[0].upper()}{text[1:]}. Example:\n  {example}"
    )


def add_parsers(sub: Any) -> None:
    connect = sub.add_parser(
        "connect",
        help="Kafka Connect: status, restarts, stop/resume, auto-restart, offsets",
        description="Kafka Connect operations. Example:\n  " + EXAMPLES["status"],
    )
    actions = connect.add_subparsers(dest="action", required=True, parser_class=Parser)

    status = _described(
        actions, "status", "every connector and task; exit 1 if any FAILED", EXAMPLES["status"]
    )
    status.add_argument("names", nargs="*", metavar="NAME", help="only these connectors")
    ConnectOptions.add_flags(status, ENV_PREFIX)
    status.set_defaults(run=_command(ConnectOptions, commands.status))

    restart = _described(
        actions, "restart", "restart a connector (KIP-745), on any version", EXAMPLES["restart"]
    )
    restart.add_argument("connector_name", metavar="CONNECTOR", nargs="?")
    restart.add_argument("--include-tasks", action="store_true", help="restart its tasks too")
    restart.add_argument("--only-failed", action="store_true", help="only the FAILED ones")
    restart.add_argument(
        "--all-failed",
        action="store_true",
        help="every connector with something FAILED (read once), its FAILED parts only",
    )
    _wait_flag(restart, "nothing is RESTARTING, and fail if anything is FAILED")
    WaitOptions.add_flags(restart, ENV_PREFIX)
    restart.set_defaults(run=_command(WaitOptions, commands.restart))

    for name, text, until in (
        ("stop", "stop a connector and its tasks (Kafka 3.5+)", "it is STOPPED"),
        ("resume", "resume a paused or stopped connector", "it and its tasks are RUNNING"),
    ):
        parser = _described(actions, name, text, EXAMPLES[name])
        parser.add_argument("connector_name", metavar="CONNECTOR")
        _wait_flag(parser, until)
        WaitOptions.add_flags(parser, ENV_PREFIX)
        parser.set_defaults(run=_command(WaitOptions, getattr(commands, name)))

    watching = _described(
        actions, "auto-restart", "restart failed connectors, with backoff", EXAMPLES["auto-restart"]
    )
    watching.add_argument("--once", action="store_true", help="one pass, then exit")
    AutoRestartOptions.add_flags(watching, ENV_PREFIX)
    watching.set_defaults(run=auto_restart)

    _offsets_parsers(actions, "connect", "offsets of any connector (key offsets.json)", "my-sink")
    mm2 = sub.add_parser(
        "mm2",
        help="MirrorMaker 2 connector offsets",
        description="MirrorMaker 2 connector offsets (Strimzi proposal 083). Example:\n  "
        + EXAMPLES["list"].format(tool="mm2", name="'east->west.MirrorSourceConnector'"),
    )
    mm2_actions = mm2.add_subparsers(dest="action", required=True, parser_class=Parser)
    _offsets_parsers(
        mm2_actions,
        "mm2",
        "MirrorMaker 2 offsets (key NAME.json, -> as --)",
        "'east->west.MirrorSourceConnector'",
    )


def _wait_flag(parser: argparse.ArgumentParser, until: str) -> None:
    parser.add_argument(
        "--wait", action="store_true", help=f"poll the status until {until} (--wait-timeout)"
    )


def _offsets_parsers(actions: Any, tool: str, text: str, name: str) -> None:
    offsets = actions.add_parser(
        "offsets",
        help=text,
        description=f"{text[0].upper()}{text[1:]}. Example:\n  "
        + EXAMPLES["list"].format(tool=tool, name=name),
    )
    verbs = offsets.add_subparsers(dest="verb", required=True, parser_class=Parser)
    for verb, help_text in (
        ("list", "write the connector's offsets into a folder or ConfigMap"),
        ("alter", "PATCH the offsets read from a folder, file or ConfigMap"),
        ("reset", "DELETE the connector's offsets"),
    ):
        parser = _described(verbs, verb, help_text, EXAMPLES[verb].format(tool=tool, name=name))
        if verb != "list":
            parser.add_argument("--stop", action="store_true", help="stop the connector first")
            parser.add_argument(
                "--leave-stopped",
                action="store_true",
                help="with --stop: leave it STOPPED if the change fails (default: put it back)",
            )
            parser.add_argument(
                "--resume",
                action="store_true",
                help="with --stop: put it back as it was after the change succeeds, too",
            )
            parser.add_argument(
                "--dry-run",
                action="store_true",
                help="print what would change (from GET offsets); send nothing that changes",
            )
        OffsetsOptions.add_flags(parser, ENV_PREFIX)
        parser.set_defaults(run=_command(OffsetsOptions, commands.offsets), tool=tool)


def load(cls: type[Options], args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    return cls.load(args, environ, ENV_PREFIX, legacy_prefix=LEGACY_PREFIX)


def _command(cls: type[Options], body: Any) -> Any:
    """A one-shot command: options loaded and inputs checked before anything is sent, then the
    coroutine under run_until_signal (SIGINT and SIGTERM: exit 3)."""

    def run_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
        options = load(cls, args, environ)
        prepared = body(args, options, environ)  # ConfigError here: exit 2, nothing sent
        return run_until_signal(commands.guarded(prepared), interrupted=_say_interrupted)

    return run_command


def _say_interrupted(signum: signal.Signals) -> None:
    print(f"rollguard: interrupted by {signum.name}", file=sys.stderr)


def auto_restart(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """The watcher, a service: SIGTERM is its normal stop (exit 0), SIGINT exit 3."""
    options = load(AutoRestartOptions, args, environ)
    watch, where = watcher.auto_restart(args, options, environ)

    def interrupted(_: Any) -> None:
        watcher.watch_logger.info("stopped; counts are kept in %s", where)

    return run_until_signal(watch, on_sigterm=ExitCode.OK, interrupted=interrupted)
