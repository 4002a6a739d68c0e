"""The converters every rollguard command reads its settings with (`rollguard.shared.converters`),
and `Options` read with and without an environment (`rollguard.shared.settings`)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollguard.shared.cli import Parser
from rollguard.shared.converters import (
    HostPort,
    boolean,
    braces,
    duration,
    duration_between,
    format_duration,
    host_port,
    integer,
    listen_address,
    milliseconds_to_duration,
    number_between,
    one_of,
    parse_duration,
    positive_seconds,
    servers,
)
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry_options import RetryOptions
from rollguard.shared.settings import Options, option, same

ARABIC_INDIC_60 = "\u0666\u0660"  # "٦٠", which Python's int() and float() read as 60
FULLWIDTH_5 = "\uff15"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("5m", 300),
        ("6h", 21600),
        ("1500ms", 1.5),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1d2h3m4s5ms", 93784.005),
        ("90", 90),
        ("0.5", 0.5),
        (".5", 0.5),
        ("1.5h", 5400),
        ("10ms", 0.01),
        ("30d", 30 * 86400),
        (" 5m ", 300),  # surrounding blanks, as environment files leave them
        ("007s", 7),
    ],
)
def test_good_durations(text: str, seconds: float) -> None:
    assert duration(text) == pytest.approx(seconds, abs=1e-9)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("6x", "'6x' is not a duration (e.g. 90s, 5m, 6h, 1500ms; a bare number is seconds)"),
        ("inf", "is not a duration"),
        ("nan", "is not a duration"),
        ("-inf", "is not a duration"),
        ("1e-9", "is not a duration"),
        ("1e3", "is not a duration"),
        ("1_000", "is not a duration"),
        (ARABIC_INDIC_60, "is not a duration"),
        (FULLWIDTH_5 + "s", "is not a duration"),
        ("", "is not a duration"),
        ("s", "is not a duration"),
        ("5 m", "is not a duration"),
        ("5M", "is not a duration"),
        ("1h1h", "is not a duration"),
        ("30m1h", "is not a duration"),
        ("1h30", "is not a duration"),
        ("5.m", "is not a duration"),
        ("+5s", "is not a duration"),
        ("0x10", "is not a duration"),
        ("1" * 400, "is not a duration"),
        ("0", "'0' is not a positive number; give a duration from 10ms to 30d"),
        ("0s", "'0s' is not a positive number"),
        ("-1", "'-1' is not a positive number"),
        ("-5m", "'-5m' is not a positive number"),
        ("9ms", "'9ms' is out of range; give a duration from 10ms to 30d"),
        ("0.001", "is out of range"),
        ("31d", "is out of range"),
        ("9" * 60, "is out of range"),
    ],
)
def test_bad_durations_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        duration(text)
    assert message in str(error.value)


def test_a_range_of_its_own() -> None:
    poll = duration_between("10ms", "1h")
    assert poll("1h") == 3600
    with pytest.raises(ValueError, match="'61m' is out of range; give a duration from 10ms to 1h"):
        poll("61m")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.06, "60ms"), (0.3, "300ms"), (0, "0s"), (1, "1s"), (1.5, "2s"), (45.2, "45s"),
     (59.6, "1m00s"), (65, "1m05s"), (300, "5m00s"), (5400, "1h30m"), (7322, "2h02m"),
     (21600, "6h00m"), (172801, "48h00m")],
)  # fmt: skip
def test_a_message_s_duration_is_rounded_and_reads_back(seconds: float, text: str) -> None:
    """One format in every message: milliseconds under a second, then whole seconds."""
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=0.5 if seconds < 3600 else 30)


@given(st.integers(min_value=1, max_value=30 * 86400 * 1000))
def test_any_whole_number_of_milliseconds_of_a_renamed_flag_reads_back(milliseconds: int) -> None:
    text = milliseconds_to_duration(str(milliseconds))
    assert parse_duration(text) == pytest.approx(milliseconds / 1000, abs=1e-9), text
    if milliseconds >= 10:
        assert duration(text) == pytest.approx(milliseconds / 1000, abs=1e-9), text


@pytest.mark.parametrize(
    ("text", "new"),
    [("60", "60ms"), ("300000", "5m"), ("1500", "1.5s"), ("4000", "4s"), ("0", "0"), ("-3", "-3"),
     ("90000", "1m30s"), ("172801000", "2d1s"), ("10.5", "10.5ms"), ("1234567500", "1234567.5s"),
     ("0.0001", "0.0001ms")],
)  # fmt: skip
def test_milliseconds_of_a_renamed_flag_become_a_duration(text: str, new: str) -> None:
    assert milliseconds_to_duration(text) == new


@pytest.mark.parametrize("text", ["inf", "nan", "1e3", ARABIC_INDIC_60, "60ms", ""])
def test_milliseconds_refuse_what_is_not_a_plain_number(text: str) -> None:
    with pytest.raises(ValueError, match="is not a number of milliseconds"):
        milliseconds_to_duration(text)


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("5", 5), (" 7 ", 7), ("2147483647", 2147483647)]
)
def test_good_whole_numbers(text: str, value: int) -> None:
    assert integer(0)(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ARABIC_INDIC_60, "is not a whole number"),
        (FULLWIDTH_5, "is not a whole number"),
        ("1_000", "is not a whole number"),
        ("1.0", "is not a whole number"),
        ("1e3", "is not a whole number"),
        ("inf", "is not a whole number"),
        ("", "is not a whole number"),
        ("-1", "'-1' is not a whole number from 0 to 2147483647"),
        ("2147483648", "is not a whole number from 0 to 2147483647"),
        ("9" * 5000, "is not a whole number from 0 to 2147483647"),  # no int() digit limit
    ],
)
def test_bad_whole_numbers(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        integer(0)(text)
    assert message in str(error.value)


@pytest.mark.parametrize(("text", "value"), [("3", 3.0), ("0.5", 0.5), ("168", 168.0)])
def test_positive_numbers(text: str, value: float) -> None:
    assert positive_seconds(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "1e-9", ARABIC_INDIC_60, "5s"])
def test_positive_numbers_refuse_the_rest(text: str) -> None:
    with pytest.raises(ValueError, match="is not a positive number"):
        positive_seconds(text)


@pytest.mark.parametrize(("text", "value"), [("168", 168.0), ("0.01", 0.01), ("87600", 87600.0)])
def test_numbers_of_a_unit(text: str, value: float) -> None:
    assert number_between(0.01, 87600, "hours")(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "'0' is not a number of hours from 0.01 to 87600"),
        ("87601", "is not a number of hours from 0.01 to 87600"),
        ("inf", "'inf' is not a number of hours"),
        ("1e3", "'1e3' is not a number of hours"),
        (ARABIC_INDIC_60, "is not a number of hours"),
    ],
)
def test_numbers_of_a_unit_refuse_the_rest(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        number_between(0.01, 87600, "hours")(text)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("TRUE", True), ("1", True), ("yes", True), ("false", False),
     ("0", False), ("No", False)],
)  # fmt: skip
def test_booleans(text: str, value: bool) -> None:
    assert boolean(text) is value


def test_a_boolean_that_is_neither() -> None:
    with pytest.raises(ValueError, match="'maybe' is not true or false"):
        boolean("maybe")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("kafka-0.example:9092", HostPort("kafka-0.example", 9092)),
        ("127.0.0.1:1", HostPort("127.0.0.1", 1)),
        ("[::1]:9092", HostPort("::1", 9092)),
        ("h:65535", HostPort("h", 65535)),
    ],
)
def test_good_host_ports(text: str, value: HostPort) -> None:
    assert host_port(text) == value
    assert str(host_port(text)) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kafka", "'kafka' is not HOST:PORT"),
        (":9092", "is not HOST:PORT"),
        ("h :9092", "is not HOST:PORT"),
        ("::1:9092", "an IPv6 address goes in brackets"),
        ("h:", "port '' is not a number from 1 to 65535"),
        ("h:x", "port 'x' is not a number from 1 to 65535"),
        ("h:0", "port '0' is not a number from 1 to 65535"),
        ("h:65536", "is not a number from 1 to 65535"),
        ("h:-1", "is not a number from 1 to 65535"),
        ("h:" + ARABIC_INDIC_60, "is not a number from 1 to 65535"),
    ],
)
def test_bad_host_ports(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        host_port(text)
    assert message in str(error.value)


def test_a_listen_address_may_ask_for_any_port() -> None:
    assert listen_address("127.0.0.1:0") == HostPort("127.0.0.1", 0)


@pytest.mark.parametrize(
    ("text", "result"),
    [("a:1", "a:1"), ("a:1, b:2", "a:1,b:2"), ("[::1]:9092,a:1", "[::1]:9092,a:1")],
)
def test_bootstrap_servers(text: str, result: str) -> None:
    assert servers(text) == result


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "'' has an empty entry"),
        ("a:1,,b:2", "has an empty entry"),
        ("a:1,", "has an empty entry"),
        ("a:1,b", "'b' is not HOST:PORT"),
        ("a:99999", "port '99999' is not a number from 1 to 65535"),
    ],
)
def test_bad_bootstrap_servers(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        servers(text)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("retry-max-retries", ARABIC_INDIC_60),
        ("retry-max-retries", "1.5"),
        ("retry-initial-backoff-ms", "inf"),
        ("retry-max-backoff-ms", "nan"),
        ("retry-backoff-multiplier", "Infinity"),
        ("retry-jitter-factor", ARABIC_INDIC_60),
        ("retry-initial-backoff-ms", "1e3"),
    ],
)
def test_retry_flags_refuse_what_is_not_a_plain_number(name: str, text: str) -> None:
    (flag,) = [f for f in RetryOptions.flags() if f.name == name]
    with pytest.raises(ValueError, match="is not a"):
        flag.convert(text)


# ---- options with variables ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Timed(Options):
    operation_timeout: float = option(
        "5m", duration, "how long", "DURATION",
        deprecated=(("operation-timeout-ms", milliseconds_to_duration),),
    )  # fmt: skip
    all_nodes: bool = option("false", boolean, "every node", switch=True, flag="all")


def parser_of(options: type[Options], prefix: str | None = "T_") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    options.add_flags(parser, prefix)
    return parser


def values(argv: list[str], environ: dict[str, str] | None = None) -> dict[str, object]:
    return Timed.read(parser_of(Timed).parse_args(argv), environ or {}, "T_")


@pytest.mark.parametrize(
    ("argv", "environ", "seconds"),
    [
        ([], {}, 300),
        (["--operation-timeout", "60"], {}, 60),
        (["--operation-timeout", "6h"], {}, 21600),
        (["--operation-timeout-ms", "60"], {}, 0.06),
        ([], {"T_OPERATION_TIMEOUT": "90s"}, 90),
        ([], {"T_OPERATION_TIMEOUT_MS": "300000"}, 300),
        (["--operation-timeout", "1m"], {"T_OPERATION_TIMEOUT_MS": "5"}, 60),  # the flag wins
    ],
)
def test_a_renamed_flag_keeps_working(
    argv: list[str], environ: dict[str, str], seconds: float
) -> None:
    assert values(argv, environ)["operation_timeout"] == pytest.approx(seconds)


def test_the_old_name_warns_with_the_new_spelling(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        values(["--operation-timeout-ms", "300000"])
        values([], {"T_OPERATION_TIMEOUT_MS": "60"})
    assert caplog.messages == [
        "--operation-timeout-ms is deprecated; use --operation-timeout 5m",
        "T_OPERATION_TIMEOUT_MS is deprecated; use T_OPERATION_TIMEOUT=60ms",
    ]


def test_the_new_name_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        values(["--operation-timeout", "5m"], {"T_OPERATION_TIMEOUT": "1m"})
    assert caplog.messages == []


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--operation-timeout", "1m", "--operation-timeout-ms", "60"], {},
         "give --operation-timeout or --operation-timeout-ms, not both"),
        ([], {"T_OPERATION_TIMEOUT": "1m", "T_OPERATION_TIMEOUT_MS": "60"},
         "give T_OPERATION_TIMEOUT or T_OPERATION_TIMEOUT_MS, not both"),
        (["--operation-timeout-ms", "inf"], {},
         "--operation-timeout-ms: 'inf' is not a number of milliseconds"),
        (["--operation-timeout-ms", "5"], {},
         "--operation-timeout-ms: '5ms' is out of range; give a duration from 10ms to 30d"),
        (["--operation-timeout-ms", "0"], {}, "--operation-timeout-ms: '0' is not a positive"),
        (["--operation-timeout", "6x"], {}, "--operation-timeout: '6x' is not a duration"),
        ([], {"T_OPERATION_TIMEOUT": "inf"}, "T_OPERATION_TIMEOUT: 'inf' is not a duration"),
        ([], {"T_ALL": "maybe"}, "T_ALL: 'maybe' is not true or false"),
    ],
)  # fmt: skip
def test_bad_or_doubled_values_name_their_source(
    argv: list[str], environ: dict[str, str], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ConfigError) as error:
        values(argv, environ)
    assert str(error.value) == message or str(error.value).startswith(message)
    assert caplog.messages == []  # no deprecation warning for a value that was refused


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        ([], {}, False),
        (["--all"], {}, True),
        ([], {"T_ALL": "true"}, True),
        ([], {"T_ALL": "yes"}, True),
        ([], {"T_ALL": "0"}, False),
        (["--all"], {"T_ALL": "false"}, True),  # the command line wins
    ],
)
def test_a_switch_and_its_variable(
    argv: list[str], environ: dict[str, str], expected: bool
) -> None:
    assert values(argv, environ)["all_nodes"] is expected


def test_a_switch_takes_no_value() -> None:
    _, extras = parser_of(Timed).parse_known_args(["--all", "true"])
    assert extras == ["true"]


def test_the_old_name_is_hidden_from_help() -> None:
    text = parser_of(Timed).format_help()
    assert "--operation-timeout " in text and "--operation-timeout-ms" not in text


def test_the_declaration_is_the_field_s_default_too() -> None:
    """An options class is built with its defaults, converted from the declared text."""
    assert Timed() == Timed(operation_timeout=300.0, all_nodes=False)
    assert Timed.read(parser_of(Timed).parse_args([]), {}, "T_") == vars(Timed())


# ---- one of a closed list, in argparse's words -----------------------------------------------


def test_one_of_refuses_in_argparses_words() -> None:
    assert one_of(("text", "json"))("json") == "json"
    with pytest.raises(ValueError, match=r"^invalid choice: 'xml' \(choose from 'text', 'json'\)$"):
        one_of(("text", "json"))("xml")
    bits = one_of((2048, 4096), integer(0))
    assert bits("4096") == 4096
    with pytest.raises(ValueError, match=r"^invalid choice: 1024 \(choose from 2048, 4096\)$"):
        bits("1024")
    with pytest.raises(ValueError, match="is not a whole number"):
        bits("\u0662048")
    assert braces((2048, 4096)) == "{2048,4096}"


@dataclass(frozen=True, kw_only=True)
class Output(Options):
    output: str = option("text", one_of(("text", "json")), "", "{text,json}")


def test_one_of_says_what_argparses_choices_said(capsys: pytest.CaptureFixture[str]) -> None:
    """The same usage, help and message, word for word, as the `choices=` it replaced in
    rollguard-certs and rollguard-report."""
    old = Parser(prog="p")
    old.add_argument("--output", choices=["text", "json"], default="text")
    new = Parser(prog="p")
    Output.add_flags(new)
    said = []
    for parser in (old, new):
        with pytest.raises(SystemExit):
            parser.parse_args(["--output", "xml"])
        said.append((parser.format_help(), capsys.readouterr().err))
    assert said[0] == said[1]
    assert "p: argument --output: invalid choice: 'xml' (choose from 'text', 'json')" in said[1][1]
    assert Output.load(new.parse_args([])).output == "text"


# ---- options without variables (rollguard-certs, rollguard-report) ---------------------------


@dataclass(frozen=True, kw_only=True)
class Plain(Options):
    dir: Path = option(".", Path, "folder (default: .)")
    days: int | None = option(None, integer(1, 10), "validity", deprecated=(("valid-days", same),))
    force: bool = option("false", boolean, "overwrite", switch=True)
    out: Path = option(None, Path, "where", required=True)


def plain(*argv: str) -> Plain:
    parser = Parser(prog="plain")
    Plain.add_flags(parser)
    return Plain.load(parser.parse_args(list(argv)))


def test_without_a_prefix_values_convert_and_defaults_apply() -> None:
    assert plain("--out", "o") == Plain(dir=Path(), days=None, force=False, out=Path("o"))
    assert plain("--out", "o", "--days", "3", "--force", "--dir", "d") == Plain(
        dir=Path("d"), days=3, force=True, out=Path("o")
    )


def test_without_a_prefix_no_variable_is_read_and_the_help_is_the_options_own() -> None:
    parser = Parser(prog="plain")
    Plain.add_flags(parser)
    text = parser.format_help()
    assert "folder (default: .)" in text and "env " not in text and "--valid-days" not in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--out", "o", "--days", "11"],
            "plain: argument --days: '11' is not a whole number from 1 to 10 (see --help)",
        ),
        (["--days", "3"], "plain: the following arguments are required: --out"),
        (["--out", "o", "--days", "3", "--valid-days", "4"], "give --days or --valid-days, not"),
    ],
)
def test_without_a_prefix_a_bad_missing_or_doubled_flag_is_argparses_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        plain(*argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_without_a_prefix_a_renamed_flag_warns_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert plain("--out", "o", "--valid-days", "4").days == 4
    assert "plain: warning: --valid-days is deprecated; use --days" in capsys.readouterr().err


def test_without_a_prefix_a_renamed_flag_keeps_its_syntax() -> None:
    with pytest.raises(TypeError, match="keeps its syntax"):
        Timed.add_flags(Parser(prog="p"))


def test_the_roll_s_flags_default_to_what_a_library_user_gets() -> None:
    """Each flag of `RollChoices` (the command line) defaults to the `RollSettings()` field it
    sets: the two declarations cannot drift apart."""
    from dataclasses import fields

    from rollguard.roller.roll.cli.choices import RollChoices
    from rollguard.roller.roll.rules.settings import RollSettings

    flags, library = RollChoices(), RollSettings()
    assert [f.name for f in fields(RollChoices)], "no flags declared"
    for f in fields(RollChoices):
        assert getattr(flags, f.name) == getattr(library, f.name), f.name


def test_the_retry_flags_default_to_the_policy_s_defaults() -> None:
    from dataclasses import fields

    from rollguard.shared.retry import RetryPolicy

    flags, policy = RetryOptions().retry_policy(), RetryPolicy()
    assert [f.name for f in fields(RetryPolicy)], "no settings"
    for f in fields(RetryPolicy):
        assert getattr(flags, f.name) == getattr(policy, f.name), f.name
