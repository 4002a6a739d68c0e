"""The inventory schema (`rollguard.roller.inventory`): what a good file gives, and for every kind
of mistake the one line that names the file, the line, the key and what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollguard.roller.inventory import Inventory, InventoryNode, load_inventory, read_inventory
from rollguard.roller.model import Node, Role
from rollguard.shared.errors import ConfigError

GOOD = """\
cluster: prod-eu
x-ssh: &ssh
  restart: ssh kafka-0 sudo systemctl restart kafka
nodes:
  - id: 0
    name: kafka-0
    roles: [broker, controller]
    agent: https://kafka-0.example.com:8443
    <<: *ssh
    health: ssh kafka-0 systemctl is-active --quiet kafka
  - id: 1
    name: kafka-1
    agent: https://[fd00::1]/rollguard
    restart: "true"
"""


def test_a_good_inventory_gives_nodes_commands_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "prod.yaml"
    path.write_text(GOOD)
    assert read_inventory(path) == Inventory(
        path,
        "prod-eu",
        (
            InventoryNode(
                Node(
                    0,
                    "kafka-0",
                    frozenset({Role.BROKER, Role.CONTROLLER}),
                    "https://kafka-0.example.com:8443",
                ),
                "ssh kafka-0 sudo systemctl restart kafka",
                "ssh kafka-0 systemctl is-active --quiet kafka",
            ),
            InventoryNode(
                Node(1, "kafka-1", frozenset({Role.BROKER}), "https://[fd00::1]/rollguard"),
                "true",
                None,
            ),
        ),
    )
    assert load_inventory(path) == list(read_inventory(path).nodes)


def test_json_is_yaml_too_and_the_cluster_name_is_optional(tmp_path: Path) -> None:
    path = tmp_path / "inv.json"
    node = {"id": 7, "name": "b7", "agent": "https://10.0.0.7:8443", "restart": "x"}
    path.write_text(json.dumps({"nodes": [node]}))
    inventory = read_inventory(path)
    assert inventory.cluster is None and [n.node.node_id for n in inventory.nodes] == [7]


def test_an_empty_node_list_is_an_empty_roll(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("nodes: []\n")
    assert load_inventory(path) == []


def one(**fields: str | None) -> str:
    """An inventory with one node, on line 2: its fields as YAML flow text (None drops one)."""
    values: dict[str, str | None] = {"id": "0", "name": "a", "agent": "'https://a'"}
    values |= {"restart": "x", **fields}
    body = ", ".join(f"{key}: {value}" for key, value in values.items() if value is not None)
    return f"nodes:\n  - {{{body}}}\n"


TWO = "nodes:\n  - {id: 0, name: a, agent: 'https://a', restart: x}\n"
AGENT = "line 2: nodes[0].agent: expected the agent's URL, https://host[:port][/path], got"
PORT = "(the port is not a number from 1 to 65535)"
ROLES = "line 2: nodes[0].roles: expected a non-empty list of 'broker' and/or 'controller', got"
ID = "line 2: nodes[0].id: expected Kafka's node id, an integer from 0 to 2147483647, got"
NAME = (
    "line 2: nodes[0].name: expected a DNS label: lowercase letters, digits and '-', at most 63, "
    "no '-' at either end, got"
)
RESTART = "line 2: nodes[0].restart: expected the command that restarts the broker, a non-empty"
HEALTH = (
    "line 2: nodes[0].health: expected a command that exits 0 while the broker process runs, a "
    "non-empty string, got"
)
KEYS = "expected one of id, name, roles, agent, restart, health, install, config, config-command"
NOT_YAML = "not valid YAML:"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # keys: unknown, missing, repeated
        (
            "nodes:\n  - id: 0\n    name: kafka-0\n    role: [controller]\n",
            f"line 4: nodes[0]: unknown key 'role' (did you mean 'roles'?); {KEYS}",
        ),
        (one(colour="red"), f"line 2: nodes[0]: unknown key 'colour'; {KEYS}"),
        (one(restart_command="x"), f"line 2: nodes[0]: unknown key 'restart_command' (did you "
         f"mean 'restart'?); {KEYS}"),
        (one(**{"5": "x"}), f"line 2: nodes[0]: unknown key 5; {KEYS}"),
        ("node: []\n", "line 1: top level: unknown key 'node' (did you mean 'nodes'?); expected "
         "one of cluster, nodes"),
        ("cluster: a\n", "line 1: top level: missing key 'nodes' (a list of nodes)"),
        (one(restart=None), "line 2: nodes[0]: missing key 'restart' (the command that restarts "
         "the broker, a non-empty string)"),
        (one(name=None), "line 2: nodes[0]: missing key 'name' (a DNS label: lowercase letters, "
         "digits and '-', at most 63, no '-' at either end)"),
        ("nodes:\n  - id: 0\n    id: 1\n", "line 3: nodes[0]: key 'id' appears twice"),
        # unique ids and names
        (TWO + "  - {id: 0, name: b, agent: 'https://b', restart: y}\n",
         "line 3: nodes[1].id: 0 is also the id of the node on line 2; each node needs its own"),
        (TWO + "\n  - {id: 1, name: a, agent: 'https://b', restart: y}\n",
         "line 4: nodes[1].name: 'a' is also the name of the node on line 2; each node needs "
         "its own"),
        # values
        (one(id="-1"), f"{ID} -1"),
        (one(id="'0'"), f"{ID} '0'"),
        (one(id="true"), f"{ID} True"),
        (one(id="1.5"), f"{ID} 1.5"),
        (one(id="2147483648"), f"{ID} 2147483648"),
        (one(name="Kafka_0"), f"{NAME} 'Kafka_0'"),
        (one(name="-kafka"), f"{NAME} '-kafka'"),
        (one(name="7"), f"{NAME} 7"),
        (one(name="k" * 64), f"{NAME} '{'k' * 56}..."),
        (one(roles="[leader]"), f"{ROLES} 'leader' in ['leader']"),
        (one(roles="[]"), f"{ROLES} []"),
        (one(roles="broker"), f"{ROLES} 'broker'"),
        (one(roles="[broker, broker]"), f"{ROLES} 'broker' twice"),
        (one(restart="'  '"), f"{RESTART} string, got '  '"),
        (one(restart="3"), f"{RESTART} string, got 3"),
        (one(restart=""), f"{RESTART} string, got None"),
        (one(health="[a]"), f"{HEALTH} ['a']"),
        (one(health="''"), f"{HEALTH} ''"),
        ("cluster: 'a b'\nnodes: []\n", "line 1: cluster: expected a cluster name (letters, "
         "digits, '.', '_', '-'), got 'a b'"),
        # agent URLs
        (one(agent="kafka-0:8443"), f"{AGENT} 'kafka-0:8443' (no https:// scheme)"),
        (one(agent="'http://a:8443'"), f"{AGENT} 'http://a:8443' (no https:// scheme)"),
        (one(agent="'https://:8443'"), f"{AGENT} 'https://:8443' (no host)"),
        (one(agent="'https://a:99999'"), f"{AGENT} 'https://a:99999' {PORT}"),
        (one(agent="'https://a:0'"), f"{AGENT} 'https://a:0' {PORT}"),
        (one(agent="'https://a:http'"), f"{AGENT} 'https://a:http' {PORT}"),
        (one(agent="'https://a:'"), f"{AGENT} 'https://a:' {PORT}"),
        (one(agent="'https://a/?x=1'"), f"{AGENT} 'https://a/?x=1' (no query, fragment or "
         "spaces allowed)"),
        (one(agent="8443"), f"{AGENT} 8443"),
        # shapes
        ("[]\n", "line 1: top level: expected a mapping with keys cluster, nodes"),
        ("nodes: {a: 1}\n", "line 1: nodes: expected a list of nodes"),
        ("nodes:\n  - kafka-0\n", "line 2: nodes[0]: expected a mapping with keys id, name, "
         "roles, agent, restart, health, install, config, "
         "config-command"),
        # YAML itself
        ("nodes: [\n  - a\n", f"line 2, column 3: {NOT_YAML} while parsing a flow node; "
         "expected the node content, but found '-'"),
        ("nodes:\n\t- a\n", f"line 2, column 1: {NOT_YAML} while scanning for the next token; "
         "found character '\\t' that cannot start any token"),
        ("nodes: []\n---\nnodes: []\n", f"line 2, column 1: {NOT_YAML} expected a single "
         "document in the stream; but found another document"),
        (one(health="!!python/object/apply:os.system [echo]"), f"line 2: nodes[0].health: "
         f"{NOT_YAML} could not determine a constructor for the tag "
         "'tag:yaml.org,2002:python/object/apply:os.system'"),
        ("nodes:\n  - {<<: 3, id: 0}\n", f"line 2: nodes[0]: {NOT_YAML} expected a mapping or "
         "list of mappings for merging, but found scalar"),
    ],
)  # fmt: skip
def test_every_mistake_is_one_line_naming_file_line_key_and_expectation(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_inventory(path)
    assert str(raised.value) == f"inventory {path}, {problem}"


def test_a_password_in_an_agent_url_is_never_echoed(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("nodes:\n  - {id: 0, name: a, agent: 'https://u:s3cret@a:1', restart: x}\n")
    with pytest.raises(ConfigError) as raised:
        load_inventory(path)
    assert str(raised.value) == (
        f"inventory {path}, line 2: nodes[0].agent: expected the agent's URL, "
        "https://host[:port][/path], got a URL with credentials in it (the agent authenticates "
        "by certificate)"
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "No such file or directory"),
        (b"", "empty; expected a mapping with a 'nodes' list"),
        (b"nodes: [\xff]\n", "not UTF-8 text (byte 8)"),
    ],
)
def test_a_file_that_cannot_be_read_says_why(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "inv.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        load_inventory(path)
    assert str(raised.value) == f"inventory {path}: {problem}"
