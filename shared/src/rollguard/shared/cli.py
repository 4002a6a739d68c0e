"""What every rollguard command line shares: exact flags, one-line errors, exit codes, --version.

argparse accepts any unambiguous prefix of a long flag, so `--operation-timeout 60` (meant as
60 seconds) once ran as `--operation-timeout-ms 60` and a starting broker was force-restarted
after 0.06 s. `allow_abbrev=False` is not enough on every Python (some versions still matched
`--prefix=value`), so `Parser` never looks prefixes up at all: a long flag is taken exactly as
written, and anything else is a usage error that names it and suggests the closest real flag.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from enum import IntEnum
from typing import Any, NoReturn, TypeVar

from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.logs import FAILURE
from rollguard.shared.suggest import closest, did_you_mean

T = TypeVar("T")


class ExitCode(IntEnum):
    """The exit codes every rollguard command shares (a command may add its own above 3)."""

    OK = 0
    FAILED = 1  # the work was attempted and failed; the message names what and why
    USAGE = 2  # bad flags, variables or files; nothing was started
    INTERRUPTED = 3  # SIGINT or SIGTERM; what can be resumed says how


def version() -> str:
    """The version `--version` prints: rollguard-shared's (the components are released together)."""
    try:
        return importlib.metadata.version("rollguard-shared")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Version(argparse.Action):
    """`--version`, looked up when asked: importlib.metadata reads every installed distribution
    (10-15 ms), and a command builds a parser for each of its sub-commands."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser._print_message(f"{parser.prog} {version()}\n", sys.stdout)
        parser.exit()


class _Formatter(argparse.HelpFormatter):
    """Descriptions wrapped as prose, except lines indented by two spaces: an example command
    stays on a line of its own, whole."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for line in text.splitlines():
            if line.startswith("  "):
                out.append(indent + line)
            else:
                out.append(super()._fill_text(line, width, indent))
        return "\n".join(out)


class Parser(argparse.ArgumentParser):
    """argparse without prefix matching, with one-line errors (exit 2) and "did you mean" for a
    mistyped flag, sub-command or choice (`rollguard.shared.suggest`).

    A parser that shows help also gets `--version` (unless `with_version=False`): the top-level
    command and each sub-command. Parsers used only as `parents=` (add_help=False) do not, so
    their children do not see the flag twice. A command with sub-commands that is run bare
    prints its help on stderr and exits 2.
    """

    def __init__(self, *args: Any, with_version: bool | None = None, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self._renamed: list[tuple[str, str, str, str]] = []  # old flag, its dest, new flag, dest
        if self.add_help if with_version is None else with_version:
            self.add_argument("--version", action=_Version, help="print the version and exit")

    def add_renamed(self, old: str, new: str) -> None:
        """Keep `old` working as a hidden alias of the already added option `new`: a value given
        under the old name is used with a warning on stderr; giving both is a usage error."""
        action = next(a for a in self._actions if new in a.option_strings)
        old_dest = "_renamed_" + old.lstrip("-").replace("-", "_")
        kind: Any = action.type if action.type is not None else str
        self.add_argument(old, dest=old_dest, type=kind, help=argparse.SUPPRESS)
        self._renamed.append((old, old_dest, new, action.dest))

    def _apply_renamed(self, parsed: argparse.Namespace) -> None:
        for old, old_dest, new, dest in self._renamed:
            value = getattr(parsed, old_dest, None)
            if value is None:
                continue
            if getattr(parsed, dest, None) is not None:
                self.error(f"give {new} or {old}, not both")
            setattr(parsed, dest, value)
            print(f"{self.prog}: warning: {old} is deprecated; use {new}", file=sys.stderr)

    def _get_option_tuples(self, option_string: str) -> list[Any]:
        # argparse's only source of prefix matches. Short options keep argparse's handling
        # (`-h` only); a long option matches exactly or not at all.
        if option_string.startswith(2 * self.prefix_chars[0]):
            return []
        return list(super()._get_option_tuples(option_string))

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        if not argv and self._subparsers is not None:
            self.print_help(sys.stderr)
            self.exit(ExitCode.USAGE)
        parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            chosen = _chosen_parser(self, parsed)
            chosen.error(f"unrecognized arguments: {' '.join(extras)}{_suggest(chosen, extras)}")
        for parser in _parser_chain(self, parsed):
            if isinstance(parser, Parser):
                parser._apply_renamed(parsed)
        return parsed

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # A value outside `choices` (a sub-command's name, most often) is a one-line usage
        # error that lists the choices and, as for a flag, suggests the closest one.
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(c) for c in choices]
        hint = did_you_mean(str(value), names)
        if isinstance(action, argparse._SubParsersAction):
            message = f"invalid choice: {value!r} is not a command (choose from {', '.join(names)})"
            message += hint
            raise argparse.ArgumentError(None, message)
        listed = ", ".join(map(repr, choices))
        message = f"invalid choice: {value!r} (choose from {listed}){hint}"
        raise argparse.ArgumentError(action, message)

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{self.prog}: {message} (see --help)\n")


def argument_type(convert: Callable[[str], T]) -> Callable[[str], T]:
    """A converter's ValueError as argparse's ArgumentTypeError, so that its message (which
    names the value and the rule) is shown instead of argparse's "invalid <name> value"."""

    def typed(text: str) -> T:
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = getattr(convert, "__name__", "value")
    return typed


def _parser_chain(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> list[Any]:
    """The parsers of the command line, outermost first: the top one and each sub-command's."""
    chain: list[Any] = [parser]
    while True:
        current = chain[-1]
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(parsed, sub.dest, None) if sub is not None else None
        if sub is None or name not in sub.choices:
            return chain
        chain.append(sub.choices[name])


def _chosen_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> Any:
    """The innermost sub-command's parser: the one whose flags an unknown flag was meant for."""
    return _parser_chain(parser, parsed)[-1]


def _suggest(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The "did you mean --x?" hint for each unknown long flag that is close to a real one."""
    known = [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--")
    ]
    hints = []
    for extra in extras:
        if not extra.startswith("--") or extra == "--":
            continue
        name = extra.split("=", 1)[0]
        close = closest(name, known)
        if close is not None:
            hints.append((name, close))
    if not hints:
        return ""
    if len(hints) == 1:
        return f"; did you mean {hints[0][1]}?"
    return "; did you mean " + ", ".join(f"{good} (for {bad})" for bad, good in hints) + "?"


# ---- running a command until a signal ----------------------------------------------------

SHUTDOWN_GRACE = 2.0  # seconds a cancelled command has to clean up before the process exits


def run_until_signal(
    main: Coroutine[Any, Any, int],
    *,
    on_sigterm: int = ExitCode.INTERRUPTED,
    interrupted: Callable[[signal.Signals], None] | None = None,
    grace: float = SHUTDOWN_GRACE,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
) -> int:
    """Run a command's coroutine on a new event loop until it returns its exit code, or a signal.

    SIGINT (Ctrl-C) and SIGTERM cancel the coroutine, so its `finally` blocks and context
    managers run (a lease is released, a journal written, clients closed); the exit code is then
    3 (`ExitCode.INTERRUPTED`) for SIGINT and `on_sigterm` for SIGTERM: 3 for a command whose
    work was cut short, 0 for a service that SIGTERM is the normal way to stop.
    `interrupted(signal)` is called once the coroutine has unwound, to say what can be resumed.

    Shutdown is bounded: a coroutine still unwinding after `grace` seconds (one waiting for a
    thread that is blocked in a socket call, say) is abandoned, and so is everything at a second
    signal; the process then exits at once with the same code, instead of hanging on threads
    that the interpreter would otherwise join at exit.
    """
    loop = loop_factory()
    task = loop.create_task(main)
    received: list[signal.Signals] = []

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum)
        if len(received) == 1:
            task.cancel()
            loop.call_later(grace, _abandon, received)
        else:
            _abandon(received)

    def _abandon(signals: list[signal.Signals]) -> None:
        code = ExitCode.INTERRUPTED if signals[0] is signal.SIGINT else on_sigterm
        if interrupted is not None:
            interrupted(signals[0])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        try:
            code = int(loop.run_until_complete(task))
        except asyncio.CancelledError:
            if not received:
                raise
            code = int(ExitCode.INTERRUPTED)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        _close(loop)
    if received:
        # A command that stops gracefully may return rather than let the cancel through: the
        # signal decides the exit code either way.
        code = ExitCode.INTERRUPTED if received[0] is signal.SIGINT else on_sigterm
        if interrupted is not None:
            interrupted(received[0])
    if received and any(t.is_alive() and not t.daemon for t in threading.enumerate()[1:]):
        # A worker thread (asyncio.to_thread) still blocked in a call would be joined at exit
        # for as long as that call takes: the command is over, so the process ends now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    return int(code)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left, close async generators and the loop; executor threads are not
    joined (one may be blocked in a socket call for minutes)."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=SHUTDOWN_GRACE))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


# ---- a command's failure: one line on stderr, and one JSON object on stdout ----------------

# What the running command has reported through `report_failure`: one command per process, so
# `run_command` knows whether a failing exit code still needs its JSON object.
_reported: list[int] = []


def failure_json(message: str, code: int) -> dict[str, Any]:
    """`{"error": {"kind", "message", "exitCode"}}`: `config` for exit 2 (bad flags, variables
    or files: nothing was started), `failed` for any other failure."""
    kind = "config" if code == ExitCode.USAGE else "failed"
    return {"error": {"kind": kind, "message": message, "exitCode": int(code)}}


def report_failure(message: str, code: int, *, json_output: bool = False) -> int:
    """Say why a command failed: one line on stderr (`rollguard: <why>`, through the logger
    `rollguard.failure`, so a JSON log format makes it an object too) and, with `json_output`
    (`--output json`), `failure_json` on stdout. Returns `code`, for `return report_failure(...)`.
    A command whose JSON result carries its error itself passes `json_output=False`."""
    logging.getLogger(FAILURE).error("%s", message)
    if json_output:
        print(json.dumps(failure_json(message, code)), flush=True)
    _reported.append(int(code))
    return int(code)


def run_command(command: Callable[[], int], *, json_output: bool = False) -> int:
    """Run a command to its exit code. A ConfigError it raises is exit 2 and any other
    RollguardError exit 1, each reported by `report_failure`. With `json_output`, a command that
    fails (exit 1, 2 or 4 and above) without having reported why still leaves one JSON object on
    stdout, pointing at stderr: a script reads the outcome of every failure the same way."""
    _reported.clear()
    try:
        code = int(command())
    except ConfigError as exc:
        return report_failure(str(exc), ExitCode.USAGE, json_output=json_output)
    except RollguardError as exc:  # a platform's or a peer's error, translated at its boundary
        return report_failure(str(exc), ExitCode.FAILED, json_output=json_output)
    if json_output and code not in (ExitCode.OK, ExitCode.INTERRUPTED) and not _reported:
        text = f"the command failed with exit code {code}; its reason is on stderr"
        print(json.dumps(failure_json(text, code)), flush=True)
    return code
