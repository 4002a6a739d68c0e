"""The converters every rollguard setting is read with: text in, a checked value out.

They are the only way a rollguard command reads a number, a duration or a HOST:PORT, so every
command accepts the same syntax and refuses the same mistakes, with a ValueError whose message
names the value and the rule (the caller adds the flag or variable it came from):

- a duration is `1500ms`, `90s`, `5m`, `6h` or `1d`, or several of them largest first (`1h30m`);
  a bare number is seconds (`90`, `0.5`); each part is ASCII digits with an optional fraction.
  No exponents, no `inf` or `nan`, no spaces inside; every duration flag has a range (a
  negative one is refused as not positive).
- a whole number is ASCII digits only (Python's `int()` also takes Arabic-Indic and other
  digits, and `_`), within a range.
- HOST:PORT has a non-empty host (IPv6 in brackets) and a port of ASCII digits in range.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rollguard.shared.suggest import did_you_mean

MAX_INT = 2**31 - 1  # the largest whole number a setting takes (Java's int, as Kafka's)

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
    """A duration in a message, rounded to what a reader needs: under a second in milliseconds
    (`300ms`), under a minute in seconds (`45s`), then minutes and seconds (`1m05s`), from an
    hour hours and minutes (`2h02m`). It reads back as a duration, to the second."""
    if 0 < abs(seconds) < 0.9995:
        return f"{round(seconds * 1000)}ms"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _flag_text(seconds: float) -> str:
    """`seconds` in a duration flag's syntax, exactly and shortest (`90` -> `1m30s`): the new
    spelling a renamed flag's warning gives."""
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
    return _flag_text(value / 1000) if value > 0 else text


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


def names(text: str) -> frozenset[str]:
    """A comma-separated list of names (of nodes), empty ones left out."""
    return frozenset(filter(None, (n.strip() for n in text.split(","))))


def choice(*allowed: str) -> Callable[[str], str]:
    """A flag parser that accepts one of `allowed`, as given; a near miss is suggested."""

    def check(text: str) -> str:
        if text not in allowed:
            hint = did_you_mean(text, allowed)
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}{hint}")
        return text

    return check


def one_of(allowed: Sequence[Any], convert: Callable[[str], Any] = str) -> Callable[[str], Any]:
    """`convert`, then one of `allowed`, refused in argparse's words (`invalid choice: 'x'
    (choose from 'text', 'json')`): the commands that read the command line alone
    (rollguard-certs, rollguard-report) took a closed list as argparse's `choices`, and their
    messages stay the same. Give the option the metavar argparse showed: `braces(allowed)`."""

    def check(text: str) -> Any:
        value = convert(text)
        if value not in allowed:
            listed = ", ".join(map(repr, allowed))
            hint = did_you_mean(str(value), map(str, allowed))
            raise ValueError(f"invalid choice: {value!r} (choose from {listed}){hint}")
        return value

    return check


def braces(allowed: Sequence[Any]) -> str:
    """The metavar argparse gives a closed list: `{text,json}`."""
    return "{" + ",".join(map(str, allowed)) + "}"


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
