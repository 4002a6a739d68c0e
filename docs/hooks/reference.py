"""mkdocs hook: the reference pages, written from the code at every build of the site.

`on_files` adds them to the site as generated files (nothing is written into docs/): one page per
`rollguard` sub-command and per other console script (`cli_reference.py` reads the parsers),
the agent's HTTP API and every Prometheus metric (`api_reference.py` reads the apps and the
metrics' declarations). mkdocs.yml's nav names them by these paths. `pages()` is what the tests
and scripts/docs-coverage.py read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import api_reference
import cli_reference
from api_reference import Metric
from cli_reference import Command, Flag

SCRIPTS = ("rollguard-agent", "rollguard-certs", "rollguard-report")


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def pages() -> dict[str, str]:
    """Each generated page's path in the site (under docs/) and its Markdown."""
    commands = cli_reference.commands()
    found = {}
    for name, group in _pages_of(commands).items():
        found[f"reference/{name}.md"] = cli_page(name, group)
    found["reference/agent-api.md"] = agent_api_page()
    found["reference/metrics.md"] = metrics_page()
    return found


def _pages_of(commands: list[Command]) -> dict[str, list[Command]]:
    """`rollguard X ...` on page `rollguard-X`, each other script on a page of its own."""
    grouped: dict[str, list[Command]] = {}
    for command in commands:
        if command.argv[0] == "rollguard":
            if len(command.argv) == 1:
                continue  # the index lists its sub-commands
            name = f"rollguard-{command.argv[1]}"
        else:
            name = command.argv[0]
        grouped.setdefault(name, []).append(command)
    return grouped


# ---- the command line ----------------------------------------------------------------------


def anchor(command: Command, flag: Flag | None = None) -> str:
    """The id of a command's heading, or of a flag's row: `connect-restart-wait`."""
    words = list(command.argv[1:])
    if flag is not None:
        words.append(flag.name.lstrip("-").lower())
    return "-".join(words) or command.argv[0]


def cli_page(name: str, commands: list[Command]) -> str:
    title = (
        name.replace("-", " ", 1) if name.startswith("rollguard-") and name not in SCRIPTS else name
    )
    single = f" {{#{anchor(commands[0])}}}" if len(commands) == 1 else ""
    out = [
        f"# {title}{single}",
        "",
        "Written from the command's own parser at each build of this site: every flag, its "
        "variable, default and help as `--help` gives them. How flags, variables and durations "
        "work in every command: [Reference](index.md).",
        "",
    ]
    for command in commands:
        out += _command(command, top=command is commands[0] and len(commands) == 1)
    return "\n".join(out).rstrip() + "\n"


def _command(command: Command, *, top: bool) -> list[str]:
    out = [] if top else [f"## {command.line} {{#{anchor(command)}}}", ""]
    said = command.description.lower()
    if command.summary and not top and not said.startswith(command.summary.lower().rstrip(".")):
        out += [_sentence(command.summary), ""]
    out += _prose(command.description)
    usage = [
        line.removeprefix("usage: ").removeprefix("       ") for line in command.usage.splitlines()
    ]
    out += ["```", *usage, "```", ""]
    if command.subcommands:
        links = [
            f"[`{sub}`](#{anchor(replace(command, argv=(*command.argv, sub)))})"
            for sub in command.subcommands
        ]
        out += ["Sub-commands: " + ", ".join(links) + ".", ""]
    level = "##" if top else "###"
    with_variables = any(f.variable for f in command.flags)
    for section in command.sections:
        out += [f"{level} {section.title} {{#{anchor(command)}--{_slug(section.title)}}}", ""]
        if section.description:
            out += [_sentence(section.description), ""]
        out += _table(command, section.flags, with_variables)
    if command.ignored:
        out += [
            f"Also accepted, and ignored with a warning, so that one command line serves "
            f"both: {', '.join(f'`{name}`' for name in command.ignored)} (flags of the other "
            "command only; their variables are not read).",
            "",
        ]
    return out


def _table(command: Command, flags: Iterable[Flag], with_variables: bool) -> list[str]:
    """One row a flag: the flag (and under it its variable), its default, what it means."""
    head = ["flag and variable" if with_variables else "argument", "default", "meaning"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for flag in flags:
        shown = f"`{flag.name} {flag.metavar}`" if flag.metavar else f"`{flag.name}`"
        if flag.variable:
            shown += f"<br>`{flag.variable}`"
        cells = [f'<span id="{anchor(command, flag)}"></span>{shown}']
        cells += [_default(flag), _meaning(flag)]
        out.append("| " + " | ".join(cells) + " |")
    return [*out, ""]


def _default(flag: Flag) -> str:
    if flag.required and not flag.positional:
        return "required"
    if flag.default is None:
        return ""
    return f"`{flag.default}`"


def _meaning(flag: Flag) -> str:
    parts = [_escape(_sentence(flag.help)) if flag.help else "(no help)"]
    if flag.span:
        parts.append(f"From {flag.span}.")
    if flag.choices:
        parts.append("One of " + ", ".join(f"`{c}`" for c in flag.choices) + ".")
    if flag.switch:
        parts.append(
            f"A switch: `{flag.name}` alone turns it on; its variable takes "
            "`true`/`false`, `1`/`0`, `yes`/`no`."
        )
    if flag.repeat:
        parts.append("Repeatable; its variable takes one value a line.")
    if flag.renamed:
        names = ", ".join(f"`{old}`" for old in flag.renamed)
        parts.append(f"Formerly {names}: still accepted, with a warning.")
    return " ".join(parts)


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", ":")) else ".")


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _prose(text: str) -> list[str]:
    """A parser's description: its prose, and its lines indented by two spaces (examples) as
    code."""
    out: list[str] = []
    code: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("  "):
            code.append(line.strip())
            continue
        if code:
            out += ["```sh", *code, "```", ""]
            code = []
        if line.strip():
            out += [_escape(line.strip()), ""]
    return out


# ---- the agent's API and the metrics -------------------------------------------------------


def agent_api_page() -> str:
    out = [
        "# The agent's HTTP API",
        "",
        "Read from the agent's own routes at each build of this site. What each answer holds, "
        "with examples: [The agent](../agent.md#the-agents-api).",
        "",
        "| port | route | methods | answers |",
        "|---|---|---|---|",
    ]
    for route in api_reference.routes():
        out.append(
            f"| {route.port} | `{route.path}` | {', '.join(route.methods)} | "
            f"{_escape(route.answers)} |"
        )
    out += [
        "",
        "Either port answers an unknown path or version with 404 `not-found` and another method "
        "with 405 `method-not-allowed`, each with a JSON body.",
        "",
        "## The reasons of a 503",
        "",
        '`GET /v1/broker-state` answers 503 `{"error": REASON, "message": ...}` when it has '
        "no usable sample; REASON is one of:",
        "",
        *[f"- `{reason}`" for reason in api_reference.failure_reasons()],
        "",
        "What each means and what to check: [The agent](../agent.md#troubleshooting).",
        "",
        "## Metrics on `/metrics`",
        "",
        *_metrics(api_reference.agent_metrics()),
    ]
    return "\n".join(out).rstrip() + "\n"


def metrics_page() -> str:
    out = [
        "# Metrics",
        "",
        "Every Prometheus metric rollguard serves, read from their declarations in the code at "
        "each build of this site.",
        "",
        "## The agent (`/metrics` on the probe port)",
        "",
        *_metrics(api_reference.agent_metrics()),
        "## A roll (`rollguard roll --metrics-listen`)",
        "",
        "What each says, the fixed values of its labels, and queries and alert rules built on "
        "them: [Watching a roll](../watching.md#roll-metrics-metrics-listen).",
        "",
        *_metrics(api_reference.roll_metrics()),
        "## The Connect watcher (`rollguard connect auto-restart --metrics-listen`)",
        "",
        *_metrics(api_reference.connect_metrics()),
    ]
    return "\n".join(out).rstrip() + "\n"


def _metrics(metrics: list[Metric]) -> list[str]:
    out = ["| metric | type | labels | help |", "|---|---|---|---|"]
    for metric in metrics:
        labels = ", ".join(f"`{label}`" for label in metric.labels)
        out.append(
            f"| `{metric.name}` | {metric.kind} | {labels} | {_escape(_sentence(metric.help))} |"
        )
    return [*out, ""]
