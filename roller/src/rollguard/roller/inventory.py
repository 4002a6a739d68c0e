"""The inventory file: which nodes make up a cluster that is not on Kubernetes, and how each is
restarted.

A typo here does harm quietly: `role:` instead of `roles:` once made a controller a broker, so the
quorum check was skipped. So the file is checked against a schema before anything else happens,
and every problem is one line naming the file, the line, the key and what was expected. The YAML
is composed (not just loaded) so each value keeps the line it came from.

    cluster: prod-eu            # optional: the name used in datasets and reports
    nodes:
      - id: 0                   # Kafka's node.id, an integer >= 0
        name: kafka-0           # unique, a DNS label (lowercase letters, digits, '-')
        roles: [broker, controller]   # optional, default [broker]
        agent: https://kafka-0.example.com:8443
        restart: ssh kafka-0 sudo systemctl restart kafka
        health: ssh kafka-0 systemctl is-active --quiet kafka   # optional: 0 = running
        install: ssh kafka-0 sudo /opt/kafka/switch "$ROLLGUARD_KAFKA_VERSION"   # optional
        config: configs/kafka-0.properties   # optional: its server.properties as at its next
                                # start (relative: to the inventory's folder), or instead
        config-command: ssh kafka-0 cat /etc/kafka/server.properties   # prints it

YAML anchors and merge keys (`<<: *defaults`) work as usual; top-level keys starting with `x-`
are ignored, to hold them (`x-defaults: &defaults {restart: ...}`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from rollguard.roller.model import CLUSTER_NAME, Node, Role
from rollguard.shared.errors import ConfigError

MAX_NODE_ID = 2**31 - 1  # Kafka's node.id is an int32
DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
MERGE_TAG = "tag:yaml.org,2002:merge"
TOP_KEYS = ("cluster", "nodes")
NODE_KEYS = (
    "id",
    "name",
    "roles",
    "agent",
    "restart",
    "health",
    "install",
    "config",
    "config-command",
)
REQUIRED_NODE_KEYS = ("id", "name", "agent", "restart")
EXPECTED = {
    "cluster": "a cluster name (letters, digits, '.', '_', '-')",
    "nodes": "a list of nodes",
    "id": f"Kafka's node id, an integer from 0 to {MAX_NODE_ID}",
    "name": "a DNS label: lowercase letters, digits and '-', at most 63, no '-' at either end",
    "roles": "a non-empty list of 'broker' and/or 'controller'",
    "agent": "the agent's URL, https://host[:port][/path]",
    "restart": "the command that restarts the broker, a non-empty string",
    "health": "a command that exits 0 while the broker process runs, a non-empty string",
    "install": "the command that installs or switches the node's Kafka to "
    "$ROLLGUARD_KAFKA_VERSION before its restart, a non-empty string",
    "config": "the path of the node's server.properties as it will be at its next start",
    "config-command": "a command that prints the node's server.properties as it will be at its "
    "next start, a non-empty string",
}


@dataclass(frozen=True, slots=True)
class InventoryNode:
    node: Node
    restart: str
    health: str | None = None  # exit status 0: the broker process runs on that host
    # Run before the restart in a roll with --kafka-version, ROLLGUARD_KAFKA_VERSION set to it:
    # installs or switches the node's Kafka binaries (the restart command may do it instead).
    install: str | None = None
    # The node's configuration as it will be at its next start (`rollguard plan` compares it
    # with what Kafka says the node runs): a server.properties file, or a command printing one.
    config: Path | None = None
    config_command: str | None = None


@dataclass(frozen=True, slots=True)
class Inventory:
    path: Path
    cluster: str | None
    nodes: tuple[InventoryNode, ...]


def load_inventory(path: Path) -> list[InventoryNode]:
    """The nodes of an inventory file; ConfigError naming the file, line and key otherwise."""
    return list(read_inventory(path).nodes)


def read_inventory(path: Path) -> Inventory:
    """The whole inventory, with its optional cluster name."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"inventory {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"inventory {path}: not UTF-8 text (byte {exc.start})") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(_yaml_problem(path, exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"inventory {path}: not valid YAML ({_one_line(str(exc))})") from None
    return _Checker(path).inventory(root)


def _yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = "; ".join(_one_line(part) for part in (exc.context, exc.problem) if part)
    return f"inventory {path}{where}: not valid YAML: {what}"


def _construct_problem(exc: yaml.YAMLError) -> str:
    return "not valid YAML: " + _one_line(getattr(exc, "problem", None) or str(exc))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Checker:
    """Walks the composed document; every failure is a ConfigError with the node's line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loader = yaml.SafeLoader("")

    def fail(self, node: yaml.Node, where: str, problem: str) -> ConfigError:
        line = node.start_mark.line + 1
        return ConfigError(f"inventory {self.path}, line {line}: {where}: {problem}")

    def value(self, node: yaml.Node, where: str) -> Any:
        try:
            return self._loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise self.fail(node, where, _construct_problem(exc)) from None

    def mapping(
        self, node: yaml.Node, where: str, known: tuple[str, ...], *, extensions: bool = False
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key -> (key node, value node); unknown and repeated keys refused. With `extensions`,
        keys starting with `x-` are left alone (a place for anchors, as in Compose files)."""
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, where, f"expected a mapping with keys {', '.join(known)}")
        own: set[str] = set()
        for key_node, _ in node.value:
            key = (
                None if key_node.tag == MERGE_TAG else self.key(key_node, where, known, extensions)
            )
            if key in own:
                raise self.fail(key_node, where, f"key {key!r} appears twice")
            if key is not None:
                own.add(key)
        # Merge keys (`<<: *defaults`) are expanded as PyYAML's loader would; an own key
        # overrides a merged one, which is why repeats are only refused among own keys.
        try:
            self._loader.flatten_mapping(node)
        except yaml.YAMLError as exc:
            raise self.fail(node, where, _construct_problem(exc)) from None
        found: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            key = self.key(key_node, where, known, extensions)
            if key is not None:
                found[key] = (key_node, value_node)
        return found

    def key(
        self, node: yaml.Node, where: str, known: tuple[str, ...], extensions: bool
    ) -> str | None:
        """The key, None for an extension key to skip; ConfigError for any other key."""
        key = self.value(node, where)
        if extensions and isinstance(key, str) and key.startswith("x-"):
            return None
        if not isinstance(key, str) or key not in known:
            raise self.fail(node, where, self.unknown(key, known))
        return key

    @staticmethod
    def unknown(key: object, known: tuple[str, ...]) -> str:
        text = f"unknown key {_shown(key)}"
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        if close:
            text += f" (did you mean {close[0]!r}?)"
        return f"{text}; expected one of {', '.join(known)}"

    def inventory(self, root: yaml.Node | None) -> Inventory:
        if root is None:
            raise ConfigError(
                f"inventory {self.path}: empty; expected a mapping with a 'nodes' list"
            )
        top = self.mapping(root, "top level", TOP_KEYS, extensions=True)
        if "nodes" not in top:
            raise self.fail(root, "top level", f"missing key 'nodes' ({EXPECTED['nodes']})")
        cluster = None
        if "cluster" in top:
            cluster = self.cluster(top["cluster"][1])
        nodes_node = top["nodes"][1]
        if not isinstance(nodes_node, yaml.SequenceNode):
            raise self.fail(nodes_node, "nodes", f"expected {EXPECTED['nodes']}")
        result: list[InventoryNode] = []
        first_ids: dict[int, yaml.Node] = {}
        first_names: dict[str, yaml.Node] = {}
        for index, entry in enumerate(nodes_node.value):
            where = f"nodes[{index}]"
            item, fields = self.node(entry, where)
            self.unique(first_ids, item.node.node_id, fields["id"][1], where, "id")
            self.unique(first_names, item.node.name, fields["name"][1], where, "name")
            result.append(item)
        return Inventory(self.path, cluster, tuple(result))

    def unique(
        self, first: dict[Any, yaml.Node], value: object, node: yaml.Node, where: str, key: str
    ) -> None:
        if value in first:
            line = first[value].start_mark.line + 1
            raise self.fail(
                node,
                f"{where}.{key}",
                f"{value!r} is also the {key} of the node on line {line}; each node needs its own",
            )
        first[value] = node

    def cluster(self, node: yaml.Node) -> str:
        value = self.value(node, "cluster")
        if isinstance(value, str) and CLUSTER_NAME.fullmatch(value):
            return value
        raise self.fail(node, "cluster", f"expected {EXPECTED['cluster']}, got {_shown(value)}")

    def node(
        self, entry: yaml.Node, where: str
    ) -> tuple[InventoryNode, dict[str, tuple[yaml.Node, yaml.Node]]]:
        fields = self.mapping(entry, where, NODE_KEYS)
        for key in REQUIRED_NODE_KEYS:
            if key not in fields:
                raise self.fail(entry, where, f"missing key {key!r} ({EXPECTED[key]})")
        checks: dict[str, Callable[[Any], Any]] = {
            "id": _node_id,
            "name": _name,
            "roles": _roles,
            "agent": _agent_url,
            "restart": _command,
            "health": _command,
            "install": _command,
            "config": _command,
            "config-command": _command,
        }
        values: dict[str, Any] = {}
        for key, (_, value_node) in fields.items():
            raw = self.value(value_node, f"{where}.{key}")
            try:
                values[key] = checks[key](raw)
            except _Invalid as exc:
                got = f", {exc.detail}" if exc.detail else f", got {_shown(raw)}"
                problem = f"expected {EXPECTED[key]}{got}"
                raise self.fail(value_node, f"{where}.{key}", problem) from None
        if "config" in fields and "config-command" in fields:
            problem = "give either config (a file) or config-command, not both"
            raise self.fail(fields["config-command"][0], where, problem)
        roles = values.get("roles", frozenset({Role.BROKER}))
        node = Node(values["id"], values["name"], roles, values["agent"])
        config = None
        if "config" in values:  # relative to the inventory's folder, as written there
            config = self.path.parent / Path(values["config"]).expanduser()
        item = InventoryNode(
            node,
            values["restart"],
            values.get("health"),
            values.get("install"),
            config,
            values.get("config-command"),
        )
        return item, fields


class _Invalid(ValueError):
    """A value that does not fit its key; `detail` replaces the default "got <value>"."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


def _node_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NODE_ID:
        raise _Invalid
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not DNS_LABEL.fullmatch(value):
        raise _Invalid
    return value


def _roles(value: Any) -> frozenset[Role]:
    if not isinstance(value, list) or not value:
        raise _Invalid
    roles: list[Role] = []
    for item in value:
        try:
            role = Role(item)
        except ValueError:
            raise _Invalid(f"got {_shown(item)} in {_shown(value)}") from None
        if role in roles:
            raise _Invalid(f"got {item!r} twice")
        roles.append(role)
    return frozenset(roles)


def _agent_url(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid
    parts = urlsplit(value)
    if parts.username is not None or parts.password is not None:
        # Never echo it: the part before '@' may be a password.
        raise _Invalid("got a URL with credentials in it (the agent authenticates by certificate)")
    if parts.scheme != "https":
        raise _Invalid(f"got {_shown(value)} (no https:// scheme)")
    if not parts.hostname:
        raise _Invalid(f"got {_shown(value)} (no host)")
    try:
        port = parts.port
    except ValueError:
        raise _Invalid(f"got {_shown(value)} (the port is not a number from 1 to 65535)") from None
    if port == 0 or parts.netloc.endswith(":"):
        raise _Invalid(f"got {_shown(value)} (the port is not a number from 1 to 65535)")
    if parts.query or parts.fragment or any(c.isspace() for c in value):
        raise _Invalid(f"got {_shown(value)} (no query, fragment or spaces allowed)")
    return value


def _command(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid
    return value
