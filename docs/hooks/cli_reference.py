"""The command-line reference, read from the parsers themselves, so that it cannot drift.

Every command and sub-command of `rollguard`, `rollguard-agent`, `rollguard-certs` and
`rollguard-report` is found by walking the parsers their `build_parser` functions make (as
scripts/cli_snapshot.py does), with `rollguard roll pause|resume`, whose parser is made when its
command line is parsed. A flag declared as an `option(...)` of an `Options` class
(`rollguard.shared.settings`) is described from that declaration, recorded while the parsers are
built: its help, default, variable, choices, renamed names; any other argument (a positional one)
from argparse alone. `docs/hooks/reference.py` writes the pages; tests/unit/test_docs_reference.py
checks them and that no flag lacks its help.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rollguard.shared.settings import Options

# argparse's own flags, and the version flag every rollguard command has: said once, on the
# reference's index, not under every command.
_COMMON = ("help", "version")


@dataclass(frozen=True)
class Flag:
    """One argument of a command, as the reference shows it."""

    names: tuple[str, ...]  # `--cert`; a positional argument: its metavar
    metavar: str
    help: str  # the declaration's own words, without what the parser adds (default, variable)
    section: str
    variable: str | None = None
    default: str | None = None
    required: bool = False
    switch: bool = False
    repeat: bool = False
    choices: tuple[str, ...] = ()
    renamed: tuple[str, ...] = ()  # earlier names, still accepted with a warning
    span: str = ""  # the range its converter takes ("10ms to 7d"), as its refusal says
    positional: bool = False

    @property
    def name(self) -> str:
        return self.names[0]


@dataclass(frozen=True)
class Section:
    title: str
    description: str
    flags: tuple[Flag, ...]


@dataclass(frozen=True)
class Command:
    """A command line (`rollguard connect restart`) and what its parser says of it."""

    argv: tuple[str, ...]
    summary: str  # its line in its parent's list of commands
    description: str
    usage: str
    sections: tuple[Section, ...]
    subcommands: tuple[str, ...] = ()
    # flags it accepts but ignores (another command's: `plan` takes `roll`'s, says so)
    ignored: tuple[str, ...] = ()
    hidden: tuple[str, ...] = field(default=())  # hidden names (renamed flags), for the test

    @property
    def line(self) -> str:
        return " ".join(self.argv)

    @property
    def flags(self) -> tuple[Flag, ...]:
        return tuple(flag for section in self.sections for flag in section.flags)


# ---- the parsers ---------------------------------------------------------------------------


def _builders() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    """Each console script's parser, by its stable entry point (the one place they are named)."""
    from rollguard.agent.cli import build_parser as agent
    from rollguard.certs.cli import build_parser as certs
    from rollguard.roller.cli import build_parser as roller
    from rollguard.spark.cli import build_parser as report

    return {
        "rollguard": roller,
        "rollguard-agent": agent,
        "rollguard-certs": certs,
        "rollguard-report": report,
    }


# By parser (its id): the parser, and each `Options` class, prefix and command its flags came from.
Recorded = dict[
    int, tuple[argparse.ArgumentParser, list[tuple[type[Options], str | None, str | None]]]
]


@contextlib.contextmanager
def _recording() -> Iterator[Recorded]:
    """While the parsers are built: which `Options` class, prefix and command each parser's
    flags came from (by the parser's id)."""
    seen: Recorded = {}
    original = Options.__dict__["add_flags"]

    def add_flags(
        cls: type[Options], parser: Any, prefix: str | None = None, command: str | None = None
    ) -> None:
        seen.setdefault(id(parser), (parser, []))[1].append((cls, prefix, command))
        original.__func__(cls, parser, prefix, command)

    Options.add_flags = classmethod(add_flags)  # type: ignore[method-assign,assignment]
    try:
        yield seen
    finally:
        Options.add_flags = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps usage lines to $COLUMNS: the same width at every build."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _walk(
    parser: argparse.ArgumentParser, argv: tuple[str, ...], summary: str
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    yield argv, summary, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield from _walk(sub, (*argv, name), helps.get(name, ""))


def _pause_parsers(
    recorded: Recorded,
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """`rollguard roll pause|resume`: their parser is made as their command line is parsed
    (roll/cli/pause.py says why), so it is found as `--help` makes it, by its flags' record."""
    from rollguard.roller.cli import main

    for action in ("pause", "resume"):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(["roll", action, "--help"])
        prog = f"rollguard roll {action}"
        parser = next(p for p, _ in reversed(recorded.values()) if p.prog == prog)
        yield ("rollguard", "roll", action), (parser.description or "").split(".")[0], parser


def commands() -> list[Command]:
    """Every command line of the four console scripts, in the parsers' order."""
    found: list[Command] = []
    with _recording() as recorded, _columns(86):
        for script, build in _builders().items():
            for argv, summary, parser in _walk(build(), (script,), ""):
                found.append(_command(argv, summary, parser, recorded))
                if argv == ("rollguard", "roll"):
                    found.extend(
                        _command(a, s, p, recorded) for a, s, p in _pause_parsers(recorded)
                    )
    return found


# ---- one command -------------------------------------------------------------------------


def _command(
    argv: tuple[str, ...], summary: str, parser: argparse.ArgumentParser, recorded: Recorded
) -> Command:
    options = {}  # flag name -> (its declaration, the prefix of its variable, applies here)
    for cls, prefix, command in recorded.get(id(parser), (parser, []))[1]:
        for spec in cls.flags():
            options[spec.name] = (spec, prefix, spec.applies_to(command))
    sections, hidden, subcommands = [], [], ()
    for group in parser._action_groups:
        flags = []
        for action in group._group_actions:
            if isinstance(action, argparse._SubParsersAction):
                subcommands = tuple(action.choices)
                continue
            if action.dest in _COMMON:
                continue
            if action.help == argparse.SUPPRESS:
                hidden.extend(action.option_strings)
                continue
            flags.append(_flag(action, group.title or "options", options))
        if flags:
            sections.append(
                Section(group.title or "options", group.description or "", tuple(flags))
            )
    ignored = tuple(f"--{name}" for name, (_, _, applies) in options.items() if not applies)
    return Command(
        argv,
        summary,
        parser.description or "",
        parser.format_usage().strip(),
        tuple(sections),
        subcommands,
        ignored,
        tuple(hidden),
    )


def _flag(action: argparse.Action, section: str, options: dict[str, Any]) -> Flag:
    names = tuple(action.option_strings) or (action.metavar or action.dest,)
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    declared = options.get(names[0].removeprefix("--"))
    if declared is None:  # argparse's alone
        return Flag(
            names,
            metavar if action.option_strings else "",
            action.help or "",
            section,
            default=None if action.default in (None, argparse.SUPPRESS) else str(action.default),
            required=action.required,
            choices=tuple(map(str, action.choices or ())),
            positional=not action.option_strings,
        )
    spec, prefix, _ = declared
    return Flag(
        names,
        metavar,
        spec.help,
        section,
        variable=spec.env(prefix) if prefix is not None else None,
        default=spec.default or None,
        required=spec.required,
        switch=spec.switch,
        repeat=spec.repeat,
        choices=_choices(spec.convert),
        span=_span(spec.convert),
        renamed=tuple(f"--{old}" for old, _ in spec.deprecated),
    )


# Values outside any range a number or a duration may have: the converter's refusal names its
# range ("... from 10ms to 7d").
_PROBES = ("-1", "99999999999999999999", "9999999d")


def _span(convert: Callable[[str], Any]) -> str:
    """The range a converter takes, in its own words, or "" (no range, or not a number)."""
    for probe in _PROBES:
        try:
            convert(probe)
        except Exception as exc:  # any refusal: only its words are read
            found = re.search(r"from (\S+) to (\S+?)[;,)]?$", str(exc))
            if found:
                return f"{found[1]} to {found[2]}"
    return ""


def _choices(convert: Callable[[str], Any]) -> tuple[str, ...]:
    """The closed list a converter checks against (`choice(...)`, `one_of(...)`), if any."""
    try:
        allowed = inspect.getclosurevars(convert).nonlocals.get("allowed")
    except TypeError:  # a class or a builtin: no closure
        return ()
    if isinstance(allowed, tuple | list) and all(isinstance(a, str | int) for a in allowed):
        return tuple(map(str, allowed))
    return ()
