"""Help that shows a command's own flags, by section, and "did you mean" for every mistyped
name: sub-commands at every level and closed lists of values, as for flags.

The sections and the commands a flag applies to are declared with the flag
(`rollguard.shared.settings.option(group=, commands=)`); `rollguard plan` accepts roll's own
flags, so that one command line serves both, but leaves them out of its help and says it
ignores them.
"""

from __future__ import annotations

import argparse
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_cli_flags import COMMANDS, refused

from rollguard.roller import cli as roller_cli
from rollguard.roller.roll.cli.options import ROLL, RollOptions
from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.settings import Group, Options, option
from rollguard.shared.suggest import closest

from helpers import run

PLAN_SECTIONS = ["connection", "nodes", "safety", "gates", "timing", "batches", "prediction",
                 "configuration", "output", "retries"]  # fmt: skip
ROLL_ONLY = ["--poll-interval", "--stall-timeout", "--restart-timeout", "--safety-wait",
             "--elect-preferred-leaders", "--roll-id", "--resume", "--state-dir",
             "--metrics-listen", "--canary", "--canary-baseline", "--canary-max-p99",
             "--canary-window"]  # fmt: skip
PLAN_ONLY: list[str] = []  # --compare-config and its two were plan's before a roll took them


def sections(text: str) -> list[str]:
    """The titles of a --help's argument groups, in order (argparse's own `options` first)."""
    return re.findall(r"^([a-z][a-z ]*):$", text, flags=re.MULTILINE)


def section(text: str, title: str) -> str:
    start = text.index(f"\n{title}:\n")
    end = text.find("\n\n", text.find("\n  --", start))
    return text[start : end if end != -1 else len(text)]


def test_plan_help_lists_plan_s_flags_only_by_section(tmp_path: Path) -> None:
    done = run(["rollguard", "plan", "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert sections(done.stdout) == ["options", *PLAN_SECTIONS]
    for flag in ROLL_ONLY:
        assert f"{flag} " not in done.stdout, flag
    assert "--bootstrap SERVERS" in section(done.stdout, "connection")
    assert "--cacert PATH" in section(done.stdout, "connection")
    assert "--max-clock-skew" in section(done.stdout, "safety")
    assert "--max-batch-size" in section(done.stdout, "batches")
    assert "--config-key KEY|PATH" in section(done.stdout, "configuration")
    assert done.stdout.startswith("usage: rollguard plan (--inventory FILE | --namespace NS")


def test_roll_help_has_the_same_sections_and_its_own(tmp_path: Path) -> None:
    done = run(["rollguard", "roll", "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert sections(done.stdout) == ["options", *PLAN_SECTIONS[:4], "canary",
                                     *PLAN_SECTIONS[4:-2], "journal", "output",
                                     "retries"]  # fmt: skip
    for flag in PLAN_ONLY:
        assert f"{flag} " not in done.stdout, flag
    journal = section(done.stdout, "journal")
    assert all(flag in journal for flag in ("--roll-id", "--resume", "--state-dir"))
    assert "--poll-interval" in section(done.stdout, "timing")
    assert "--safety-wait" in section(done.stdout, "safety")


def test_every_roll_flag_is_declared_with_its_section() -> None:
    flags = RollOptions.flags()
    assert all(flag.group is not None for flag in flags), [f.name for f in flags if not f.group]
    roll_only = sorted(f"--{f.name}" for f in flags if f.commands == frozenset(ROLL))
    assert roll_only == sorted(ROLL_ONLY)
    plan_only = sorted(f"--{f.name}" for f in flags if f.commands == frozenset({"plan"}))
    assert plan_only == PLAN_ONLY
    assert all(not f.commands or f.commands in (frozenset(ROLL), {"plan"}) for f in flags)


def test_plan_takes_roll_s_flags_without_reading_them(tmp_path: Path) -> None:
    # A bad --roll-id or ROLLGUARD_STATE_DIR would stop `roll` there; `plan` does not read
    # them, and stops later, at the TLS files that do not exist.
    argv = ["--roll-id", "bad id!", "--poll-interval", "1s"]
    env = {"ROLLGUARD_STATE_DIR": "/proc/no/such"}
    done = run([*COMMANDS["plan"], *argv], tmp_path, env)
    assert done.returncode == ExitCode.USAGE
    assert "plan ignores --poll-interval, --roll-id: they are for roll only" in done.stderr
    assert done.stderr.splitlines()[-1] == "rollguard: CA bundle ca.pem: no such file"
    refused(run([*COMMANDS["roll"], *argv], tmp_path, env), "--roll-id: 'bad id!'")


def test_compare_config_is_for_pods_only(tmp_path: Path) -> None:
    # `plan` and `roll` with an inventory refuse it, exit 2
    for command in ("plan", "roll"):
        refused(
            run([*COMMANDS[command], "--compare-config"], tmp_path),
            "--compare-config is for pods on Kubernetes: an inventory names each node's desired "
            "file with config: (or config-command:)",
        )
    env = {"ROLLGUARD_COMPARE_CONFIG": "yes", "ROLLGUARD_CONFIG_KEY": " "}
    refused(run(COMMANDS["plan"], tmp_path, env), "ROLLGUARD_CONFIG_KEY", "an empty key")


# ---- "did you mean" ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["rollguard", "rol"],
         "rollguard: invalid choice: 'rol' is not a command (choose from state, roll, plan, "
         "features, finalize, collect, connect, mm2, controller); did you mean roll? (see --help)"),
        (["rollguard", "connect", "restrat", "c"],
         "rollguard connect: invalid choice: 'restrat' is not a command (choose from status, "
         "restart, stop, resume, auto-restart, offsets); did you mean restart? (see --help)"),
        (["rollguard", "mm2", "ofsets", "list"],
         "rollguard mm2: invalid choice: 'ofsets' is not a command (choose from offsets); "
         "did you mean offsets? (see --help)"),
        (["rollguard", "mm2", "offsets", "lst"], "did you mean list?"),
        (["rollguard-certs", "issue-clent", "x"], "did you mean issue-client?"),
        (["rollguard", "zzz"], "'zzz' is not a command (choose from state, roll, plan, features, "
                               "finalize, "
                               "collect, connect, mm2, controller) (see --help)"),
    ],
)  # fmt: skip
def test_a_mistyped_command_at_any_level_is_exit_2_with_a_suggestion(
    tmp_path: Path, argv: list[str], text: str
) -> None:
    refused(run(argv, tmp_path), text)


@pytest.mark.parametrize(
    ("command", "argv", "text"),
    [
        ("plan", ["--output", "jsn"], "rollguard: --output: 'jsn' is not one of text, json; "
                                      "did you mean json?"),
        ("roll", ["--on-agent-unreachable", "forse"],
         "rollguard: --on-agent-unreachable: 'forse' is not one of wait, force; did you mean "
         "force?"),
        ("agent", ["--log-level", "warnin"], "did you mean warning?"),
        ("agent", ["--event-loop", "uvlop"], "'uvlop' is not uvloop or asyncio; did you mean "
                                             "uvloop?"),
        ("certs", ["--key-type", "rsb"], "rollguard-certs issue-client: argument --key-type: "
                                         "invalid choice: 'rsb' (choose from 'ec', 'rsa'); did "
                                         "you mean rsa? (see --help)"),
        ("roll", ["--on-agent-unreachable", "kill"], "'kill' is not one of wait, force"),
    ],
)  # fmt: skip
def test_a_mistyped_choice_is_exit_2_with_a_suggestion(
    tmp_path: Path, command: str, argv: list[str], text: str
) -> None:
    done = run([*COMMANDS[command], *argv], tmp_path)
    refused(done, text)
    assert ("did you mean" in text) == ("did you mean" in done.stderr)


@pytest.mark.parametrize(
    ("word", "known", "meant"),
    [
        ("--al", ["--all", "--all-nodes"], "--all"),  # the shortest it begins
        ("JSON", ["text", "json"], "json"),  # another case
        ("restrat", ["status", "restart", "resume"], "restart"),  # a close spelling
        ("kafka-O", ["kafka-0", "kafka-1"], None),  # as close to both: no guess
        ("zzz", ["roll", "plan"], None),  # far from all
        ("roll", ["roll", "plan"], None),  # not a miss
        ("", ["roll"], None),
    ],
)
def test_the_one_rule_for_a_near_miss(word: str, known: list[str], meant: str | None) -> None:
    assert closest(word, known) == meant


# ---- the declaration, in any command ---------------------------------------------------------

FIRST = Group("first", "what comes first")
LAST = Group("last")


@dataclass(frozen=True, kw_only=True)
class Inherited(Options):
    group = LAST

    colour: str = option("red", str, "a colour", "NAME")


@dataclass(frozen=True, kw_only=True)
class Example(Inherited):
    sections = (FIRST, LAST)

    size: int = option("1", int, "a size", "N", group=FIRST)
    journal: str = option("j", str, "only for write", "DIR", group=FIRST, commands=("write",))
    loose: str = option("x", str, "in no section", "X", group=None)


def parser_for(command: str, prefix: str | None) -> Parser:
    parser = Parser(prog=f"t {command}")
    Example.add_flags(parser, prefix, command)
    return parser


@pytest.mark.parametrize("prefix", ["T_", None])
def test_a_flag_goes_in_its_section_or_its_class_s(prefix: str | None) -> None:
    text = parser_for("write", prefix).format_help()
    assert sections(text) == ["options", "first", "last"]
    assert "what comes first" in section(text, "first")
    assert "--journal" in section(text, "first") and "--colour" in section(text, "last")
    assert "--loose" in section(text, "options")


@pytest.mark.parametrize("prefix", ["T_", None])
def test_a_flag_for_another_command_is_hidden_kept_at_its_default_and_named_if_given(
    prefix: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    parser = parser_for("read", prefix)
    assert "--journal" not in parser.format_help()
    args = parser.parse_args(["--journal", "elsewhere", "--size", "2"])
    with caplog.at_level(logging.WARNING):
        options = Example.load(args, {"T_JOURNAL": "from-env"}, prefix, command="read")
    assert (options.journal, options.size) == ("j", 2)
    assert "read ignores --journal: it is for write only" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        quiet = Example.load(parser_for("read", prefix).parse_args([]), {}, prefix, command="read")
    assert quiet.journal == "j" and caplog.text == ""
    written = Example.load(parser_for("write", prefix).parse_args([]), {}, prefix,
                           command="write")  # fmt: skip
    assert written.journal == "j"


def test_without_a_command_every_flag_is_shown_and_read() -> None:
    parser = argparse.ArgumentParser()
    Example.add_flags(parser, "T_")
    assert "--journal" in parser.format_help()
    assert Example.load(parser.parse_args([]), {"T_JOURNAL": "env"}, "T_").journal == "env"


@pytest.mark.parametrize("command", ["collect", "state", "features", "finalize"])
def test_the_roller_s_other_commands_show_every_flag_they_take(command: str) -> None:
    parser = next(p for p in parsers() if p.prog == f"rollguard {command}")
    text = parser.format_help()
    taken = [o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
    assert all(option in text for option in taken)
    assert "retries:" in text or command == "features"  # it asks Kafka only, not the agents


def parsers() -> list[argparse.ArgumentParser]:
    sub = next(a for a in roller_cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))  # fmt: skip
    return list(sub.choices.values())
