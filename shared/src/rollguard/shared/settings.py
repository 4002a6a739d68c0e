"""Settings from flags and the environment, declared the same way in every rollguard command.

A command declares its settings as an `Options` dataclass whose fields are `option(...)`s, each
the one place of a setting: its flag `--<field-name>`, its variable, its default (in the flag's
own syntax; converted, also the field's default), converter (`rollguard.shared.converters`),
help, metavar and, where it applies, deprecated names, a switch, the `Group` its --help lists
it under and the commands it applies to. Commands compose them by inheritance, add them to
their parser (`Options.add_flags`) and read them once, at start-up (`Options.load`), which
checks across options too (`check`).

One options class may serve several commands (`rollguard roll` and `plan`): an option declared
with `commands=` belongs to those alone. The others still accept it, so that one command line
serves both, but leave it out of their --help, never read its variable, keep its default, and
say on stderr that they ignore it when it is given.

A value comes from the command line, else (in a command with an environment prefix:
`rollguard`: ROLLGUARD_, `rollguard-agent`: ROLLGUARD_AGENT_) the variable `<PREFIX><FLAG>`
(upper case, `-` as `_`), else the default. Every value is converted once, here: one that does
not convert is a ConfigError naming the flag or the variable it came from (exit 2). Commands
without a prefix (`rollguard-certs`, `rollguard-report`) read no variables, their --help is the
options' own words, and argparse checks their values (with the option's converter), required
and renamed flags (`Parser.add_renamed`). Why not pydantic-settings: docs/architecture.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Self, TypeVar

from rollguard.shared.errors import ConfigError

T = TypeVar("T")
logger = logging.getLogger(__name__)

# A renamed flag: its old name, and a function turning a value in the old syntax into the new
# flag's (e.g. "60" milliseconds into "60ms"), so that the new flag's converter applies to both.
Deprecated = tuple[str, Callable[[str], str]]
_OPTION = "rollguard.option"
_NO_ENVIRONMENT: Mapping[str, str] = MappingProxyType({})


def same(text: str) -> str:
    """The translation of a renamed flag whose syntax did not change (`--tls-cert` -> `--cert`)."""
    return text


@dataclass(frozen=True, slots=True)
class Group:
    """A section of a command's --help: a title, and a line on what its flags decide."""

    title: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class _Option:
    """An option as `option()` declares it, completed by `Options.flags()` with its names."""

    default: str | None
    convert: Callable[[str], Any]
    help: str
    metavar: str
    required: bool
    switch: bool  # `--name` alone means "true"; the variable takes true/false/1/0/yes/no
    deprecated: tuple[Deprecated, ...]
    # The variable's name after the prefix, when it is not the flag's name: a tool whose prefix
    # repeats the flag's first word (ROLLGUARD_CONNECT_ and --connect-url) says it once.
    variable: str | None
    group: Group | None  # its section of --help (None: the parser's own "options")
    commands: frozenset[str]  # the commands it applies to; empty: every one
    repeat: bool  # may be given more than once: the values reach `convert` one a line
    name: str = ""  # the flag, without `--`
    field: str = ""  # the dataclass field

    def env(self, prefix: str, name: str | None = None) -> str:
        if name is None or name == self.name:
            return prefix + (self.variable or self.name.upper().replace("-", "_"))
        return prefix + name.upper().replace("-", "_")

    def applies_to(self, command: str | None) -> bool:
        return command is None or not self.commands or command in self.commands


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
    flag: str | None = None,
) -> Any:
    """A field of an `Options` dataclass: the flag `--<field-name>` (`_` as `-`; a trailing `_`,
    as in `from_`, dropped; or `--<flag>`), its variable `<PREFIX><FLAG>` (or
    `<PREFIX><variable>`), its default (the field's too, converted), converter, help, metavar,
    section of --help, and the commands it applies to (none given: every command)."""
    spec = _Option(
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
        flag or "",
    )
    value = _default(spec)
    if getattr(type(value), "__hash__", None) is None:  # a list or a dict: a fresh one each time
        return dataclasses.field(default_factory=lambda: _default(spec), metadata={_OPTION: spec})
    return dataclasses.field(default=value, metadata={_OPTION: spec})


def repeated(convert: Callable[[str], T]) -> Callable[[str], tuple[T, ...]]:
    """The converter of a repeated flag (`option(..., repeat=True)`): each non-empty line of
    its text converted by `convert`, in order."""

    def each(text: str) -> tuple[T, ...]:
        return tuple(convert(line.strip()) for line in text.split("\n") if line.strip())

    return each


class Options:
    """The base of a command's typed settings: a frozen, keyword-only dataclass whose fields are
    declared with `option(...)`, added to a parser with `add_flags` and read with `load`, with
    the same prefix (None: no variables) and command (None: every option applies)."""

    __slots__ = ()

    # The section of --help of the options a class declares (unless one names its own), and
    # the order of the sections; a section not listed comes after these, in the order met.
    group: ClassVar[Group | None] = None
    sections: ClassVar[tuple[Group, ...]] = ()

    @classmethod
    def flags(cls) -> tuple[_Option, ...]:
        """Every option, with its flag's name and section."""
        declared_by: dict[str, type] = {}  # each field's class (the most derived one)
        for klass in reversed(cls.__mro__):
            declared_by.update(dict.fromkeys(vars(klass).get("__annotations__", {}), klass))
        return tuple(
            dataclasses.replace(
                spec,
                name=spec.name or f.name.removesuffix("_").replace("_", "-"),
                field=f.name,
                group=spec.group or vars(declared_by[f.name]).get("group"),
            )
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if (spec := f.metadata.get(_OPTION)) is not None
        )

    @classmethod
    def add_flags(
        cls, parser: argparse.ArgumentParser, prefix: str | None = None, command: str | None = None
    ) -> None:
        """Each option as a flag of `parser`, its deprecated names hidden, under its group's
        section of --help (`sections` in their order, then any other in the order met). argparse
        keeps the text, for `read`; with a prefix, the help adds the default and the variable.
        An option that does not apply to `command` is accepted and hidden (see `load`)."""
        flags = cls.flags()
        shown = [f for f in flags if f.applies_to(command)]
        groups = dict.fromkeys([*cls.sections, *(f.group for f in shown if f.group is not None)])
        containers: dict[Group | None, Any] = {None: parser}
        for group in groups:
            if any(f.group == group for f in shown):
                containers[group] = parser.add_argument_group(group.title, group.description)
        for flag in flags:
            hidden = not flag.applies_to(command)
            _add(parser, parser if hidden else containers[flag.group], flag, prefix, hidden)

    @classmethod
    def read(
        cls,
        args: argparse.Namespace,
        environ: Mapping[str, str] = _NO_ENVIRONMENT,
        prefix: str | None = None,
        *,
        legacy_prefix: str | None = None,
        command: str | None = None,
        only: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Each option's value by field name, converted (`only`: these fields alone), not yet
        checked across options; ConfigError naming the flag or variable of a bad one. An
        option that does not apply to `command` keeps its default, and a warning names it if it
        was given. A value under a deprecated name is logged as a warning once it has
        converted; so is one from a variable under `legacy_prefix` (the prefix a tool's
        variables had before it got its own), which counts only when the new one is not set."""
        flags = [f for f in cls.flags() if only is None or f.field in only]
        unused = [flag for flag in flags if not flag.applies_to(command)]
        values = {
            f.field: _value(f, args, environ, prefix, legacy_prefix)
            for f in flags
            if f.applies_to(command)
        }
        given = {
            f"--{name}": f
            for f in unused
            for name in (f.name, *dict(f.deprecated))
            if getattr(args, name.replace("-", "_"), None) is not None
        }
        if given:
            owners = " and ".join(sorted({c for flag in given.values() for c in flag.commands}))
            its = "it is" if len(given) == 1 else "they are"
            logger.warning("%s ignores %s: %s for %s only", command, ", ".join(given), its, owners)
        return values | {flag.field: _default(flag) for flag in unused}

    @classmethod
    def load(
        cls,
        args: argparse.Namespace,
        environ: Mapping[str, str] = _NO_ENVIRONMENT,
        prefix: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """The options, read (`read`, whose keywords it takes) and checked (`check`)."""
        options = cls(**cls.read(args, environ, prefix, **kwargs))
        options.check()
        return options

    def check(self) -> None:
        """Checks across options (ConfigError); each class adds its own and calls super()."""


def _add(parser: Any, container: Any, flag: _Option, prefix: str | None, hidden: bool) -> None:
    """`flag` as an option of `container` (the parser or one of its sections). With a prefix,
    the help adds the default (unless empty: the help says what happens without it) and the
    variable, and a deprecated name is a hidden flag of its own, read by `_value`; without one,
    argparse checks each value and a required flag; a deprecated name is `Parser.add_renamed`'s."""
    text = flag.help
    if prefix is not None and text != argparse.SUPPRESS:
        required = " (required)" if flag.required else ""
        default = f" (default: {flag.default})" if flag.default else ""
        text = f"{text}{default}{required}; env {flag.env(prefix)}"
        if flag.repeat:
            text = f"{flag.help}{required}; repeatable; env {flag.env(prefix)}, one a line"
    if hidden:  # parsed, so that `read` can tell it was given, and nothing else
        text = argparse.SUPPRESS
    kwargs: dict[str, Any] = {"help": text or None}
    if flag.switch:
        kwargs.update(action="store_const", const="true")
    else:
        kwargs.update(metavar=flag.metavar or None, action="append" if flag.repeat else "store")
        kwargs["required"] = prefix is None and flag.required and not hidden
        if prefix is None and not flag.repeat:  # no variables: a bad value is a usage error
            kwargs["type"] = lambda text: _checked(flag, text)
    container.add_argument(f"--{flag.name}", **kwargs)
    for old, translate in flag.deprecated:
        if prefix is not None:
            parser.add_argument(f"--{old}", dest=old.replace("-", "_"), help=argparse.SUPPRESS)
        elif translate is same and hasattr(parser, "add_renamed"):
            parser.add_renamed(f"--{old}", f"--{flag.name}")
        else:
            raise TypeError(
                f"--{old}: without variables, a flag is renamed by Parser.add_renamed,"
                " which keeps its syntax (give `same`)"
            )


def _checked(flag: _Option, text: str) -> str:
    """`text` if `flag` converts it: argparse's usage error (`argument --days: ...`) if not."""
    try:
        flag.convert(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _value(
    flag: _Option,
    args: argparse.Namespace,
    environ: Mapping[str, str],
    prefix: str | None,
    legacy_prefix: str | None,
) -> Any:
    """The converted value of `flag`: from the command line under its name or a deprecated one
    (translated), else its variable (the same), else under `legacy_prefix`, else its default."""
    names = [(flag.name, same), *flag.deprecated]
    sources: list[list[tuple[str, Any, Callable[[str], str]]]] = [
        [(f"--{name}", getattr(args, name.replace("-", "_"), None), tr) for name, tr in names]
    ]
    if prefix is not None:
        sources.append(
            [
                (flag.env(prefix, name), environ.get(flag.env(prefix, name)), tr)
                for name, tr in names
            ]
        )
    for source in sources:
        given = [
            (label, text, tr, i > 0)
            for i, (label, text, tr) in enumerate(source)
            if text is not None
        ]
        if len(given) > 1:
            raise ConfigError(f"give {given[0][0]} or {given[1][0]}, not both")
        if given:
            (label, text, translate, renamed), current = given[0], source[0][0]
            break
    else:
        old = None if legacy_prefix is None else flag.env(legacy_prefix, flag.name)
        if old is not None and old in environ:  # the legacy prefix: renamed, not translated
            label, text, translate, renamed = old, environ[old], same, False
            current = flag.env(str(prefix))
        elif flag.default is not None:
            label, text, translate, renamed = f"--{flag.name} (default)", flag.default, same, False
            current = label
        elif flag.required:
            variable = f" (or {flag.env(prefix)})" if prefix is not None else ""
            raise ConfigError(f"--{flag.name} is required{variable}")
        else:
            return None
    text = "\n".join(text) if isinstance(text, list) else text
    try:
        new = translate(text)
        value = flag.convert(new)
    except ValueError as exc:
        raise ConfigError(f"{label}: {exc}") from None
    if renamed:  # the warning gives the new spelling
        separator = " " if label.startswith("-") else "="
        logger.warning("%s is deprecated; use %s%s%s", label, current, separator, new)
    elif label != current:
        logger.warning("%s is deprecated; use %s", label, current)
    return value


def _default(flag: _Option) -> Any:
    return None if flag.default is None else flag.convert(flag.default)
