"""`rollguard roll` and `rollguard plan`: the roll's commands (`rollguard state`: `state.py`).

    rollguard roll  (--inventory FILE | --namespace NS --selector SEL) --bootstrap HOST:PORT ...
    rollguard plan  (same flags): the same observation and decisions, printed with why each node
        is in the plan, its place in the order and what holds it; nothing restarted, nothing
        written (roll's own flags are accepted and ignored, with a warning)

Every option can also be set as `ROLLGUARD_<OPTION>`. Exit codes: `roll` 0 rolled, 1 the roll
failed (the reason names the node and the cause), 2 bad flags, variables, files or node names,
no journal to resume, or on Kubernetes a permission the roller's Role lacks (nothing was
restarted), 3 interrupted by SIGINT or SIGTERM (resume with --resume ROLL_ID); `plan` 0, 1 when
the cluster cannot be observed, or 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import secrets
import signal
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rollguard.roller.options import (
    ENV_PREFIX,
)
from rollguard.roller.roll.cli.configuring import with_configs
from rollguard.roller.roll.cli.display import LiveTable, finish, on_terminal, reporter
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.cli.session import check_state_dir, opened
from rollguard.roller.roll.planning import plan_lines
from rollguard.roller.roll.roller import RollResult
from rollguard.shared.cli import ExitCode, report_failure, run_until_signal
from rollguard.shared.converters import format_duration
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.logs import FAILURE, PROGRESS
from rollguard.shared.retry import RetryStats

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)
progress = logging.getLogger(PROGRESS)  # the roll's progress lines, on stderr


# What every roll and plan needs, then the sections of --help (the full list is 40 flags long).
USAGE = (
    "(--inventory FILE | --namespace NS --selector SELECTOR)\n"
    f"{'':22}--bootstrap SERVERS --cert PATH --key PATH --cacert PATH [options]"
)


PAUSE_HELP = (
    "\n\nA running roll is paused between nodes and resumed (see their --help):\n"
    "  rollguard roll pause --roll-id ID (--namespace NS | --state-dir DIR)\n"
    "  rollguard roll resume --roll-id ID (--namespace NS | --state-dir DIR)"
)


def add_parsers(sub: Any) -> None:
    for name, text, example in (
        (
            "roll",
            "roll the cluster, never restarting a broker in recovery",
            "rollguard roll --inventory nodes.yaml --bootstrap kafka-0:9092 --cert roller.crt "
            "--key roller.key --cacert ca.crt",
        ),
        (
            "plan",
            "print what a roll would do now; restart nothing, write nothing",
            "rollguard plan --namespace kafka --selector strimzi.io/cluster=prod "
            "--bootstrap prod-kafka-bootstrap:9092 --cert roller.crt --key roller.key "
            "--cacert ca.crt --output json",
        ),
    ):
        parser = sub.add_parser(
            name,
            help=text,
            description=f"{text[0].upper()}{text[1:]}. Example:\n  {example}"
            + (PAUSE_HELP if name == "roll" else ""),
            usage=f"rollguard {name} {USAGE}",
        )
        # Each command lists its own flags, by section; `plan` accepts roll's too, hidden.
        RollOptions.add_flags(parser, ENV_PREFIX, command=name)
        parser.set_defaults(run=roll_command)


# ---- roll and plan ----------------------------------------------------------------------


def summary(result: RollResult) -> str:
    """What the whole roll did, a resumed one's earlier runs included: the nodes restarted and
    configured live, by name; those left out, by name and why; those held for later."""
    detail = f"restarted {len(result.restarted)}{_names(result.restarted)}"
    if result.configured:
        detail += f", configured live {len(result.configured)}{_names(result.configured)}"
    detail += f", skipped {len(result.skipped)}"
    if result.left_out:
        whys: dict[str, list[str]] = {}
        for name, why in result.left_out.items():
            whys.setdefault(why, []).append(name)
        said = "; ".join(f"{', '.join(names)}: {why}" for why, names in whys.items())
        detail += f" ({said})"
    if result.held:
        detail += (
            f", held {', '.join(result.held)} (`rollguard roll --resume {result.roll_id}` "
            "without --hold takes them)"
        )
    return detail


def _names(names: list[str]) -> str:
    return f" ({', '.join(names)})" if names else ""


def _new_roll_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


async def _run(command: str, options: RollOptions, stats: RetryStats, roll_id: str) -> int:
    async with opened(command, options, stats, roll_id) as session:
        address = await session.start()
        if address is not None:
            progress.info("roll %s: metrics on http://%s/metrics", roll_id, address)
        nodes = session.nodes
        # A live table only for a person at a terminal; anything else gets plain lines.
        display = (
            LiveTable(nodes)
            if on_terminal() and options.output == "text" and options.log_format == "text"
            else None
        )
        progress.info(
            "%s: %d node%s; asking Kafka at %s (Admin API) and the agents",
            command,
            len(nodes),
            "" if len(nodes) == 1 else "s",
            options.bootstrap,
        )
        roller = await session.roller(on_progress=reporter(display, options.output))
        history, events, configs = session.history, session.events, session.configs
        if command == "plan":
            try:
                entries = await roller.plan()
                if configs is not None:
                    entries = with_configs(entries, configs.compared)
            except ConfigError:
                raise
            except RollguardError as exc:
                json_output = options.output == "json"
                return report_failure(
                    f"plan failed: {exc}", ExitCode.FAILED, json_output=json_output
                )
            if options.output == "json":
                for entry in entries:
                    print(json.dumps(entry.to_json()))
            else:
                print("\n".join(plan_lines(entries)))
            if history is not None:
                history.announce(entries, options.restart_estimate, options.output, events)
            return 0
        if history is not None:
            try:
                # The roll checks its agents itself, at once.
                entries = await roller.plan(check_agents=False)
                history.announce(entries, options.restart_estimate, options.output, events)
            except RollguardError as exc:  # the roll itself says it better, at once
                logger.warning("no prediction: %s", exc)
        progress.info("roll %s: journal and events in %s", roll_id, options.state_dir)
        canary = session.canary
        # The table is gone before the outcome is printed: it is stdout's, not the table's.
        with display if display is not None else contextlib.nullcontext():
            try:
                async with canary or contextlib.nullcontext():
                    result = await roller.roll(roll_id, resume=options.resume is not None)
            except ConfigError:
                raise  # exit 2: nothing was restarted
            except RollguardError as exc:  # RollFailed, LeaseHeld, a platform's error...
                failure: RollguardError | None = exc
            else:
                failure = None
        for line in canary.lines() if canary else ():  # what each restart cost
            progress.info("%s", line)
        if failure is not None:
            finish(options.output, options.state_dir, roll_id, "failed", str(failure), stats)
            return ExitCode.FAILED
        detail = summary(result)
        if history is not None and history.predicted is not None:
            took = time.monotonic() - history.started
            detail += (
                f"; took {format_duration(round(took))} against "
                f"{format_duration(round(history.predicted))} predicted"
            )
        finish(options.output, options.state_dir, roll_id, "completed", detail, stats, result)
        return 0


def roll_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = RollOptions.load(args, environ, ENV_PREFIX, command=args.command)
    if args.command == "roll":  # `plan` writes nothing
        check_state_dir(options.state_dir)
    roll_id = options.resume or options.roll_id or _new_roll_id()

    def interrupted(signum: signal.Signals) -> None:
        if args.command == "roll":
            failure = logging.getLogger(FAILURE)
            failure.error("interrupted by %s; resume with --resume %s", signum.name, roll_id)

    return run_until_signal(
        _run(args.command, options, RetryStats(), roll_id), interrupted=interrupted
    )
