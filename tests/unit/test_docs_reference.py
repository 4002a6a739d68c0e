"""The site's reference, written from the code (docs/hooks/), says what the code does: every flag of
every command has its help and is on its command's page with its variable, every route the agent
serves and every metric rollguard declares is listed, and the node's life drawn in the docs has
every state of the roller's. Read against argparse's own view of the parsers, the agent's apps and
the enums, not against the generator's.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import re
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from helpers import ROOT

HOOKS = ROOT / "docs" / "hooks"

# Arguments that have no help today, each named by its command line. A new one fails; so does
# one of these once it has its help (then remove it here).
WITHOUT_HELP = {
    ("rollguard connect restart", "CONNECTOR"),
    ("rollguard connect stop", "CONNECTOR"),
    ("rollguard connect resume", "CONNECTOR"),
    ("rollguard-certs init-ca", "--rsa-bits"),
    ("rollguard-certs issue-server", "--rsa-bits"),
    ("rollguard-certs issue-client", "--rsa-bits"),
    ("rollguard-certs show", "files"),
}


def load(name: str, path: str) -> ModuleType:
    """A module of docs/hooks/ or scripts/, as mkdocs or its script loads it."""
    sys.path.insert(0, str(HOOKS))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(HOOKS))


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return load("docs_hooks_reference", "docs/hooks/reference.py")


@pytest.fixture(scope="module")
def pages(reference: ModuleType) -> dict[str, str]:
    found: dict[str, str] = reference.pages()
    return found


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command line's parser, by walking the console scripts' own (cli_snapshot's way)."""
    from rollguard.agent.cli import build_parser as agent
    from rollguard.certs.cli import build_parser as certs
    from rollguard.roller.cli import build_parser as roller
    from rollguard.spark.cli import build_parser as report

    def walk(parser: argparse.ArgumentParser, line: str) -> Iterator[tuple[str, Any]]:
        yield line, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{line} {name}")

    scripts = {"rollguard": roller, "rollguard-agent": agent, "rollguard-certs": certs}
    for script, build in {**scripts, "rollguard-report": report}.items():
        yield from walk(build(), script)


def arguments(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The arguments a reader sees: not --help, --version, the sub-commands or hidden names."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.dest == "version" or action.help == argparse.SUPPRESS:
            continue
        yield action


def name(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)


def test_every_argument_has_its_help() -> None:
    """A flag added without help fails here. A flag with a prefix gets `; env VAR` (and its
    default) added to its help, so the declaration's own words are what counts: the help up to
    what settings.py adds."""
    lacking = set()
    for line, parser in parsers():
        for action in arguments(parser):
            own = re.sub(r"( \(default: [^)]*\))?( \(required\))?(; repeatable)?; env \S+.*$",
                         "", action.help or "")  # fmt: skip
            if not own.strip():
                lacking.add((line, name(action)))
    new = sorted(lacking - WITHOUT_HELP)
    assert not new, f"arguments without help (give each its help): {new}"
    fixed = sorted(WITHOUT_HELP - lacking)
    assert not fixed, f"these have their help now: remove them from WITHOUT_HELP: {fixed}"


def page_of(line: str) -> str:
    words = line.split()
    if words[0] == "rollguard":
        return f"reference/rollguard-{words[1]}.md"
    return f"reference/{words[0]}.md"


def test_every_flag_is_on_its_commands_page_with_its_variable(pages: dict[str, str]) -> None:
    """Each command's section of its page lists each of its flags, with the variable its --help
    names (argparse's text, `; env ROLLGUARD_...`)."""
    for line, parser in parsers():
        if line in ("rollguard",) or not list(arguments(parser)):
            continue
        page = pages[page_of(line)]
        anchor = "-".join(line.split()[1:]) or line
        start = page.find(f"{{#{anchor}}}")
        assert start >= 0, f"{line} has no section on {page_of(line)}"
        following = re.search(r"^## rollguard[\w -]* \{#", page[start + 1 :], re.M)
        section = page[start : start + 1 + following.start()] if following else page[start:]
        for action in arguments(parser):
            flag = name(action)
            rows = [r for r in section.splitlines() if r.startswith("|") and f"`{flag}" in r]
            assert rows, f"{line} {flag} is not on {page_of(line)}"
            variable = re.search(r"; env ([A-Z0-9_]+)", action.help or "")
            if variable:
                assert f"`{variable[1]}`" in rows[0], f"{line} {flag}: {variable[1]} not shown"


def test_roll_pause_and_resume_are_on_the_roll_page(pages: dict[str, str]) -> None:
    page = pages["reference/rollguard-roll.md"]
    for action in ("pause", "resume"):
        assert f"## rollguard roll {action} {{#roll-{action}}}" in page
        assert "`--roll-id ID`" in page.split(f"{{#roll-{action}}}")[1]


def test_every_agent_flag_is_on_the_agents_page_with_its_default(pages: dict[str, str]) -> None:
    from rollguard.agent.config import ENV_PREFIX, FLAGS

    page = pages["reference/rollguard-agent.md"]
    for flag in FLAGS:
        row = next((r for r in page.splitlines() if f"`--{flag.name} " in r
                    or f"`--{flag.name}`" in r), None)  # fmt: skip
        assert row is not None, f"--{flag.name} is not on the agent's page"
        assert f"`{flag.env(ENV_PREFIX)}`" in row
        if flag.default:
            assert f"`{flag.default}`" in row, f"--{flag.name}: default {flag.default} not shown"


def test_every_route_the_agent_serves_is_listed(pages: dict[str, str]) -> None:
    from rollguard.agent.api import create_api_app, create_probe_app
    from rollguard.agent.readings import FailureReason

    page = pages["reference/agent-api.md"]
    apps = (create_api_app(None).router, create_probe_app(None, None))  # type: ignore[arg-type]
    paths = [route.path for app in apps for route in app.routes]  # type: ignore[attr-defined]
    assert len(paths) >= 4
    for path in paths:
        assert f"| `{path}` |" in page, path
    for reason in FailureReason:
        assert f"- `{reason.value}`" in page, reason


def rendered_agent_metrics() -> set[str]:
    """The names a scrape of a real AgentMetrics shows, its sampler a stand-in that has no
    sample yet."""
    from rollguard.agent.metrics import AgentMetrics
    from rollguard.shared.retry import RetryStats

    class Sampler:
        latest = None
        last_duration = 0.1
        stats = RetryStats()

        def subscribe(self, listener: object) -> None:
            pass

        def current(self) -> None:
            return None

    text = AgentMetrics(Sampler(), clock=lambda: 0.0).render().decode()  # type: ignore[arg-type]
    return set(re.findall(r"^# TYPE (\S+)", text, re.M))


def test_every_agent_metric_a_scrape_shows_is_listed(pages: dict[str, str]) -> None:
    page = pages["reference/agent-api.md"]
    shown = rendered_agent_metrics()
    assert "rollguard_agent_ready" in shown
    for metric in shown:
        counter = metric if metric.endswith("_total") else f"{metric}_total"
        assert f"`{metric}`" in page or f"`{counter}`" in page, metric


def test_every_roll_metric_is_explained_where_a_roll_is_watched(pages: dict[str, str]) -> None:
    """The metrics page lists the roll's metrics from their declarations; `Watching a roll`
    says what each means, by hand: neither may lag the code."""
    watching = (ROOT / "docs" / "watching.md").read_text()
    listed = re.findall(r"^\| `(rollguard_roll_\w+)`", pages["reference/metrics.md"], re.M)
    assert "rollguard_roll_restarts_total" in listed
    for metric in listed:
        assert f"`{metric}`" in watching, f"{metric} is not explained in docs/watching.md"


def test_the_node_life_picture_has_every_state_of_the_roller() -> None:
    """scripts/docs_diagrams.py draws the node's life from the roller's states (`node_life`,
    which fails on a state it does not place); the committed picture must have them all."""
    diagrams = load("docs_diagrams", "scripts/docs_diagrams.py")
    life = diagrams.node_life()
    svg = html.unescape((ROOT / "docs" / "img" / "node-life.svg").read_text())
    for state, _, _ in life.states:
        assert f">{state}<" in svg, f"{state} is not in docs/img/node-life.svg: make docs-pictures"


def test_every_picture_is_shown_on_a_page() -> None:
    text = "".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    for picture in (ROOT / "docs" / "img").iterdir():
        assert f"img/{picture.name}" in text, f"docs/img/{picture.name} is on no page"
