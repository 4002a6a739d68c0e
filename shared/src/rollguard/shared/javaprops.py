"""Java properties files read as `java.util.Properties.load` reads them: what Kafka does with a
`server.properties` or a client's `client.properties`.

A `key=value` split at the first `=` is not that format: a key ends at the first unescaped `=`,
`:` or whitespace; a line ending in an odd number of backslashes goes on to the next (whose
leading whitespace is dropped), as a JAAS configuration usually does; `#` and `!` start comments
only at the start of a line; escapes (`\\t`, `\\n`, `\\r`, `\\f`, `\\uXXXX`, `\\` before any other
character) are read in keys and values alike. A later key replaces an earlier one. Checked against
Java's own `Properties.load` in tests/sim/test_javaprops.py.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PropertiesError", "Property", "parse_properties"]

_WHITESPACE = " \t\f"
_SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A line Java would refuse (a malformed `\\uXXXX`), with its line number."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Property:
    key: str
    value: str
    line: int  # where its logical line starts, from 1


def parse_properties(text: str) -> list[Property]:
    """Every key of `text` with its value and line, in order; a repeated key keeps its last value
    (at its last place), as `Properties.load` does."""
    found: dict[str, Property] = {}
    for line, logical in _logical_lines(text):
        key, value = _split(logical, line)
        found.pop(key, None)
        found[key] = Property(key, value, line)
    return list(found.values())


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, the logical line) for each line that is neither blank nor a comment;
    a natural line ending in an odd number of backslashes continues on the next."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    result: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        start = index
        current = lines[index].lstrip(_WHITESPACE)
        index += 1
        if not current or current[0] in "#!":
            continue
        while _continues(current) and index < len(lines):
            current = current[:-1] + lines[index].lstrip(_WHITESPACE)
            index += 1
        if _continues(current):
            current = current[:-1]  # a continuation at the end of the input: Java drops it
        result.append((start + 1, current))
    return result


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(logical: str, line: int) -> tuple[str, str]:
    """The key (up to the first unescaped separator or whitespace) and the value (after
    whitespace, at most one `=` or `:`, and whitespace), both unescaped."""
    index, end = 0, len(logical)
    while index < end:
        char = logical[index]
        if char == "\\":
            index += 2
            continue
        if char in _SEPARATORS or char in _WHITESPACE:
            break
        index += 1
    key = logical[:index]
    rest = index
    while rest < end and logical[rest] in _WHITESPACE:
        rest += 1
    if rest < end and logical[rest] in _SEPARATORS:
        rest += 1
        while rest < end and logical[rest] in _WHITESPACE:
            rest += 1
    name = _unescape(key, line, "its key")
    return name, _unescape(logical[rest:], line, f"the value of {name}")


def _unescape(text: str, line: int, what: str) -> str:
    """`text` unescaped; a malformed `\\uXXXX` is refused naming `what` holds it, never quoting
    it (a value may be a password)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        if index + 1 >= len(text):
            index += 1  # a lone trailing backslash (the end of the input): nothing
            continue
        escaped = text[index + 1]
        if escaped == "u":
            digits = text[index + 2 : index + 6]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(line, f"malformed \\uxxxx escape in {what}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)
