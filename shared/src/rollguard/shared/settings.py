"""Settings from flags and the environment, the same way in every rollguard command.

Each command declares its settings as a table of `Flag`s. A value comes from the command line,
else from the variable `<PREFIX><FLAG>` (upper case, `-` as `_`), else from the default; it is
converted once, and a value that does not convert is a ConfigError naming the flag or the
variable it came from. The environment is an injectable mapping, so tests pass their own.

The converters here are the only way a rollguard command reads a number, a duration or a
HOST:PORT, so every command accepts the same syntax and refuses the same mistakes:

- a duration is `1500ms`, `90s`, `5m`, `6h` or `1d`, or several of them largest first (`1h30m`);
  a bare number is seconds (`90`, `0.5`); each part is ASCII digits with an optional fraction.
  No exponents, no `inf` or `nan`, no spaces inside; every duration flag has a range (a
  negative one is refused as not positive).
- a whole number is ASCII digits only (Python's `int()` also takes Arabic-Indic and other
  digits, and `_`), within a range.
- HOST:PORT has a non-empty host (IPv6 in brackets) and a port of ASCII digits in range.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Self

from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import MAX_INT, RETRY_SETTINGS, RetryPolicy, policy_from_settings

logger = logging.getLogger(__name__)

# A renamed flag: its old name, and a function turning a value in the old syntax into the new
# flag's syntax (e.g. "60" milliseconds into "60ms"), so that the new flag's own converter and
# range apply to both.
Deprecated = tuple[str, Callable[[str], str]]


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    default: str | None
    convert: Callable[[str], Any]
    help: str
    metavar: str = ""
    required: bool = False
    switch: bool = False  # `--name` alone means "true"; the variable takes true/false/1/0/yes/no
    deprecated: tuple[Deprecated, ...] = ()
    # The variable's name after the prefix, when it is not the flag's name: a tool whose prefix
    # repeats the flag's first word (ROLLGUARD_CONNECT_ and --connect-url) says it once.
    variable: str | None = None

    def env(self, prefix: str) -> str:
        return prefix + self.variable if self.variable else env_name(prefix, self.name)


def env_name(prefix: str, name: str) -> str:
    return prefix + name.upper().replace("-", "_")


def _dest(name: str) -> str:
    return name.replace("-", "_")


# ---- converters ----------------------------------------------------------------------------

_NUMBER = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_DECIMAL = re.compile(rf"-?{_NUMBER}")
_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 0.001))
_DURATION = re.compile("".join(rf"(?:({_NUMBER}){unit})?" for unit, _ in _UNITS))
_DURATION_HINT = "e.g. 90s, 5m, 6h, 1500ms; a bare number is seconds"
_LONGEST = 64  # characters; longer input is a mistake, and would only overflow a float


def decimal(text: str, what: str = "number") -> float:
    """A finite decimal number in ASCII digits (`-12.5`, `.5`); no `inf`, `nan`, `1e3`, `1_0`."""
    if len(text) > _LONGEST or not _DECIMAL.fullmatch(text):
        raise ValueError(f"{text!r} is not a {what}")
    return float(text)


def parse_duration(text: str) -> float:
    """Seconds in `text` (see the module docstring); ValueError with an example when not one."""
    stripped = text.strip()
    sign = -1.0 if stripped.startswith("-") else 1.0
    body = stripped.removeprefix("-")
    if len(body) <= _LONGEST and re.fullmatch(_NUMBER, body):
        return sign * float(body)
    match = _DURATION.fullmatch(body) if len(body) <= _LONGEST else None
    if not body or match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a duration ({_DURATION_HINT})")
    parts = zip(match.groups(), _UNITS, strict=True)
    return sign * sum(float(part) * unit for part, (_, unit) in parts if part)


def format_duration(seconds: float) -> str:
    """The shortest duration text that reads back as `seconds` (`90` -> `1m30s`)."""
    if seconds < 1:
        return f"{_plain(seconds * 1000)}ms"
    if seconds != int(seconds):
        return f"{_plain(seconds)}s"
    rest, parts = int(seconds), []
    for unit, size in _UNITS[:4]:
        count, rest = divmod(rest, int(size))
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _plain(value: float) -> str:
    """`value` with at most six decimals and never an exponent, which durations do not take."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


def duration_between(low: str, high: str) -> Callable[[str], float]:
    """A duration converter to seconds, refusing values outside [low, high] (both durations)."""
    lowest, highest = parse_duration(low), parse_duration(high)
    span = f"give a duration from {low} to {high}"

    def convert(text: str) -> float:
        seconds = parse_duration(text)
        if not seconds > 0:
            raise ValueError(f"{text!r} is not a positive number; {span}")
        if not lowest <= seconds <= highest:
            raise ValueError(f"{text!r} is out of range; {span}")
        return seconds

    convert.__name__ = f"duration_{low}_to_{high}"
    return convert


duration = duration_between("10ms", "30d")
"""A duration in seconds, from 10 ms (an interval below that is a mistake) to 30 days."""


def milliseconds_to_duration(text: str) -> str:
    """For a renamed `*-ms` flag: its old value as a duration (`60` -> `60ms`)."""
    value = decimal(text.strip(), "number of milliseconds")
    return format_duration(value / 1000) if value > 0 else text


def positive_seconds(text: str) -> float:
    """A positive, finite number (of seconds, or of the unit the flag's name gives)."""
    value = decimal(text.strip(), "positive number")
    if not value > 0:
        raise ValueError(f"{text!r} is not a positive number")
    return value


def number_between(low: float, high: float, unit: str) -> Callable[[str], float]:
    """A finite decimal number of `unit` in [low, high], for flags whose name gives the unit
    (`--timeline-retention`)."""

    def convert(text: str) -> float:
        value = decimal(text.strip(), f"number of {unit}")
        if not low <= value <= high:
            raise ValueError(f"{text!r} is not a number of {unit} from {low:g} to {high:g}")
        return value

    return convert


def integer(low: int = 0, high: int = MAX_INT) -> Callable[[str], int]:
    """A whole number in ASCII digits (no `_`, no other scripts' digits) in [low, high]."""

    def convert(text: str) -> int:
        stripped = text.strip()
        if not re.fullmatch(r"-?[0-9]+", stripped):
            raise ValueError(f"{text!r} is not a whole number")
        # Beyond 20 digits it is out of range anyway; int() would refuse past 4300.
        value = int(stripped) if len(stripped) <= 20 else high + 1
        if not low <= value <= high:
            raise ValueError(f"{text!r} is not a whole number from {low} to {high}")
        return value

    return convert


def choice(*allowed: str) -> Callable[[str], str]:
    """A flag parser that accepts one of `allowed`, as given."""

    def check(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return check


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def boolean(text: str) -> bool:
    """true/false, 1/0 or yes/no, in any case."""
    if text.strip().lower() in _TRUE:
        return True
    if text.strip().lower() in _FALSE:
        return False
    raise ValueError(f"{text!r} is not true or false (or 1/0, yes/no)")


class HostPort(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def host_port(text: str, *, any_port: bool = False) -> HostPort:
    """`HOST:PORT` or `[IPV6]:PORT`: a non-empty host and a port from 1 (0 with `any_port`, to
    listen on any free port) to 65535, in ASCII digits."""
    host, sep, port = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r} is not HOST:PORT (an IPv6 address goes in brackets)")
    if not sep or not host or any(c.isspace() or c in "[]/" for c in host):
        raise ValueError(f"{text!r} is not HOST:PORT")
    lowest = 0 if any_port else 1
    if not re.fullmatch(r"[0-9]{1,5}", port) or not lowest <= int(port) <= 65535:
        raise ValueError(f"{text!r}: port {port!r} is not a number from {lowest} to 65535")
    return HostPort(host, int(port))


def listen_address(text: str) -> HostPort:
    """A HOST:PORT to listen on; port 0 means any free port."""
    return host_port(text, any_port=True)


def servers(text: str) -> str:
    """`HOST:PORT[,HOST:PORT...]` (Kafka's bootstrap servers), checked entry by entry and
    returned as the comma-separated list Kafka clients take."""
    entries = text.split(",")
    for entry in entries:
        if not entry.strip():
            raise ValueError(f"{text!r} has an empty entry")
        host_port(entry)
    return ",".join(entry.strip() for entry in entries)


# ---- flags and the environment ---------------------------------------------------------------

# The retry settings are the reference's (milliseconds, as their names say); the converters
# check the syntax (finite, ASCII digits) and RetryPolicy checks the ranges, with their names.
_RETRY_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "retry-max-retries": integer(0, MAX_INT),
    "retry-initial-backoff-ms": lambda text: decimal(text.strip()),
    "retry-max-backoff-ms": lambda text: decimal(text.strip()),
    "retry-backoff-multiplier": lambda text: decimal(text.strip()),
    "retry-jitter-factor": lambda text: decimal(text.strip()),
}


def retry_flags() -> tuple[Flag, ...]:
    """The five retry settings, which every network client exposes under the same names."""
    return tuple(
        Flag(s.name, s.default, _RETRY_CONVERTERS.get(s.name, s.convert), s.help, "N")
        for s in RETRY_SETTINGS
    )


def add_flags(parser: argparse.ArgumentParser, flags: Iterable[Flag], prefix: str) -> None:
    for flag in flags:
        default = f" (default: {flag.default})" if flag.default is not None else ""
        required = " (required)" if flag.required else ""
        text = f"{flag.help}{default}{required}; env {flag.env(prefix)}"
        if flag.switch:
            parser.add_argument(f"--{flag.name}", action="store_const", const="true", help=text)
        else:
            parser.add_argument(f"--{flag.name}", metavar=flag.metavar or None, help=text)
        for old, _ in flag.deprecated:
            parser.add_argument(f"--{old}", dest=_dest(old), help=argparse.SUPPRESS)


def _variable(flag: Flag, prefix: str) -> Callable[[str], str]:
    """The variable of `flag` or of one of its deprecated names."""
    return lambda name: flag.env(prefix) if name == flag.name else env_name(prefix, name)


def _lookup(environ: Mapping[str, str], flag: Flag, prefix: str) -> Callable[[str], str | None]:
    variable = _variable(flag, prefix)
    return lambda name: environ.get(variable(name))


class _Given(NamedTuple):
    text: str
    source: str  # the flag or variable it came from, for messages
    warning: str | None  # set when it came under a deprecated name


def _given(
    flag: Flag, found: Callable[[str], str | None], label: Callable[[str], str]
) -> _Given | None:
    """The value of `flag` from one source (command line or environment), under its current
    name or a deprecated one (translated); None when neither is given."""
    names: list[tuple[str, Callable[[str], str] | None]] = [(flag.name, None), *flag.deprecated]
    given = [(name, text, translate) for name, translate in names
             if (text := found(name)) is not None]  # fmt: skip
    if len(given) > 1:
        raise ConfigError(f"give {label(given[0][0])} or {label(given[1][0])}, not both")
    if not given:
        return None
    name, text, translate = given[0]
    if translate is None:
        return _Given(text, label(name), None)
    try:
        new = translate(text)
    except ValueError as exc:
        raise ConfigError(f"{label(name)}: {exc}") from None
    separator = " " if label(name).startswith("-") else "="
    return _Given(new, label(name), f"{label(name)} is deprecated; use {label(flag.name)}"
                  f"{separator}{new}")  # fmt: skip


def resolve(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    flags: Iterable[Flag],
    prefix: str,
    *,
    legacy_prefix: str | None = None,
) -> dict[str, Any]:
    """Every flag's value by name (None when unset and without default); ConfigError if bad.

    A value given under a deprecated name is logged as a warning once it has converted; so is
    one from a variable under `legacy_prefix` (the prefix a tool's variables had before it got
    its own), which counts only when the variable under `prefix` is not set."""
    values: dict[str, Any] = {}
    for flag in flags:
        given = _given(flag, lambda name: getattr(args, _dest(name), None), lambda n: f"--{n}")
        if given is None:
            given = _given(flag, _lookup(environ, flag, prefix), _variable(flag, prefix))
        if given is None and legacy_prefix is not None:
            old = env_name(legacy_prefix, flag.name)
            if old in environ:
                given = _Given(environ[old], old, f"{old} is deprecated; use {flag.env(prefix)}")
        if given is None and flag.default is not None:
            given = _Given(flag.default, f"--{flag.name} (default)", None)
        if given is None:
            if flag.required:
                raise ConfigError(f"--{flag.name} is required (or {flag.env(prefix)})")
            values[flag.name] = None
            continue
        try:
            values[flag.name] = flag.convert(given.text)
        except ValueError as exc:
            raise ConfigError(f"{given.source}: {exc}") from None
        if given.warning is not None:
            logger.warning("%s", given.warning)
    return values


# ---- typed options -----------------------------------------------------------------------

_OPTION = "rollguard.option"


def option(
    default: str | None,
    convert: Callable[[str], Any],
    help: str,
    metavar: str = "",
    *,
    required: bool = False,
    switch: bool = False,
    deprecated: tuple[Deprecated, ...] = (),
    variable: str | None = None,
) -> Any:
    """A field of an `Options` dataclass: the flag `--<field-name>` (`_` as `-`; a trailing `_`,
    as in `from_`, dropped), its variable `<PREFIX><FIELD_NAME>` (or `<PREFIX><variable>`), its
    default (in the flag's own syntax, converted like any value: the one place a default is
    written), converter, help and metavar."""
    spec = Flag("", default, convert, help, metavar, required, switch, deprecated, variable)
    return dataclasses.field(metadata={_OPTION: spec})


class Options:
    """The base of a command's typed settings: a frozen, keyword-only dataclass whose fields are
    declared with `option(...)`. Commands compose them by inheritance (the roll's options are
    the agent's, the platform's, the retry policy's and its own), and read them with `load`:
    command line, else environment, else default, converted and checked once."""

    @classmethod
    def flags(cls) -> tuple[Flag, ...]:
        return tuple(
            dataclasses.replace(f.metadata[_OPTION], name=_flag_name(f.name))
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if _OPTION in f.metadata
        )

    @classmethod
    def add_flags(cls, parser: argparse.ArgumentParser, prefix: str) -> None:
        add_flags(parser, cls.flags(), prefix)

    @classmethod
    def load(
        cls,
        args: argparse.Namespace,
        environ: Mapping[str, str],
        prefix: str,
        *,
        legacy_prefix: str | None = None,
    ) -> Self:
        values = resolve(args, environ, cls.flags(), prefix, legacy_prefix=legacy_prefix)
        fields = {_flag_name(f.name): f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        options = cls(**{fields[name]: value for name, value in values.items()})
        options.check()
        return options

    def check(self) -> None:
        """Checks across options (ConfigError); each class adds its own and calls super()."""


def _flag_name(field: str) -> str:
    """`operation_timeout` -> `operation-timeout`; `from_` (a keyword's field) -> `from`."""
    return field.removesuffix("_").replace("_", "-")


def default_of(cls: type[Any], name: str) -> Any:
    """The default of dataclass `cls`'s field `name`: a library's setting default, which its
    command-line option then shows in the option's syntax (one place for each default)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    raise LookupError(f"{cls.__name__} has no field {name} with a default")


def _retry_option(name: str) -> Any:
    setting = next(s for s in RETRY_SETTINGS if s.name == name)
    return option(setting.default, _RETRY_CONVERTERS[name], setting.help, "N")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetryOptions(Options):
    """The retry policy's five options, the same in every network client (`--retry-*`)."""

    retry_max_retries: int = _retry_option("retry-max-retries")
    retry_initial_backoff_ms: float = _retry_option("retry-initial-backoff-ms")
    retry_max_backoff_ms: float = _retry_option("retry-max-backoff-ms")
    retry_backoff_multiplier: float = _retry_option("retry-backoff-multiplier")
    retry_jitter_factor: float = _retry_option("retry-jitter-factor")

    def retry_policy(self) -> RetryPolicy:
        """The policy; ConfigError naming the flag when a value is out of its range."""
        return policy_from_settings({s.name: getattr(self, _dest(s.name)) for s in RETRY_SETTINGS})

    def check(self) -> None:
        super().check()
        self.retry_policy()
