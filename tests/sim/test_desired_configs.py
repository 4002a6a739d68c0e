"""Each inventory node's desired configuration (`config:` a file, `config-command:` a command
printing it; `rollguard.roller.roll.configs.desired`): read as Kafka reads it, and every failure a
ConfigError naming the node and the file or its config-command, never the configuration."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rollguard.roller.inventory import InventoryNode, load_inventory
from rollguard.roller.model import Node, Role
from rollguard.roller.roll.configs.desired import has_desired, read_all_desired, read_desired
from rollguard.shared.errors import ConfigError

NODE = Node(0, "kafka-0", frozenset({Role.BROKER}), "https://kafka-0:8443")
SECRET = "s3cret-in-the-config"


def inventory(tmp_path: Path, extra: str) -> list[InventoryNode]:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "nodes:\n"
        "  - id: 0\n    name: kafka-0\n    agent: https://kafka-0:8443\n    restart: 'true'\n"
        + "".join(f"    {line}\n" for line in extra.splitlines())
    )
    return load_inventory(path)


def entry(**kwargs: object) -> InventoryNode:
    return InventoryNode(NODE, "true", **kwargs)  # type: ignore[arg-type]


def test_a_config_path_is_relative_to_the_inventorys_folder(tmp_path: Path) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "kafka-0.properties").write_text(
        "log.dirs = /var/lib/kafka\nsasl.jaas.config=a \\\n   b\n"
    )
    nodes = inventory(tmp_path, "config: configs/kafka-0.properties")
    assert nodes[0].config == tmp_path / "configs" / "kafka-0.properties"
    assert has_desired(nodes)
    found = asyncio.run(read_desired(nodes[0]))
    assert found is not None
    assert {p.key: p.value for p in found} == {
        "log.dirs": "/var/lib/kafka",
        "sasl.jaas.config": "a b",  # continued as Java continues it
    }


def test_without_config_there_is_nothing_desired(tmp_path: Path) -> None:
    nodes = inventory(tmp_path, "")
    assert not has_desired(nodes)
    assert asyncio.run(read_all_desired(nodes)) == {}


def test_config_and_config_command_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line \d+: nodes\[0\]: give either config"):
        inventory(tmp_path, "config: a.properties\nconfig-command: cat a.properties")


def test_a_config_command_prints_it_with_the_nodes_variables(tmp_path: Path) -> None:
    command = 'printf "node.id=%s\\nbroker.rack=%s\\n" "$ROLLGUARD_NODE_ID" "$ROLLGUARD_NODE_NAME"'
    found = asyncio.run(read_desired(entry(config_command=command)))
    assert found is not None
    assert {p.key: p.value for p in found} == {"node.id": "0", "broker.rack": "kafka-0"}


def test_an_unreadable_file_names_the_node_and_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "gone.properties"
    with pytest.raises(ConfigError, match=f"kafka-0: config {missing}: No such file"):
        asyncio.run(read_desired(entry(config=missing)))


def test_a_malformed_line_is_named_by_its_number_and_never_echoes_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.properties"
    path.write_text(f"ssl.key.password={SECRET}\n\nbad=\\u12x4\n")
    with pytest.raises(ConfigError) as raised:
        asyncio.run(read_desired(entry(config=path)))
    assert str(raised.value).startswith(f"kafka-0: config {path}:3: malformed \\uxxxx escape")
    assert SECRET not in str(raised.value)
    # the same from a command's output: its line number
    command = f"printf 'ssl.key.password={SECRET}\\nbad=\\\\u12x4\\n'"
    with pytest.raises(ConfigError, match=r"kafka-0: config-command output, line 2: malformed"):
        asyncio.run(read_desired(entry(config_command=command)))


def test_a_failing_command_says_its_stderr_never_its_output_nor_its_line() -> None:
    command = f"echo ssl.key.password={SECRET}; echo 'no route to host' >&2; exit 3"
    with pytest.raises(ConfigError) as raised:
        asyncio.run(read_desired(entry(config_command=command)))
    assert str(raised.value) == "kafka-0: config-command exited 3: no route to host"


def test_a_command_past_its_time_is_killed_with_its_children() -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"did not finish within 0\.5s; it was killed"):
        asyncio.run(read_desired(entry(config_command="sleep 30 & sleep 30"), timeout=0.5))
    assert time.monotonic() - started < 5
