"""The docs must stay true to the code: every agent flag and failure reason is documented, and
every source path and module the docs name exists."""

from __future__ import annotations

import importlib
import importlib.util
import re

from rollguard.agent.config import FLAGS
from rollguard.agent.readings import FailureReason

from helpers import ROOT

README = (ROOT / "README.md").read_text()
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()


def test_every_agent_flag_is_in_the_readme_with_its_default() -> None:
    for flag in FLAGS:
        row = next((line for line in README.splitlines() if f"| `--{flag.name}` |" in line), None)
        assert row is not None, f"--{flag.name} is not in the README's flag table"
        if flag.default is not None:
            assert f"`{flag.default}`" in row, f"--{flag.name}: default {flag.default} not shown"


def test_every_503_reason_is_explained() -> None:
    for reason in FailureReason:
        assert f"`{reason.value}`" in README, reason
        assert f"`{reason.value}`" in OPERATIONS, reason


def test_the_readme_shows_exactly_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README


def test_every_collect_flag_is_in_the_operations_guide_with_its_default() -> None:
    from rollguard.roller.collect.cli import CollectOptions
    from rollguard.roller.options import AgentOptions, PlatformOptions

    shared = {f.name for f in (*AgentOptions.flags(), *PlatformOptions.flags())} | {"output"}
    for flag in CollectOptions.flags():
        if flag.name in shared:
            continue  # the roller's own flags, documented with the roller
        row = next(
            (line for line in OPERATIONS.splitlines() if f"| `--{flag.name}` |" in line), None
        )
        assert row is not None, f"--{flag.name} is not in the operations guide's collect table"
        if flag.default:
            assert f"`{flag.default}`" in row, f"--{flag.name}: default {flag.default} not shown"


def test_every_connect_flag_is_in_the_operations_guide() -> None:
    from rollguard.roller.connect.cli import AUTO_RESTART_FLAGS, CONNECT_FLAGS, OFFSETS_FLAGS

    for flag in (*CONNECT_FLAGS, *AUTO_RESTART_FLAGS, *OFFSETS_FLAGS):
        if flag.name.startswith("retry-"):
            continue  # the five retry flags are documented together
        assert f"`--{flag.name}`" in OPERATIONS, f"--{flag.name} is not in docs/operations.md"
        if flag.default:
            assert any(f"`{flag.default}`" in row for row in rows(OPERATIONS, flag.name)), (
                f"--{flag.name}: default {flag.default} not shown"
            )


def rows(text: str, name: str) -> list[str]:
    """The table rows of `text` whose first cell names `--name` (alone or with others)."""
    return [
        line
        for line in text.splitlines()
        if line.startswith("|") and f"`--{name}`" in line.split("|")[1]
    ]


def test_every_roll_flag_is_in_the_operations_guide_with_its_default() -> None:
    from rollguard.roller.roll.options import RollOptions

    for flag in RollOptions.flags():
        if flag.name.startswith("retry-"):
            continue  # the five retry flags are documented together, in the README
        found = rows(OPERATIONS, flag.name)
        assert found, f"--{flag.name} is not in a table of docs/operations.md"
        if flag.default:
            assert any(f"`{flag.default}`" in row for row in found), (
                f"--{flag.name}: default {flag.default} not shown"
            )
        for old, _ in flag.deprecated:
            assert f"`--{old}" in OPERATIONS, f"deprecated --{old} is not explained"


def test_the_duration_syntax_is_documented_where_the_flags_are() -> None:
    for text in (README, OPERATIONS):
        for example in ("`1500ms`", "`90s`", "`5m`", "`6h`", "`1d`", "`1h30m`"):
            assert example in text, example
        assert "a bare number is seconds" in text


DOCS = {
    "README.md": README,
    "docs/operations.md": OPERATIONS,
    **{f"docs/{p.name}": p.read_text() for p in (ROOT / "docs").glob("*.md")},
}


def test_every_source_path_in_the_docs_exists() -> None:
    for name, text in DOCS.items():
        for path in re.findall(
            r"\b(?<![/\w.-])((?:agent|roller|shared|certs|spark)/[\w/.-]+)", text
        ):
            if path.endswith((".py", ".java", ".properties")):  # the moved sources
                assert (ROOT / path).is_file(), f"{name} names {path}, which does not exist"


def is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:  # a parent is a module, not a package
        return False


def test_every_module_in_the_docs_imports() -> None:
    for name, text in DOCS.items():
        for dotted in set(
            re.findall(r"`(rollguard\.(?:agent|roller|shared|certs|spark)[\w.]*)`", text)
        ):
            parts = dotted.split(".")
            while not is_module(".".join(parts)):
                parts.pop()
            thing: object = importlib.import_module(".".join(parts))
            for attribute in dotted.split(".")[len(parts) :]:
                assert hasattr(thing, attribute), f"{name} names {dotted}, which does not exist"
                thing = getattr(thing, attribute)
