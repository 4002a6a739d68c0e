"""The agent's HTTP routes and every Prometheus metric rollguard serves, read from the code.

The routes are the agent's own Starlette apps' (`rollguard.agent.api`), made with no sampler
behind them: only their paths and methods are read. The metrics are found in the source of the
modules that declare them (the agent's `AgentMetrics`, the roll's `RollMetrics` and what it
renders with, the Connect watcher's), by their declarations: a call of prometheus_client's
`Counter`, `Gauge`, `CounterMetricFamily` or `GaugeMetricFamily` (or a helper named after one)
whose first arguments are a `rollguard_...` name and its help, or a (name, help) pair handed to
such a call in a loop; its labels are the call's `labels=` (or third argument). A counter's
name gets `_total`, as the exposition format writes it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

METRIC = re.compile(r"rollguard_[a-z0-9_]+")


@dataclass(frozen=True)
class Route:
    port: str
    path: str
    methods: tuple[str, ...]
    answers: str  # the API module's own summary line for the path, if it has one


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter or gauge
    help: str
    labels: tuple[str, ...]


def routes() -> list[Route]:
    """Both ports' routes, from the apps the agent serves."""
    from rollguard.agent import api

    found = []
    apps = {
        "API (mutual TLS)": api.create_api_app(None).router,  # type: ignore[arg-type]
        "probe (plain HTTP)": api.create_probe_app(None, None),
    }  # type: ignore[arg-type]
    summary = (api.__doc__ or "").splitlines()
    for port, app in apps.items():
        for route in app.routes:
            path = getattr(route, "path", "")
            said = next((line for line in summary if f" {path} " in f"{line} "), "")
            answers = said.split(path, 1)[1].strip() if said else ""
            methods = tuple(sorted(getattr(route, "methods", None) or ()))
            found.append(Route(port, path, methods, answers))
    return found


def failure_reasons() -> list[str]:
    """The reasons of the agent's 503 answers."""
    from rollguard.agent.readings import FailureReason

    return [reason.value for reason in FailureReason]


def agent_metrics() -> list[Metric]:
    from rollguard.agent import metrics

    return declared(metrics)


def roll_metrics() -> list[Metric]:
    """The roll's metrics (`--metrics-listen`): the module of `RollMetrics`, and the rollguard
    modules it renders with that declare metrics (the canary's). The one place that says where
    the roll's metrics live: the module is looked for by its class when it is not where it was."""
    module = _module_of("RollMetrics", "rollguard.roller.roll.metrics", "rollguard.roller")
    found = declared(module)
    for value in vars(module).values():
        home = inspect.getmodule(value)
        if home is not None and home is not module and home.__name__.startswith("rollguard."):
            found.extend(m for m in declared(home) if m not in found)
    return found


def _module_of(cls: str, where: str, package: str) -> ModuleType:
    """The module that defines class `cls`: `where`, else the one of `package` whose source
    says `class <cls>`."""
    try:
        module = importlib.import_module(where)
        if hasattr(module, cls):
            return module
    except ImportError:
        pass
    top = importlib.import_module(package)
    for info in pkgutil.walk_packages(top.__path__, f"{package}."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec is not None else None
        if origin and origin.endswith(".py") and f"class {cls}(" in Path(origin).read_text():
            return importlib.import_module(info.name)
    raise LookupError(f"no module of {package} defines {cls}")


def connect_metrics() -> list[Metric]:
    """The Connect watcher's (`rollguard connect auto-restart --metrics-listen`): the module of
    `AutoRestarter`, looked for as the roll's is."""
    return declared(
        _module_of("AutoRestarter", "rollguard.roller.connect.autorestart", "rollguard.roller")
    )


def declared(module: ModuleType) -> list[Metric]:
    """The metrics declared in `module`'s source, in their order, each once."""
    tree = ast.parse(inspect.getsource(module))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: dict[str, Metric] = {}
    for node in ast.walk(tree):
        for metric in _from_call(node) if isinstance(node, ast.Call) else _from_pair(node, parents):
            found.setdefault(metric.name, metric)
    return sorted(found.values(), key=lambda m: _position(tree, m))


def _position(tree: ast.Module, metric: Metric) -> int:
    for node in ast.walk(tree):
        names = (metric.name, metric.name.removesuffix("_total"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            return node.lineno
    return 0


def _kind(call: ast.Call) -> str | None:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    lowered = name.lower()
    if "counter" in lowered:
        return "counter"
    if "gauge" in lowered:
        return "gauge"
    return None


def _labels(call: ast.Call) -> tuple[str, ...]:
    given = next((k.value for k in call.keywords if k.arg == "labels"), None)
    if given is None and len(call.args) > 2:
        given = call.args[2]
    if isinstance(given, ast.List | ast.Tuple):
        return tuple(e.value for e in given.elts if isinstance(e, ast.Constant))
    return ()


def _metric(kind: str, name: str, text: str, labels: tuple[str, ...]) -> Metric:
    return Metric(f"{name}_total" if kind == "counter" else name, kind, text, labels)


def _strings(nodes: list[ast.expr]) -> tuple[str, str] | None:
    if len(nodes) >= 2 and all(isinstance(n, ast.Constant) for n in nodes[:2]):
        name, text = (n.value for n in nodes[:2])  # type: ignore[attr-defined]
        if isinstance(name, str) and isinstance(text, str) and METRIC.fullmatch(name):
            return name, text
    return None


def _from_call(call: ast.Call) -> Iterator[Metric]:
    kind, pair = _kind(call), _strings(list(call.args))
    if kind is not None and pair is not None:
        yield _metric(kind, *pair, _labels(call))


def _from_pair(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> Iterator[Metric]:
    """A (name, help) pair in a loop that makes one metric of each: `Family(name, text, ...)
    for name, text in ((...), (...))`."""
    if not isinstance(node, ast.Tuple) or (pair := _strings(list(node.elts))) is None:
        return
    above = parents.get(node)
    while above is not None and not isinstance(above, ast.GeneratorExp | ast.ListComp):
        above = parents.get(above)
    if above is not None and isinstance(above.elt, ast.Call):
        kind = _kind(above.elt)
        if kind is not None:
            yield _metric(kind, *pair, _labels(above.elt))
