"""Settings from flags and the environment, declared the same way in every rollguard command.

A command declares its settings as an `Options` dataclass whose fields are `option(...)`s: the
flag `--<field-name>`, its default (in the flag's own syntax: the one place it is written),
converter (`rollguard.shared.converters`, re-exported here), help, and where it applies
deprecated names, a switch, a variable of its own, the `Group` its --help lists it under and
the commands it applies to. Commands compose them by inheritance and read them once, at start-up,
with `load`, which checks across options too (`check`).

One options class may serve several commands (`rollguard roll` and `plan`): an option declared
with `commands=` belongs to those alone. The others still accept it, so that one command line
serves both, but leave it out of their --help, never read its variable, keep its default, and
say on stderr that they ignore it when it is given.

Where a value comes from depends on whether the command has an environment prefix:

- with one (`rollguard`: ROLLGUARD_, `rollguard-agent`: ROLLGUARD_AGENT_), from the command
  line, else from the variable `<PREFIX><FLAG>` (upper case, `-` as `_`), else from the
  default; it is converted once, and a value that does not convert is a ConfigError naming the
  flag or the variable it came from. The environment is an injectable mapping, so tests pass
  their own.
- without one (`rollguard-certs`, `rollguard-report`, which read no variables), from the
  command line, else the default, converted by argparse as it parses: a bad value is a usage
  error like an unknown flag, and the help is the option's own words.

Underneath, an option is a `Flag`; `add_flags` and `resolve` work on a table of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, Self, TypeVar

from rollguard.shared.cli import Parser, argument_type
from rollguard.shared.converters import (
    HostPort,
    boolean,
    braces,
    choice,
    decimal,
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
from rollguard.shared.retry import MAX_INT, RETRY_SETTINGS, RetryPolicy, policy_from_settings

__all__ = [
    "RETRIES",
    "Deprecated",
    "Flag",
    "Group",
    "HostPort",
    "Options",
    "RetryOptions",
    "add_flags",
    "boolean",
    "braces",
    "choice",
    "decimal",
    "default_of",
    "duration",
    "duration_between",
    "env_name",
    "format_duration",
    "host_port",
    "integer",
    "listen_address",
    "milliseconds_to_duration",
    "number_between",
    "one_of",
    "option",
    "parse_duration",
    "positive_seconds",
    "resolve",
    "same",
    "servers",
]

T = TypeVar("T")
logger = logging.getLogger(__name__)

# A renamed flag: its old name, and a function turning a value in the old syntax into the new
# flag's syntax (e.g. "60" milliseconds into "60ms"), so that the new flag's own converter and
# range apply to both.
Deprecated = tuple[str, Callable[[str], str]]


def same(text: str) -> str:
    """The translation of a renamed flag whose syntax did not change (`--tls-cert` -> `--cert`)."""
    return text


@dataclass(frozen=True, slots=True)
class Group:
    """A section of a command's --help: a title, and a line on what its flags decide."""

    title: str
    description: str | None = None


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
    group: Group | None = None  # its section of --help (None: the parser's own "options")
    commands: frozenset[str] = frozenset()  # the commands it applies to; empty: every one
    # May be given more than once: the values reach `convert` one a line, in order (the
    # variable: one a line too); `repeated` makes such a converter.
    repeat: bool = False

    def env(self, prefix: str) -> str:
        return prefix + self.variable if self.variable else env_name(prefix, self.name)

    def applies_to(self, command: str | None) -> bool:
        return command is None or not self.commands or command in self.commands


def env_name(prefix: str, name: str) -> str:
    return prefix + name.upper().replace("-", "_")


def _dest(name: str) -> str:
    return name.replace("-", "_")


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


def add_flags(
    parser: argparse.ArgumentParser,
    flags: Iterable[Flag],
    prefix: str | None,
    *,
    command: str | None = None,
    sections: Sequence[Group] = (),
) -> None:
    """Each flag as an option of `parser`, its deprecated names hidden, under its group's
    section of --help: the `sections` in their order, then any other in the order met. With a
    prefix, argparse keeps the text for `resolve` (the help adds the default and the variable);
    without one, argparse converts it (see `_add_converted`). A flag that does not apply to
    `command` is accepted and hidden (see `Options.load`)."""
    flags = list(flags)
    shown = [f for f in flags if f.applies_to(command)]
    groups = list(dict.fromkeys([*sections, *(f.group for f in shown if f.group is not None)]))
    containers: dict[Group | None, Any] = {None: parser}
    for group in groups:
        if any(f.group == group for f in shown):
            containers[group] = parser.add_argument_group(group.title, group.description)
    for flag in flags:
        hidden = not flag.applies_to(command)
        container = parser if hidden else containers[flag.group]
        if hidden:  # parsed, so that `load` can tell it was given, and nothing else
            flag = dataclasses.replace(flag, help=argparse.SUPPRESS, default=None, required=False)
        if prefix is None:
            _add_converted(parser, container, flag)
            continue
        # An empty default ("" for none) is not shown: the help says what happens without it.
        default = f" (default: {flag.default})" if flag.default else ""
        required = " (required)" if flag.required else ""
        text = f"{flag.help}{default}{required}; env {flag.env(prefix)}"
        if flag.repeat:
            text = f"{flag.help}{required}; repeatable; env {flag.env(prefix)}, one a line"
        if flag.help == argparse.SUPPRESS:
            text = argparse.SUPPRESS
        if flag.switch:
            container.add_argument(f"--{flag.name}", action="store_const", const="true", help=text)
        elif flag.repeat:
            container.add_argument(
                f"--{flag.name}", action="append", metavar=flag.metavar or None, help=text
            )
        else:
            container.add_argument(f"--{flag.name}", metavar=flag.metavar or None, help=text)
        for old, _ in flag.deprecated:
            parser.add_argument(f"--{old}", dest=_dest(old), help=argparse.SUPPRESS)


def _add_converted(parser: argparse.ArgumentParser, container: Any, flag: Flag) -> None:
    """A flag of a command without variables: argparse converts the value as it parses (a bad one
    is its usage error, `argument --days: ...`, exit 2), and the default too; the help is the
    flag's own words, in `container` (the parser or one of its argument groups). A deprecated
    name is `Parser.add_renamed`'s (it warns on stderr), so it keeps the flag's syntax (`same`)."""
    name = f"--{flag.name}"
    if flag.repeat:
        raise TypeError(f"{name}: a repeated flag needs a command with variables (a prefix)")
    if flag.switch:
        default = None if flag.default is None else flag.convert(flag.default)
        const = flag.convert("true")
        container.add_argument(
            name, action="store_const", const=const, default=default, help=flag.help or None
        )
    else:
        container.add_argument(
            name,
            type=argument_type(flag.convert),
            default=flag.default,
            metavar=flag.metavar or None,
            required=flag.required,
            help=flag.help or None,
        )
    for old, translate in flag.deprecated:
        if translate is not same or not isinstance(parser, Parser):
            raise TypeError(
                f"--{old}: without variables, a flag is renamed by Parser.add_renamed, which "
                "keeps its syntax (give `same`)"
            )
        parser.add_renamed(f"--{old}", name)


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


def _text(args: argparse.Namespace, name: str) -> str | None:
    """A flag's text on the command line: a repeated flag's values one a line."""
    value = getattr(args, _dest(name), None)
    return "\n".join(value) if isinstance(value, list) else value


def repeated(convert: Callable[[str], T]) -> Callable[[str], tuple[T, ...]]:
    """The converter of a repeated flag (`option(..., repeat=True)`): each non-empty line of
    its text converted by `convert`, in order."""

    def each(text: str) -> tuple[T, ...]:
        return tuple(convert(line.strip()) for line in text.split("\n") if line.strip())

    return each


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
        given = _given(flag, lambda name: _text(args, name), lambda n: f"--{n}")
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
_NO_ENVIRONMENT: Mapping[str, str] = MappingProxyType({})


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
    group: Group | None = None,
    commands: Iterable[str] = (),
    repeat: bool = False,
) -> Any:
    """A field of an `Options` dataclass: the flag `--<field-name>` (`_` as `-`; a trailing `_`,
    as in `from_`, dropped), its variable `<PREFIX><FIELD_NAME>` (or `<PREFIX><variable>`) in a
    command with a prefix, its default (in the flag's own syntax, converted like any value: the
    one place a default is written), converter, help and metavar; its section of --help, and
    the commands it applies to (none given: every command of the options)."""
    spec = Flag(
        "",
        default,
        convert,
        help,
        metavar,
        required,
        switch,
        deprecated,
        variable,
        group,
        frozenset(commands),
        repeat,
    )
    return dataclasses.field(metadata={_OPTION: spec})


class Options:
    """The base of a command's typed settings: a frozen, keyword-only dataclass whose fields are
    declared with `option(...)`. Commands compose them by inheritance (the roll's options are
    the agent's, the platform's, the retry policy's and its own), add them to their parser with
    `add_flags` and read them with `load`, with the same prefix (None: no variables) and the
    same command (None: every option applies)."""

    # The section of --help of the options a class declares (unless one names its own), and
    # the order of the sections; a section not listed comes after these, in the order met.
    group: ClassVar[Group | None] = None
    sections: ClassVar[tuple[Group, ...]] = ()

    @classmethod
    def flags(cls) -> tuple[Flag, ...]:
        declared_by: dict[str, type] = {}  # each field's class (the most derived one)
        for klass in reversed(cls.__mro__):
            declared_by.update(dict.fromkeys(vars(klass).get("__annotations__", {}), klass))
        flags = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if _OPTION not in f.metadata:
                continue
            spec = f.metadata[_OPTION]
            group = spec.group or vars(declared_by[f.name]).get("group")
            flags.append(dataclasses.replace(spec, name=_flag_name(f.name), group=group))
        return tuple(flags)

    @classmethod
    def add_flags(
        cls, parser: argparse.ArgumentParser, prefix: str | None = None, command: str | None = None
    ) -> None:
        add_flags(parser, cls.flags(), prefix, command=command, sections=cls.sections)

    @classmethod
    def load(
        cls,
        args: argparse.Namespace,
        environ: Mapping[str, str] = _NO_ENVIRONMENT,
        prefix: str | None = None,
        *,
        legacy_prefix: str | None = None,
        command: str | None = None,
    ) -> Self:
        """The options, checked: with a prefix, command line, else environment, else default,
        converted here (`resolve`); without one, as argparse converted them. An option that
        does not apply to `command` keeps its default, and a warning names it if it was given."""
        used = [flag for flag in cls.flags() if flag.applies_to(command)]
        unused = [flag for flag in cls.flags() if not flag.applies_to(command)]
        if prefix is None:
            values = {flag.name: getattr(args, _dest(flag.name)) for flag in used}
        else:
            values = resolve(args, environ, used, prefix, legacy_prefix=legacy_prefix)
        values.update(_ignored(args, unused, command))
        fields = {_flag_name(f.name): f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        options = cls(**{fields[name]: value for name, value in values.items()})
        options.check()
        return options

    def check(self) -> None:
        """Checks across options (ConfigError); each class adds its own and calls super()."""


def _ignored(args: argparse.Namespace, flags: list[Flag], command: str | None) -> dict[str, Any]:
    """The defaults of the options `command` does not take; one warning names those given."""
    given = {
        f"--{name}": flag
        for flag in flags
        for name in (flag.name, *(old for old, _ in flag.deprecated))
        if getattr(args, _dest(name), None) is not None
    }
    if given:
        owners = sorted({c for flag in given.values() for c in flag.commands})
        logger.warning(
            "%s ignores %s: %s for %s only",
            command,
            ", ".join(given),
            "it is" if len(given) == 1 else "they are",
            " and ".join(owners),
        )
    return {
        flag.name: None if flag.default is None else flag.convert(flag.default) for flag in flags
    }


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


RETRIES = Group(
    "retries", "a request that failed for a reason that may pass is tried again, with this backoff"
)


def _retry_option(name: str) -> Any:
    setting = next(s for s in RETRY_SETTINGS if s.name == name)
    return option(setting.default, _RETRY_CONVERTERS[name], setting.help, "N")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetryOptions(Options):
    """The retry policy's five options, the same in every network client (`--retry-*`)."""

    group = RETRIES

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
