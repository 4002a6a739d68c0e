"""A node's configuration change key by key (`roll.configs.diff`), over answers recorded from a
real Kafka 4.4.0 broker (tests/configs/record.py says how): DescribeConfigs of broker 0 with
synonyms, and what Kafka's validate_only said of each key at the cluster default and at the
broker. That broker's file set `num.network.threads=4`, `log.cleaner.threads=2` and a sensitive
`ssl.truststore.password`; `kafka-configs` then set `num.io.threads=6` and
`log.retention.ms=3600000` for broker 0 and `log.cleaner.threads=3` as the cluster default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollguard.peers.realkafka import NEWEST
from rollguard.roller.roll.configs.diff import changes, to_validate
from rollguard.roller.roll.configs.values import (
    ConfigChange,
    DesiredValue,
    How,
    LiveAnswer,
    RunningConfig,
    Source,
    running_from_answer,
)
from rollguard.shared.converters import HostPort

RECORDED = Path(__file__).parent.parent / "configs"
SECRET = "desired-secret-value"


def recorded() -> dict[str, RunningConfig]:
    answer = json.loads((RECORDED / f"kafka-{NEWEST}-broker-0.json").read_text())
    return running_from_answer(answer)


def answers() -> dict[str, LiveAnswer]:
    """Kafka's validation of each recorded key (the invalid value left out: its own test)."""
    said = json.loads((RECORDED / f"kafka-{NEWEST}-validate.json").read_text())
    return {
        e["key"]: LiveAnswer(e["atDefault"], e["atBroker"])
        for e in said
        if e["value"] != "not-a-number"
    }


RUNNING = recorded()
ANSWERS = answers()


def the_file() -> dict[str, str]:
    """The running file as the broker read it: every key with a file value (a sensitive one
    given some value: Kafka does not say which)."""
    found = {}
    for key, entry in RUNNING.items():
        static = entry.synonym(Source.STATIC)
        if static is not None:
            found[key] = static.value if static.value is not None else "whatever-it-was"
    return found


def desired(**changed: str | None) -> dict[str, DesiredValue]:
    """The running file with `changed` keys (dots as `__`) set, or dropped when None."""
    values = the_file()
    for name, value in changed.items():
        key = name.replace("__", ".")
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return {k: DesiredValue(k, v) for k, v in values.items()}


def diff(**changed: str | None) -> dict[str, ConfigChange]:
    wanted = desired(**changed)
    asked = to_validate(wanted, RUNNING)
    # only what the broker was asked about gets an answer, as KafkaConfigs does
    said = {k: ANSWERS[k] for k in asked if k in ANSWERS}
    return {c.key: c for c in changes(wanted, RUNNING, said)}


# What the recorded file already differs in: the cluster default shadows the file's
# log.cleaner.threads, and the sensitive value cannot be compared.
ALWAYS = {"log.cleaner.threads", "ssl.truststore.password"}


def test_the_recorded_answer_has_what_the_tests_rely_on() -> None:
    assert RUNNING["log.dirs"].read_only and RUNNING["log.dirs"].source is Source.STATIC
    assert RUNNING["node.id"].read_only and RUNNING["process.roles"].read_only
    assert not RUNNING["num.io.threads"].read_only
    assert RUNNING["num.io.threads"].source is Source.DYNAMIC_BROKER
    assert RUNNING["log.cleaner.threads"].source is Source.DYNAMIC_DEFAULT
    assert RUNNING["log.retention.hours"].read_only  # its synonym log.retention.ms is not
    secret = RUNNING["ssl.truststore.password"]
    assert secret.sensitive and secret.value is None and secret.type == "PASSWORD"
    assert secret.in_file


def test_the_running_file_as_desired_shows_only_the_shadowed_and_the_sensitive() -> None:
    found = diff()
    assert set(found) == ALWAYS
    cleaner = found["log.cleaner.threads"]
    assert (cleaner.from_, cleaner.to) == ("3", "2")
    assert cleaner.shadowed_by is not None
    assert cleaner.shadowed_by.source is Source.DYNAMIC_DEFAULT
    # Taken live: the roll sets the file's value over it, so it shadows nothing afterwards.
    assert cleaner.set_over == cleaner.shadowed_by and cleaner.shadowing is None
    assert "cluster-wide default is set over live, to the file's value" in cleaner.why
    assert "stays in force" not in cleaner.why
    secret = found["ssl.truststore.password"]
    assert secret.sensitive and not secret.known
    assert secret.values() == "(sensitive: not shown), may have changed"


@pytest.mark.parametrize(
    ("key", "value", "how", "said"),
    [
        # read-only by the broker's own flag: a restart
        ("log.dirs", "/var/lib/kafka/elsewhere", How.RESTART, "read-only"),
        ("node.id", "7", How.RESTART, "read-only"),
        ("process.roles", "broker", How.RESTART, "read-only"),
        ("advertised.listeners", "PLAINTEXT://127.0.0.1:1", How.RESTART, "read-only"),
        # dynamic, and Kafka takes it as the cluster default: cluster-wide
        ("num.network.threads", "5", How.LIVE_CLUSTER, "cluster-wide"),
        ("log.segment.bytes", "2097152", How.LIVE_CLUSTER, "cluster-wide"),
        ("message.max.bytes", "2000000", How.LIVE_CLUSTER, "cluster-wide"),
        ("log.retention.ms", "1000", How.LIVE_CLUSTER, "cluster-wide"),
        # dynamic, refused as a default: per broker
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2",
            How.LIVE_BROKER,
            "broker id must be specified",
        ),
    ],
)
def test_how_each_key_can_change_is_the_brokers_own_answer(
    key: str, value: str, how: How, said: str
) -> None:
    found = diff(**{key.replace(".", "__"): value})
    assert set(found) == ALWAYS | {key}
    change = found[key]
    assert change.how is how and said in change.why, change
    assert change.to == value and change.from_ == RUNNING[key].value


def test_an_unlisted_key_restarts_and_is_not_shown() -> None:
    found = diff(listener__name__plaintext__ssl__keystore__password=SECRET)
    change = found["listener.name.plaintext.ssl.keystore.password"]
    assert change.how is How.RESTART and not change.listed
    assert SECRET not in change.text() and SECRET not in json.dumps(change.to_json())


def test_a_per_broker_dynamic_value_of_a_live_key_is_set_over_and_named() -> None:
    found = diff(num__io__threads="8")  # the file says 8; kafka-configs set 6 for broker 0
    change = found["num.io.threads"]
    assert (change.from_, change.to, change.source) == ("6", "8", Source.DYNAMIC_BROKER)
    assert change.shadowed_by is not None
    assert (change.shadowed_by.key, change.shadowed_by.value) == ("num.io.threads", "6")
    assert change.shadowed_by.source is Source.DYNAMIC_BROKER
    # The roll sets num.io.threads live at the broker: the file's value, over its own value,
    # and nothing stays in force over the file after it: no advice to delete it.
    assert "num.io.threads=6 set dynamically for this broker is set over live" in change.why
    assert "stays in force" not in change.why and "delete it" not in change.why
    carried = change.to_json()
    assert carried["shadowedBy"] is None
    assert carried["setOver"] == {
        "key": "num.io.threads",
        "source": "DYNAMIC_BROKER_CONFIG",
        "value": "6",
    }


def test_a_synonyms_dynamic_value_shadows_a_read_only_key() -> None:
    # log.retention.hours is read-only; the per-broker log.retention.ms outranks it
    change = diff(log__retention__hours="24")["log.retention.hours"]
    assert change.how is How.RESTART and "read-only" in change.why
    assert change.shadowed_by is not None
    assert change.shadowed_by.key == "log.retention.ms"
    assert change.shadowed_by.value == "3600000"


def test_the_desired_value_equal_to_the_shadow_changes_nothing() -> None:
    assert set(diff(num__io__threads="6", log__cleaner__threads="3")) == {"ssl.truststore.password"}


def test_values_are_compared_as_kafka_reads_them() -> None:
    listeners = RUNNING["listeners"].value
    assert listeners is not None
    spaced = " " + listeners.replace(",", " , ") + " "
    assert set(diff(listeners=spaced, num__network__threads="04")) == ALWAYS


def test_a_key_dropped_from_the_file_goes_back_to_kafkas_default() -> None:
    change = diff(num__network__threads=None)["num.network.threads"]
    assert (change.from_, change.to, change.removed) == ("4", "3", True)
    assert change.how is How.LIVE_CLUSTER
    assert "(Kafka's default: dropped from the file)" in change.values()


def test_broker_id_left_out_is_kafkas_copy_of_node_id_not_a_change() -> None:
    # A KRaft broker shows broker.id from its file (STATIC_BROKER_CONFIG) though the file only
    # has node.id: Kafka copies it at start
    assert RUNNING["broker.id"].synonym(Source.STATIC) is not None
    assert set(diff(broker__id=None)) == ALWAYS
    change = diff(broker__id=None, node__id="5")["broker.id"]
    assert (change.from_, change.to, change.removed) == ("0", "5", False)


def test_sensitive_values_are_never_shown_and_compared_as_unknown() -> None:
    found = diff(ssl__truststore__password=SECRET, ssl__keystore__password=SECRET)
    for key in ("ssl.truststore.password", "ssl.keystore.password"):
        change = found[key]
        assert change.sensitive and change.from_ is None and change.to is None
        assert SECRET not in change.text() and SECRET not in json.dumps(change.to_json())
        # refused live unprefixed: Kafka's own words
        assert change.how is How.RESTART and "per-listener" in change.why
    assert not found["ssl.truststore.password"].known  # set before and after: unknown
    assert found["ssl.keystore.password"].known  # set where none was: a change for sure
    dropped = diff(ssl__truststore__password=None)["ssl.truststore.password"]
    assert dropped.known and dropped.removed and dropped.sensitive


def test_only_changing_dynamic_keys_are_put_to_kafkas_validation() -> None:
    wanted = desired(log__dirs="/x", num__io__threads="8", num__network__threads=None)
    asked = to_validate(wanted, RUNNING)
    assert asked == {
        "num.io.threads": "8",
        "num.network.threads": None,  # a delete
        "log.cleaner.threads": "2",
        "ssl.truststore.password": "whatever-it-was",
    }


def test_a_value_kafka_refuses_is_a_restart_with_kafkas_words() -> None:
    said = json.loads((RECORDED / f"kafka-{NEWEST}-validate.json").read_text())
    bad = next(e for e in said if e["value"] == "not-a-number")
    wanted = desired(num__io__threads="not-a-number")
    found = changes(
        wanted, RUNNING, {"num.io.threads": LiveAnswer(bad["atDefault"], bad["atBroker"])}
    )
    change = next(c for c in found if c.key == "num.io.threads")
    assert change.how is How.RESTART and "Not a number of type INT" in change.why


def test_a_key_not_asked_of_kafka_is_a_restart() -> None:
    change = next(
        c
        for c in changes(desired(num__network__threads="5"), RUNNING)
        if c.key == "num.network.threads"
    )
    assert change.how is How.RESTART and "not asked" in change.why


def test_the_plan_shows_each_change_and_its_json_carries_the_same() -> None:
    from rollguard.roller.model import Node, Role
    from rollguard.roller.roll.planning import NodeConfig, PlanEntry, plan_lines

    node = Node(0, "kafka-0", frozenset({Role.BROKER}), "https://kafka-0:8443")
    plain = PlanEntry(node, "restart", "", why="inventory (no revision to compare)")
    assert "config" not in plain.to_json()  # no desired configuration: the output as before
    assert not any("Configuration" in line for line in plan_lines([plain]))
    found = diff(log__dirs="/x", num__io__threads="8", ssl__truststore__password=SECRET).values()
    entry = PlanEntry(
        node,
        "restart",
        "",
        why="inventory (no revision to compare)",
        configs=NodeConfig(tuple(found)),
    )
    lines = plan_lines([entry])
    at = lines.index("Configuration: the desired file against what Kafka says each node runs")
    assert lines[at + 1] == "kafka-0: 4 keys change: 2 restart, 2 live"  # both set over
    assert lines[at + 2].startswith("  log.cleaner.threads: 3 -> 2; live-cluster: cluster-wide")
    assert (
        lines[at + 3].startswith("  log.dirs: /tmp/")
        and "-> /x; restart: read-only" in lines[at + 3]
    )
    assert lines[at + 4].startswith("  num.io.threads: 6 -> 8; live-cluster: ")
    assert "num.io.threads=6 set dynamically for this broker is set over live" in lines[at + 4]
    assert lines[at + 5].startswith(
        "  ssl.truststore.password: (sensitive: not shown), may have changed; restart: "
    )
    assert SECRET not in "\n".join(lines)
    carried = entry.to_json()["config"]
    assert [c["key"] for c in carried["changes"]] == [c.key for c in found]
    assert carried["note"] is None and SECRET not in json.dumps(carried)
    note = PlanEntry(node, "restart", "", configs=NodeConfig(note="not compared: down"))
    assert "kafka-0: not compared: down" in plan_lines([note])


class FakeReader:
    """`KafkaConfigs` answering from the recorded broker, every broker alike; `down`: the
    brokers whose DescribeConfigs fails."""

    def __init__(self, down: frozenset[int] = frozenset()) -> None:
        self.down = down
        self.asked: list[tuple[int, dict[str, str | None]]] = []

    async def running(self, broker: int) -> dict[str, object]:
        from rollguard.roller.kafka_admin import AdminApiError

        if broker in self.down:
            raise AdminApiError(f"DescribeConfigs of broker {broker} at b:9092: timed out")
        return json.loads((RECORDED / f"kafka-{NEWEST}-broker-0.json").read_text())

    async def live_answers(
        self, broker: int, asked: dict[str, str | None]
    ) -> dict[str, tuple[str | None, str | None]]:
        self.asked.append((broker, dict(asked)))
        return {k: (ANSWERS[k].at_default, ANSWERS[k].at_broker) for k in asked if k in ANSWERS}


def test_each_nodes_configuration_is_compared_or_says_why_not() -> None:
    import asyncio

    from rollguard.roller.model import Node, Role
    from rollguard.roller.roll.configs.live import node_configs
    from rollguard.shared.javaprops import Property

    def node(i: int, *roles: Role) -> Node:
        return Node(i, f"kafka-{i}", frozenset(roles), f"https://kafka-{i}:8443")

    nodes = [
        node(0, Role.BROKER, Role.CONTROLLER),
        node(1, Role.BROKER),
        node(2, Role.CONTROLLER),
        node(3, Role.BROKER),
    ]
    file = [Property(k, v.value, 0) for k, v in desired(num__network__threads="5").items()]
    reader = FakeReader(down=frozenset({1}))
    found = asyncio.run(node_configs(nodes, {n.name: file for n in nodes[:3]}, reader))  # type: ignore[arg-type]
    assert set(found) == {"kafka-0", "kafka-1", "kafka-2"}  # kafka-3 has no desired file
    assert {c.key: c.how for c in found["kafka-0"].changes}["num.network.threads"] is (
        How.LIVE_CLUSTER
    )
    assert found["kafka-1"].note.startswith("not compared: DescribeConfigs of broker 1")
    assert found["kafka-2"].note.startswith("a controller-only node: not compared")
    # only the changing dynamic keys of the one broker compared went to Kafka's validation
    assert reader.asked == [
        (
            0,
            {
                "log.cleaner.threads": "2",
                "num.network.threads": "5",
                "ssl.truststore.password": "whatever-it-was",
            },
        )
    ]


def test_keys_set_at_the_pods_start_are_listed_as_not_compared_never_as_changes() -> None:
    """On Kubernetes a start script fills some keys (node.id from the ordinal): the file's
    placeholder, or a key it leaves out, is neither a change nor a key dropped to its default."""
    import asyncio

    from rollguard.roller.model import Node, Role
    from rollguard.roller.roll.configs.live import node_configs
    from rollguard.shared.javaprops import Property

    kafka_0 = Node(0, "kafka-0", frozenset({Role.BROKER}), "https://kafka-0:8443")
    file = desired(node__id="${NODE_ID}", listeners=None, num__network__threads="5")
    properties = [Property(k, v.value, 0) for k, v in file.items()]
    compared = asyncio.run(node_configs([kafka_0], {"kafka-0": properties}, FakeReader()))  # type: ignore[arg-type]
    assert {"node.id", "listeners"} <= {c.key for c in compared["kafka-0"].changes}
    unchecked = {"kafka-0": ["node.id", "listeners"]}
    reader = FakeReader()
    found = asyncio.run(
        node_configs([kafka_0], {"kafka-0": properties}, reader, unchecked=unchecked)  # type: ignore[arg-type]
    )["kafka-0"]
    # node.id's derived broker.id goes with it
    assert found.unchecked == ("broker.id", "listeners", "node.id")
    before = {c.key for c in compared["kafka-0"].changes}
    assert {c.key for c in found.changes} == before - {"node.id", "broker.id", "listeners"}
    assert "num.network.threads" in before
    assert "node.id" not in reader.asked[0][1] and "listeners" not in reader.asked[0][1]
    assert found.summary() == (
        "3 keys change: 1 restart, 2 live; not compared (set at the pod's start): broker.id, "
        "listeners, node.id"
    )
    assert found.to_json()["notCompared"] == ["broker.id", "listeners", "node.id"]
    assert "notCompared" not in compared["kafka-0"].to_json()  # an inventory's: as before


def test_a_controller_only_node_is_compared_through_its_own_reader() -> None:
    import asyncio

    from rollguard.roller.model import Node, Role
    from rollguard.roller.roll.configs.live import node_configs
    from rollguard.shared.javaprops import Property

    nodes = [Node(5, "kafka-5", frozenset({Role.CONTROLLER}), None)]
    file = [Property(k, v.value, 0) for k, v in desired(num__network__threads="5").items()]
    brokers, own = FakeReader(), FakeReader()
    found = asyncio.run(
        node_configs(nodes, {"kafka-5": file}, brokers, controllers={"kafka-5": own})  # type: ignore[arg-type, dict-item]
    )
    assert brokers.asked == [] and [b for b, _ in own.asked] == [5]  # its own listener only
    assert "num.network.threads" in {c.key for c in found["kafka-5"].changes}
    # A controller whose listener cannot be told is not compared, saying why.
    why = "its desired file has no controller.listener.names"
    found = asyncio.run(
        node_configs(nodes, {"kafka-5": file}, brokers, controllers={"kafka-5": why})
    )  # type: ignore[arg-type]
    assert found["kafka-5"].note == f"a controller-only node: not compared ({why})"


@pytest.mark.parametrize(
    ("lines", "agent", "expected"),
    [
        (["controller.listener.names=CONTROLLER", "listeners=CONTROLLER://10.0.0.5:9093"],
         "kafka-5.example", (HostPort("10.0.0.5", 9093), "PLAINTEXT")),
        # A wildcard host: the agent's; the map names the protocol.
        (["controller.listener.names=CTL,OLD", "listeners=CTL://0.0.0.0:9094,OLD://:9095",
          "listener.security.protocol.map=CTL:SSL,OLD:PLAINTEXT"],
         "kafka-5.example", (HostPort("kafka-5.example", 9094), "SSL")),
        (["controller.listener.names=SASL_SSL", "listeners=SASL_SSL://:9093"], "h",
         (HostPort("h", 9093), "SASL_SSL")),  # named after its protocol
        (["listeners=CONTROLLER://:9093"], "h",
         "its desired file has no controller.listener.names"),
        (["controller.listener.names=CONTROLLER", "listeners=PLAINTEXT://:9092"], "h",
         "its desired file's listeners have no CONTROLLER listener"),
        (["controller.listener.names=CONTROLLER", "listeners=CONTROLLER://:9093"], None,
         "listener CONTROLLER listens on every address, and the node has no agent host"),
    ],
)  # fmt: skip
def test_a_controllers_listener_is_read_from_its_desired_file(
    lines: list[str], agent: str | None, expected: object
) -> None:
    from rollguard.roller.roll.configs.controller import controller_listener
    from rollguard.shared.javaprops import parse_properties

    assert controller_listener(parse_properties("\n".join(lines)), agent) == expected


def test_a_controller_that_refuses_the_connection_is_an_admin_api_error_naming_it() -> None:
    import socket

    from rollguard.roller.kafka_admin import AdminApiError
    from rollguard.roller.roll.configs.controller import ControllerConfigs

    with socket.socket() as closed:  # a port nothing listens on: bound, never listening
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        configs = ControllerConfigs(HostPort("127.0.0.1", port), "PLAINTEXT", {}, timeout=2)
        with pytest.raises(AdminApiError) as got:
            configs.describe_raw(6)
    said = str(got.value)
    assert said.startswith(
        f"DescribeConfigs of controller 6 at the controller listener 127.0.0.1:{port}"
    )
    assert "PLAINTEXT" in said and "refused" in said.lower()
