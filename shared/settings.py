"""Settings from flags and the environment, the same way in every rollguard command.

Each command declares its settings as a table of `Flag`s. A value comes from the command line,
else from the variable `<PREFIX><FLAG>` (upper case, `-` as `_`), else from the default; it is
converted once, and a value that does not convert is a ConfigError naming the flag or the
variable it came from. The environment is an injectable mapping, so tests pass their own.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.errors import ConfigError
from shared.retry import RETRY_SETTINGS


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    default: str | None
    convert: Callable[[str], Any]
    help: str
    metavar: str = ""
    required: bool = False

    def env(self, prefix: str) -> str:
        return prefix + self.name.upper().replace("-", "_")


def positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"{text!r} is not a positive number of seconds")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    """A flag parser that accepts one of `allowed`, as given."""

    def check(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return check


def retry_flags() -> tuple[Flag, ...]:
    """The five retry settings, which every network client exposes under the same names."""
    return tuple(Flag(s.name, s.default, s.convert, s.help, "N") for s in RETRY_SETTINGS)


def add_flags(parser: argparse.ArgumentParser, flags: Iterable[Flag], prefix: str) -> None:
    for flag in flags:
        default = f" (default: {flag.default})" if flag.default is not None else ""
        required = " (required)" if flag.required else ""
        parser.add_argument(
            f"--{flag.name}",
            metavar=flag.metavar or None,
            help=f"{flag.help}{default}{required}; env {flag.env(prefix)}",
        )


def resolve(
    args: argparse.Namespace, environ: Mapping[str, str], flags: Iterable[Flag], prefix: str
) -> dict[str, Any]:
    """Every flag's value by name (None when unset and without default); ConfigError if bad."""
    values: dict[str, Any] = {}
    for flag in flags:
        given = getattr(args, flag.name.replace("-", "_"))
        source = f"--{flag.name}"
        if given is None and flag.env(prefix) in environ:
            given, source = environ[flag.env(prefix)], flag.env(prefix)
        if given is None:
            given, source = flag.default, f"--{flag.name} (default)"
        if given is None:
            if flag.required:
                raise ConfigError(f"--{flag.name} is required (or {flag.env(prefix)})")
            values[flag.name] = None
            continue
        try:
            values[flag.name] = flag.convert(given)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return values
