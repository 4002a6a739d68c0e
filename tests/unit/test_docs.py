"""The docs must stay true to the code: every failure reason is documented, every source path
and module the docs name exists, the README stays a landing page. The flags, routes and metrics
are in the reference the site writes from the code (tests/unit/test_docs_reference.py)."""

from __future__ import annotations

import importlib
import importlib.util
import re

from rollguard.agent.readings import FailureReason

from helpers import ROOT

README = (ROOT / "README.md").read_text()
AGENT = (ROOT / "docs" / "agent.md").read_text()
REFERENCE = (ROOT / "docs" / "reference" / "index.md").read_text()


def pages() -> dict[str, str]:
    """README.md and every page of the site's docs/ folder (the hooks are code, not pages)."""
    found = {"README.md": README}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if "hooks" not in path.relative_to(ROOT / "docs").parts:
            found[str(path.relative_to(ROOT))] = path.read_text()
    return found


def test_every_503_reason_is_explained() -> None:
    for reason in FailureReason:
        assert f"`{reason.value}`" in AGENT, reason
        row = [line for line in AGENT.splitlines() if line.startswith(f"| 503 `{reason.value}`")]
        assert row, f"{reason.value} has no row in docs/agent.md's troubleshooting table"


def test_the_readme_shows_exactly_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README


def test_the_readme_is_a_landing_page() -> None:
    lines = README.count("\n")
    assert lines <= 150, f"README.md has {lines} lines: the details belong on the site's pages"


def test_every_link_of_the_readme_reaches_a_file() -> None:
    """The site checks its own links (mkdocs build --strict); the README is outside it."""
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links {target}, which does not exist"


def test_the_duration_syntax_is_documented_where_the_flags_are() -> None:
    for example in ("`1500ms`", "`90s`", "`5m`", "`6h`", "`1d`", "`1h30m`"):
        assert example in REFERENCE, example
    assert "a bare number is seconds" in REFERENCE


DOCS = pages()


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


# What reads as a note between developers, not as documentation for the people who run rollguard:
# the guides say what the tool does and why, never which ticket or change brought it. Citations
# of the specifications it follows (Strimzi proposals, KIPs) are not notes.
NOTES = {
    r"\bissues? #?\d+": "an issue number",
    r"\b(TODO|FIXME|TBD)\b": "a to-do",
    r"earlier rule|old behaviou?r|\bas before\b": "a change described against what came before",
    r"\[(here|this|link|click here)\]\(": '"here" as a link\'s text',
}
# A dated log of measurements, whose entries are named after the changes they measured.
LOGS = {"docs/benchmarks.md"}


def guides() -> dict[str, str]:
    """README.md and every page in docs/ (read now: a page added later is checked too)."""
    return {name: text for name, text in pages().items() if name not in LOGS}


def prose(text: str) -> list[tuple[int, str]]:
    """The lines of `text` outside fenced code blocks (where `#` starts a shell comment), with
    their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def test_the_guides_hold_no_notes_between_developers() -> None:
    found = [
        f"{name}:{number}: {what}: {line.strip()[:100]}"
        for name, text in guides().items()
        for number, line in prose(text)
        for pattern, what in NOTES.items()
        if re.search(pattern, line, re.IGNORECASE)
    ]
    assert not found, "\n".join(found)


def test_every_heading_has_text_and_something_under_it() -> None:
    found = []
    for name, text in guides().items():
        lines = [(n, line) for n, line in prose(text) if line.strip()]
        for (number, line), (_, after) in zip(lines, [*lines[1:], (0, "")], strict=True):
            if not line.startswith("#"):
                continue
            if not line.lstrip("#").strip():
                found.append(f"{name}:{number}: a heading without text")
            elif after.startswith("#") or not after:
                found.append(f"{name}:{number}: nothing under {line!r} before the next heading")
    assert not found, "\n".join(found)


def test_no_table_has_a_column_that_says_the_same_in_every_row() -> None:
    """A column whose every row holds the same word (a `state` of `built` everywhere) says
    nothing to the reader: a leftover of how the work was tracked."""
    found = []
    for name, text in guides().items():
        table: list[list[str]] = []
        for number, line in [*prose(text), (0, "")]:
            if line.startswith("|"):
                table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
                continue
            body = [row for row in table[2:] if len(row) == len(table[0])]
            for i, title in enumerate(table[0] if len(body) >= 3 else []):
                values = {row[i] for row in body}
                if len(values) == 1 and values != {""}:
                    found.append(
                        f"{name}:{number}: column {title!r} is {values.pop()!r} in every row"
                    )
            table = []
    assert not found, "\n".join(found)


# One set of names in every example, the README's quick start's (docs/operations.md says them
# once, at its top), so that a command copied from one guide fits the files and names another
# guide made: cluster `prod`, on Kubernetes in namespace `kafka`, on VMs the hosts
# `kafka-N.example` of `prod.yaml`, certificates in `pki/` (`pki/agents/` and `pki/rollers/` in
# the Kubernetes walkthrough, which has two CAs).
EXAMPLES = {
    "namespace": {"kafka"},
    "selector": {"strimzi.io/cluster=prod"},
    "service": {"prod-kafka-brokers"},
    "bootstrap": {"prod-kafka-bootstrap.kafka.svc:9092", "kafka-0.example:9092"},
    # and the inventory `make demo-cluster` writes, in the README's quick start
    "inventory": {"prod.yaml", "build/demo-cluster/inventory.yaml"},
    "cert": {
        "pki/roller.crt",
        "pki/kafka-0.crt",
        "pki/rollers/roller.crt",
        "pki/agents/agents.crt",
    },
    "key": {"pki/roller.key", "pki/kafka-0.key", "pki/rollers/roller.key", "pki/agents/agents.key"},
    "cacert": {"pki/ca.crt", "pki/agents/ca.crt"},
}


def test_every_example_uses_the_quick_starts_names() -> None:
    flags = "|".join(EXAMPLES)
    found = [
        f"{name}:{text[: m.start()].count(chr(10)) + 1}: --{m[1]} {m[2]}, not one of "
        f"{', '.join(sorted(EXAMPLES[m[1]]))}"
        for name, text in guides().items()
        for m in re.finditer(rf"--({flags})[ =]([^\s`\\|)]+)", text)
        # placeholders: NS, FILE, `...`, or the next flag (`--cert --key --cacert`)
        if not re.fullmatch(r"[A-Z_]+|\.\.\.|--.*", m[2]) and m[2] not in EXAMPLES[m[1]]
    ]
    assert not found, "\n".join(found)


def test_every_field_of_the_plan_s_json_is_documented() -> None:
    """`rollguard plan --output json`'s fields, from a full entry, each named in the guide."""
    from rollguard.roller.model import Node, Role
    from rollguard.roller.roll.configs.live import NodeConfig
    from rollguard.roller.roll.planning import Hold, PlanEntry
    from rollguard.roller.roll.rules.safety import Blocker

    node = Node(1, "kafka-1", frozenset({Role.BROKER}), None)
    hold = Hold("unsafe", "why", (Blocker("why", "orders-0", (2,)),))
    entry = PlanEntry(
        node, "restart", "r", 1, "a", "why", "order", 1, hold, "4.0.0", "4.4.0", NodeConfig()
    )
    guide = (ROOT / "docs" / "first-roll.md").read_text()
    data = entry.to_json()
    fields = {*data, *data["hold"], *data["hold"]["blockers"][0]}
    for field in fields:
        assert f"`{field}`" in guide, f"plan's JSON field {field} is not in docs/first-roll.md"
