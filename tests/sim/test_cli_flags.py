"""Flags that cannot misfire, in every rollguard command (issue 14 item 4, issue 18 item 8).

The behaviour that matters is the process's (exit code, stderr), so most tests run the installed
console scripts. Values are checked in-process through the commands' own parsers and tables.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rollguard.agent import cli as agent_cli
from rollguard.agent import config as agent_config
from rollguard.certs import cli as certs_cli
from rollguard.roller import cli as roller_cli
from rollguard.roller.collect.cli import CollectOptions
from rollguard.roller.connect import cli as connect_cli
from rollguard.roller.options import ENV_PREFIX
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.rules.settings import OnAgentUnreachable
from rollguard.roller.state import StateOptions
from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.converters import format_duration

from helpers import Pki, run

ARABIC_INDIC_60 = "\u0666\u0660"
DUMMY_TLS = ["--cert", "c.pem", "--key", "k.pem", "--cacert", "ca.pem"]
AGENT_TLS = ["--cert", "c.pem", "--key", "k.pem", "--cacert", "ca.pem"]

# Each command, with just enough flags that a bad one is the first thing it refuses.
COMMANDS: dict[str, list[str]] = {
    "roll": ["rollguard", "roll", *DUMMY_TLS, "--bootstrap", "127.0.0.1:1", "--inventory", "i"],
    "plan": ["rollguard", "plan", *DUMMY_TLS, "--bootstrap", "127.0.0.1:1", "--inventory", "i"],
    "state": ["rollguard", "state", *DUMMY_TLS, "https://127.0.0.1:1"],
    "collect": ["rollguard", "collect", *DUMMY_TLS, "--out", "o", "--inventory", "i"],
    "connect restart": ["rollguard", "connect", "restart", "c", "--connect-url", "http://h:1"],
    "auto-restart": ["rollguard", "connect", "auto-restart", "--connect-url", "http://h:1"],
    "mm2 offsets": [
        "rollguard",
        "mm2",
        "offsets",
        "list",
        "--connect-url",
        "http://h:1",
        "--connector",
        "c",
    ],
    "agent": ["rollguard-agent", *AGENT_TLS],
    "certs": ["rollguard-certs", "issue-client", "x"],
}


def refused(done: subprocess.CompletedProcess[str], *texts: str) -> None:
    """Exit 2 with one line on stderr that says each of `texts`, and no traceback."""
    assert done.returncode == ExitCode.USAGE, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for text in texts:
        assert text in lines[0], (text, lines[0])


# ---- no prefix matching ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "typed", "meant"),
    [
        ("roll", ["--operation-timeout-m", "60"], "--operation-timeout"),
        ("roll", ["--operation-timeout-m=60"], "--operation-timeout"),
        ("roll", ["--operation-timeout=60", "--safety-wai", "1m"], "--safety-wait"),
        ("plan", ["--bootstra", "h:1"], "--bootstrap"),
        ("plan", ["--al"], "--all"),
        ("state", ["--timeou", "5"], "--timeout"),
        ("collect", ["--agent-deadlin=2m"], "--agent-deadline"),
        ("connect restart", ["--include-task"], "--include-tasks"),
        ("auto-restart", ["--interva", "5"], "--interval"),
        ("mm2 offsets", ["--to-configma", "a/b"], "--to-configmap"),
        ("agent", ["--sample-interva", "1"], "--sample-interval"),
        ("agent", ["--cert-reload=5"], "--cert-reload-interval"),
        ("certs", ["--day", "3"], "--days"),
    ],
)
def test_a_shortened_flag_is_exit_2_naming_it_with_a_suggestion(
    tmp_path: Path, command: str, typed: list[str], meant: str
) -> None:
    done = run([*COMMANDS[command], *typed], tmp_path)
    refused(done, "unrecognized arguments", typed[-2] if len(typed) > 1 and "=" not in typed[-1]
            else typed[-1], f"did you mean {meant}?")  # fmt: skip


def test_an_unknown_flag_far_from_every_real_one_gets_no_suggestion(tmp_path: Path) -> None:
    done = run([*COMMANDS["roll"], "--zzzzzz"], tmp_path)
    refused(done, "rollguard roll: unrecognized arguments: --zzzzzz")
    assert "did you mean" not in done.stderr


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from parsers(child)


ALL_PARSERS = [
    *parsers(roller_cli.build_parser()),
    *parsers(certs_cli.build_parser()),
    agent_config.build_parser(Parser(prog="rollguard-agent")),
]


def leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [p for p in parsers(parser) if p._subparsers is None]


LEAVES = [
    *leaves(roller_cli.build_parser()),
    *leaves(certs_cli.build_parser()),
    agent_cli.build_parser(),
]


@pytest.mark.parametrize("parser", LEAVES, ids=lambda p: p.prog)
def test_every_command_has_a_description_with_an_example_and_a_version(
    parser: argparse.ArgumentParser,
) -> None:
    text = parser.format_help()
    program = parser.prog.split()[0]
    assert re.search(rf"Example:\n  {re.escape(program)} ", text), text
    assert "--version" in text


@pytest.mark.parametrize("parser", ALL_PARSERS, ids=lambda p: p.prog)
def test_every_parser_takes_long_flags_exactly(parser: argparse.ArgumentParser) -> None:
    assert isinstance(parser, Parser) and not parser.allow_abbrev
    longs = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for option in longs:
        for shortened in (option[:-1], f"{option[:-1]}=1", option[:4]):
            if shortened.split("=")[0] not in longs:
                # argparse's one source of prefix matches finds nothing
                assert parser._get_option_tuples(shortened) == [], shortened


# ---- durations, numbers, addresses ------------------------------------------------------------

TABLES: dict[str, tuple[Any, ...]] = {
    "roll": RollOptions.flags(),
    "collect": CollectOptions.flags(),
    "state": StateOptions.flags(),
    "connect": connect_cli.CONNECT_FLAGS,
    "auto-restart": connect_cli.AUTO_RESTART_FLAGS,
    "offsets": connect_cli.OFFSETS_FLAGS,
    "agent": agent_config.FLAGS,
}
TIME_WORDS = ("timeout", "interval", "wait", "deadline", "skew", "age")
TIME_FLAGS = sorted(
    {(table, flag.name) for table, flags in TABLES.items() for flag in flags
     if flag.name.endswith(TIME_WORDS) and not flag.name.startswith("retry-")}
)  # fmt: skip


# Flags whose default is derived from another setting: the smallest value it can take.
DERIVED_DEFAULTS = {"running-interval": "1s"}  # the agent's: 1s (persistent), 10s (jmxquery)


def flag_named(table: str, name: str) -> Any:
    (flag,) = [f for f in TABLES[table] if f.name == name]
    return flag


@pytest.mark.parametrize(("table", "name"), TIME_FLAGS)
def test_every_time_flag_takes_the_one_duration_syntax(table: str, name: str) -> None:
    flag = flag_named(table, name)
    assert flag.convert.__name__.startswith("duration_"), f"--{name} is not read as a duration"
    default = flag.convert(flag.default if flag.default is not None else DERIVED_DEFAULTS[name])
    assert default > 0
    # the default, written every way the syntax allows, is within the flag's range
    for text in (format_duration(default), f"{default * 1000:.0f}ms", f"{default:g}"):
        assert flag.convert(text) == pytest.approx(default), (name, text)
    for bad in ("6x", "inf", "nan", "1e-9", ARABIC_INDIC_60, "0", "-1", "5ms", "31d"):
        with pytest.raises(ValueError, match=f"^'{bad}' is not|^'{bad}' is out of range"):
            flag.convert(bad)


def roll_values(*argv: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Each option's value by flag name."""
    args = roller_cli.build_parser().parse_args([*COMMANDS["roll"][1:], *argv])
    values = RollOptions.read(args, environ or {}, ENV_PREFIX)
    return {flag.name: values[flag.field] for flag in RollOptions.flags()}


@pytest.mark.parametrize(
    ("argv", "environ", "name", "value"),
    [
        (["--operation-timeout", "60"], {}, "operation-timeout", 60),
        (["--operation-timeout", "6h"], {}, "operation-timeout", 21600),
        (["--operation-timeout-ms", "60"], {}, "operation-timeout", 0.06),
        ([], {"ROLLGUARD_OPERATION_TIMEOUT_MS": "4000"}, "operation-timeout", 4),
        ([], {}, "operation-timeout", 300),
        (["--max-recovery-wait", "6h"], {}, "max-recovery-wait", 21600),
        ([], {}, "safety-wait", 1800),
        (["--safety-wait", "1h30m"], {}, "safety-wait", 5400),
        ([], {}, "max-clock-skew", 30),
        ([], {}, "on-agent-unreachable", OnAgentUnreachable.WAIT),
        (["--on-agent-unreachable", "force"], {}, "on-agent-unreachable", OnAgentUnreachable.FORCE),
        ([], {}, "all", False),
        (["--all"], {}, "all", True),
        ([], {"ROLLGUARD_ALL": "true"}, "all", True),
        ([], {"ROLLGUARD_ALL": "1"}, "all", True),
        ([], {"ROLLGUARD_ALL": "no"}, "all", False),
        (["--bootstrap", "a:1, [::1]:9093"], {}, "bootstrap", "a:1,[::1]:9093"),
        ([], {}, "canary", None),
        (["--canary", "rollguard-canary"], {}, "canary", "rollguard-canary"),
        ([], {"ROLLGUARD_CANARY": "roll.canary_1"}, "canary", "roll.canary_1"),
        ([], {}, "canary-baseline", 5.0),
        (["--canary-baseline", "1m"], {}, "canary-baseline", 60.0),
    ],
)
def test_roll_flags_mean_what_they_say(
    argv: list[str], environ: dict[str, str], name: str, value: object
) -> None:
    assert roll_values(*argv, environ=environ)[name] == pytest.approx(value)


@pytest.mark.parametrize(
    ("command", "argv", "env", "texts"),
    [
        ("roll", ["--safety-wait", "6x"], {},
         ["--safety-wait: '6x' is not a duration (e.g. 90s, 5m, 6h, 1500ms; a bare number"]),
        ("roll", ["--poll-interval", "inf"], {}, ["--poll-interval: 'inf' is not a duration"]),
        ("roll", ["--poll-interval", "nan"], {}, ["--poll-interval: 'nan' is not a duration"]),
        ("roll", ["--poll-interval", "1e-9"], {}, ["--poll-interval: '1e-9' is not a duration"]),
        ("roll", ["--poll-interval", "0.001"], {}, ["--poll-interval: '0.001' is out of range"]),
        ("roll", ["--poll-interval", "2h"], {}, ["'2h' is out of range; give a duration from"]),
        ("roll", ["--stall-timeout", ARABIC_INDIC_60], {}, ["--stall-timeout:", "not a duration"]),
        ("roll", ["--operation-timeout", "0"], {}, ["--operation-timeout: '0' is not a positive"]),
        ("roll", ["--max-clock-skew=-1s"], {}, ["--max-clock-skew: '-1s' is not a positive"]),
        ("roll", ["--restart-timeout", "5 m"], {}, ["--restart-timeout: '5 m' is not a duration"]),
        ("roll", [], {"ROLLGUARD_MAX_RECOVERY_WAIT": "6hours"},
         ["ROLLGUARD_MAX_RECOVERY_WAIT: '6hours' is not a duration"]),
        ("roll", ["--on-agent-unreachable", "kill"], {},
         ["--on-agent-unreachable: 'kill' is not one of wait, force"]),
        ("roll", [], {"ROLLGUARD_ALL": "sometimes"}, ["ROLLGUARD_ALL: 'sometimes' is not true"]),
        ("roll", ["--retry-max-retries", ARABIC_INDIC_60], {}, ["--retry-max-retries:"]),
        ("roll", ["--retry-initial-backoff-ms", "inf"], {}, ["--retry-initial-backoff-ms:"]),
        ("roll", ["--retry-max-backoff-ms", "nan"], {}, ["--retry-max-backoff-ms:"]),
        ("roll", ["--retry-initial-backoff-ms", "-5"], {}, ["--retry-initial-backoff-ms -5"]),
        ("roll", ["--roll-id", "r\u0660"], {}, ["--roll-id:"]),
        ("roll", ["--canary", "a topic"], {}, ["--canary: 'a topic': a topic name is letters"]),
        ("roll", ["--canary", "x" * 250], {}, ["--canary:", "a topic name is letters"]),
        ("roll", ["--canary-baseline", "500ms"], {}, ["--canary-baseline: '500ms' is out of"]),
        ("plan", ["--timeout", "1e-9"], {}, ["--timeout: '1e-9' is not a duration"]),
        ("state", ["--timeout", "nan"], {}, ["--timeout: 'nan' is not a duration"]),
        ("collect", ["--agent-deadline", "inf"], {}, ["--agent-deadline: 'inf' is not a"]),
        ("collect", ["--concurrency", "\u0664"], {}, ["--concurrency:", "is not a whole number"]),
        ("collect", ["--page-size", "10001"], {}, ["--page-size: '10001' is not a whole number"]),
        ("connect restart", ["--timeout", "inf"], {}, ["--timeout: 'inf' is not a duration"]),
        ("auto-restart", ["--interval", "1e-9"], {}, ["--interval: '1e-9' is not a duration"]),
        ("auto-restart", ["--max-restarts", "\u0663"], {}, ["--max-restarts:", "whole number"]),
        ("auto-restart", ["--metrics-listen", "h:99999"], {},
         ["--metrics-listen: 'h:99999': port '99999' is not a number from 0 to 65535"]),
        ("mm2 offsets", ["--stop-timeout", "0"], {}, ["--stop-timeout: '0' is not a positive"]),
        ("agent", ["--sample-interval", "6x"], {}, ["--sample-interval: '6x' is not a duration"]),
        ("agent", ["--sample-interval", "1e-9"], {}, ["--sample-interval: '1e-9' is not a"]),
        ("agent", [], {"ROLLGUARD_AGENT_HEARTBEAT_INTERVAL": "inf"},
         ["ROLLGUARD_AGENT_HEARTBEAT_INTERVAL: 'inf' is not a duration"]),
        ("agent", ["--retry-jitter-factor", "nan"], {}, ["--retry-jitter-factor: 'nan' is not"]),
        ("certs", ["--days", ARABIC_INDIC_60], {}, ["--days:", "is not a whole number"]),
        ("certs", ["--days", "9" * 30], {}, ["--days:", "from 1 to 36500"]),
    ],
)  # fmt: skip
def test_bad_numbers_are_exit_2_naming_the_flag_or_variable(
    tmp_path: Path, command: str, argv: list[str], env: dict[str, str], texts: list[str]
) -> None:
    refused(run([*COMMANDS[command], *argv], tmp_path, env), *texts)


def test_the_old_operation_timeout_flag_warns_and_the_new_one_does_not(
    pki: Pki, tmp_path: Path
) -> None:
    # plan reads every flag and then stops, with exit 2, at the inventory that does not exist.
    base = ["rollguard", "plan", *pki.client_flags(), "--bootstrap", "127.0.0.1:1",
            "--inventory", str(tmp_path / "missing.yaml")]  # fmt: skip
    old = run([*base, "--operation-timeout-ms", "60"], tmp_path)
    assert old.returncode == ExitCode.USAGE and "missing.yaml" in old.stderr
    assert "--operation-timeout-ms is deprecated; use --operation-timeout 60ms" in old.stderr
    env = run(base, tmp_path, {"ROLLGUARD_OPERATION_TIMEOUT_MS": "300000"})
    assert "ROLLGUARD_OPERATION_TIMEOUT_MS is deprecated; use ROLLGUARD_OPERATION_TIMEOUT=5m" in (
        env.stderr
    )
    new = run([*base, "--operation-timeout", "60"], tmp_path)
    assert new.returncode == ExitCode.USAGE and "deprecated" not in new.stderr


def test_old_and_new_name_together_is_exit_2(tmp_path: Path) -> None:
    done = run([*COMMANDS["roll"], "--operation-timeout", "1m", "--operation-timeout-ms", "60"],
               tmp_path)  # fmt: skip
    refused(done, "give --operation-timeout or --operation-timeout-ms, not both")


def test_all_is_a_switch(tmp_path: Path) -> None:
    refused(run([*COMMANDS["roll"], "--all", "true"], tmp_path), "unrecognized arguments: true")


@pytest.mark.parametrize(
    ("bootstrap", "message"),
    [
        ("kafka:x", "'kafka:x': port 'x' is not a number from 1 to 65535"),
        ("kafka:70000", "port '70000' is not a number from 1 to 65535"),
        ("kafka:0", "port '0' is not a number"),
        ("kafka:\u0669\u0660\u0669\u0662", "is not a number from 1 to 65535"),
        ("kafka", "'kafka' is not HOST:PORT"),
        (":9092", "':9092' is not HOST:PORT"),
        ("a:1,,b:2", "'a:1,,b:2' has an empty entry"),
        ("", "'' has an empty entry"),
        ("fe80::1:9092", "an IPv6 address goes in brackets"),
    ],
)
def test_a_bad_bootstrap_is_exit_2_naming_it(tmp_path: Path, bootstrap: str, message: str) -> None:
    refused(run([*COMMANDS["roll"], "--bootstrap", bootstrap], tmp_path), "--bootstrap: ", message)


def test_a_state_dir_that_is_a_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = run([*COMMANDS["roll"], "--state-dir", "file"], tmp_path)
    refused(done, "--state-dir file: exists and is not a directory")
    done = run([*COMMANDS["roll"]], tmp_path, {"ROLLGUARD_STATE_DIR": "file/sub"})
    refused(done, "--state-dir file/sub: cannot be created, file is not a directory")


def read_only_folder(tmp_path: Path) -> Path | None:
    """A folder this process cannot write to: a 0500 one, or for root (who may write to any
    mode) a read-only system folder."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    if not os.access(folder, os.W_OK):
        return folder
    folder.chmod(0o700)
    system = Path("/proc/sys")
    return system if system.is_dir() and not os.access(system, os.W_OK) else None


def test_a_state_dir_that_is_not_writable_is_exit_2_before_anything_starts(
    tmp_path: Path,
) -> None:
    folder = read_only_folder(tmp_path)
    if folder is None:
        pytest.skip("no folder here is read-only for this user (root, and /proc/sys writable)")
    refused(run([*COMMANDS["roll"], "--state-dir", str(folder)], tmp_path),
            f"--state-dir {folder}: is not writable")  # fmt: skip
    refused(run([*COMMANDS["roll"], "--state-dir", str(folder / "new")], tmp_path),
            f"--state-dir {folder / 'new'}: cannot be created in {folder}")  # fmt: skip
    assert not (folder / "new").exists()


# ---- version, bare commands ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["rollguard"], ["rollguard-agent"], ["rollguard-certs"], ["rollguard", "roll"]]
)
def test_version(tmp_path: Path, argv: list[str]) -> None:
    done = run([*argv, "--version"], tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    assert done.stdout == f"{' '.join(argv)} {importlib.metadata.version('rollguard-shared')}\n"


@pytest.mark.parametrize(
    ("command", "listed"), [("rollguard", "roll"), ("rollguard-certs", "issue-server")]
)
def test_a_bare_command_prints_help_and_exits_2(tmp_path: Path, command: str, listed: str) -> None:
    done = run([command], tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert done.stderr.startswith(f"usage: {command}") and listed in done.stderr
    assert "--version" in done.stderr and "Traceback" not in done.stderr


def test_exit_codes() -> None:
    assert [(c.name, int(c)) for c in ExitCode] == [
        ("OK", 0), ("FAILED", 1), ("USAGE", 2), ("INTERRUPTED", 3)
    ]  # fmt: skip
    assert connect_cli.EXIT_NOT_FOUND == 4 and connect_cli.EXIT_CONFLICT == 5
