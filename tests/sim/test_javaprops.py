"""Java properties files read as Java reads them (`rollguard.shared.javaprops`), each case
checked against Java's own `Properties.load` (tests/javaprops/PropsDump.java, run by the JDK the
project needs anyway) and against the value written here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rollguard.shared.javaprops import PropertiesError, parse_properties

from helpers import ROOT

DUMP = ROOT / "tests" / "javaprops" / "PropsDump.java"

CASES = [
    ("plain", "a=1\nb = 2\n", {"a": "1", "b": "2"}),
    ("colon and whitespace separators", "a:1\nb 2\nc\t=\t3\nd  :  4",
     {"a": "1", "b": "2", "c": "3", "d": "4"}),
    ("comments only at a line's start", "# x=1\n  ! y=2\nz=3 # not a comment",
     {"z": "3 # not a comment"}),
    ("a key alone", "lonely\nempty=\n", {"lonely": "", "empty": ""}),
    ("the first separator only", "url=jdbc:x=y\na==b\nc = =d",
     {"url": "jdbc:x=y", "a": "=b", "c": "=d"}),
    ("continuation lines",
     'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n'
     '    username="u" \\\n    password="p";\nnext=1',
     {"sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                          'username="u" password="p";', "next": "1"}),
    ("an even number of backslashes ends the line", "a=x\\\\\nb=y", {"a": "x\\", "b": "y"}),
    ("escapes", "tab=a\\tb\nnl=a\\nb\nuni=caf\\u00e9\nother=\\q\\=\\:",
     {"tab": "a\tb", "nl": "a\nb", "uni": "café", "other": "q=:"}),
    ("escaped separators in a key", "a\\=b=c\nd\\ e=f\ng\\:h:i",
     {"a=b": "c", "d e": "f", "g:h": "i"}),
    ("the last of a repeated key", "a=1\nb=2\na=3", {"a": "3", "b": "2"}),
    ("CR and CRLF line ends", "a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
    ("a continued comment is not continued", "# comment \\\nkey=v", {"key": "v"}),
    ("a continuation into a blank line", "a=x\\\n\nb=y", {"a": "x", "b": "y"}),
    ("a trailing backslash at the end", "a=x\\", {"a": "x"}),
    ("leading whitespace and non-ASCII", "   listeners = PLAINTEXT://:9092\nnom=équipe",
     {"listeners": "PLAINTEXT://:9092", "nom": "équipe"}),
    ("a malformed unicode escape", "ok=1\nbad=\\u12\n", None),  # Java refuses it
]  # fmt: skip


def java_reads(texts: list[str], folder: Path) -> list[dict[str, str] | str]:
    """What Java's `Properties.load` makes of each text (its error message if it refuses one),
    in one JVM."""
    paths = []
    for index, text in enumerate(texts):
        paths.append(folder / f"case-{index}.properties")
        paths[-1].write_text(text, encoding="utf-8")
    java = shutil.which("java")
    assert java is not None, "a JDK 17 is needed (make test's prerequisites)"
    done = subprocess.run(
        [java, str(DUMP), *map(str, paths)], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    results: list[dict[str, str] | str] = []
    for line in done.stdout.splitlines():
        if line.startswith("== "):
            results.append({})
        elif line.startswith("error "):
            results[-1] = line
        else:
            key, _, value = line.partition(" ")
            found = results[-1]
            assert isinstance(found, dict)
            found[bytes.fromhex(key).decode()] = bytes.fromhex(value).decode()
    assert len(results) == len(texts), done.stdout
    return results


@pytest.mark.parametrize(("name", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_read_as_written(name: str, text: str, expected: dict[str, str] | None) -> None:
    if expected is None:
        with pytest.raises(PropertiesError, match="line 2: malformed"):
            parse_properties(text)
    else:
        assert {p.key: p.value for p in parse_properties(text)} == expected


def test_read_as_java_reads_them(tmp_path: Path) -> None:
    java = java_reads([text for _, text, _ in CASES], tmp_path)
    for (name, _, expected), seen in zip(CASES, java, strict=True):
        if expected is None:
            assert isinstance(seen, str) and seen.startswith("error Malformed"), (name, seen)
        else:
            assert seen == expected, name


def test_each_key_keeps_the_line_its_logical_line_starts_on() -> None:
    found = parse_properties("# header\n\na=1\nb=two \\\n  lines\nc=3\n")
    assert [(p.key, p.line) for p in found] == [("a", 3), ("b", 4), ("c", 6)]
