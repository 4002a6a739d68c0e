"""What a roll does with each node's configuration change (`roll.configs.plan`): live where
Kafka says it can take it, a restart only for the rest, a cluster-wide key once at the default
when every broker changes it alike, and the shadows a restart cannot cure refused. The changes
are built as `configs.diff.changes` builds them (its own tests run it over a real broker's
recorded answers)."""

from __future__ import annotations

import pytest

from rollguard.roller.roll.configs.plan import plan_configs, refusals
from rollguard.roller.roll.configs.values import (
    ConfigChange,
    DesiredValue,
    How,
    Shadow,
    Source,
)

BROKERS = ["kafka-0", "kafka-1", "kafka-2"]


def change(key: str, how: How, to: str | None = "x", **kw: object) -> ConfigChange:
    return ConfigChange(key, "old", to, how, "why", **kw)  # type: ignore[arg-type]


def desired(**values: str) -> dict[str, DesiredValue]:
    return {k.replace("__", "."): DesiredValue(k.replace("__", "."), v) for k, v in values.items()}


def everywhere(value: str = "3") -> dict[str, dict[str, DesiredValue]]:
    return {b: desired(log__cleaner__threads=value) for b in BROKERS}


def test_a_cluster_wide_key_changed_alike_everywhere_is_set_once_at_the_default() -> None:
    changes = {b: (change("log.cleaner.threads", How.LIVE_CLUSTER, "3"),) for b in BROKERS}
    plan = plan_configs(changes, everywhere(), BROKERS)
    assert plan.cluster == {"log.cleaner.threads": "3"}
    for b in BROKERS:
        node = plan.nodes[b]
        assert (node.live, node.restart, node.cluster) == ({}, (), ("log.cleaner.threads",))
        assert node.why() == "configuration: log.cleaner.threads applied live"


@pytest.mark.parametrize(
    ("values", "brokers", "why"),
    [
        ({"kafka-0": "3", "kafka-1": "3", "kafka-2": "4"}, BROKERS, "values differ"),
        ({"kafka-0": "3", "kafka-1": "3"}, BROKERS, "one broker does not change it"),
        ({b: "3" for b in BROKERS}, [*BROKERS, "kafka-3"], "a broker out of the comparison"),
    ],
)
def test_a_cluster_wide_key_not_changed_alike_everywhere_is_set_per_broker(
    values: dict[str, str], brokers: list[str], why: str
) -> None:
    changes = {b: (change("log.cleaner.threads", How.LIVE_CLUSTER, v),) for b, v in values.items()}
    wanted = {b: desired(log__cleaner__threads=v) for b, v in values.items()}
    plan = plan_configs(changes, wanted, brokers)
    assert plan.cluster == {}, why
    for b, v in values.items():
        assert plan.nodes[b].live == {"log.cleaner.threads": v}, why


def test_a_broker_with_a_value_of_its_own_keeps_the_key_off_the_default() -> None:
    own = Shadow("log.cleaner.threads", Source.DYNAMIC_BROKER, "1")
    changes = {b: (change("log.cleaner.threads", How.LIVE_CLUSTER, "3"),) for b in BROKERS}
    changes["kafka-1"] = (change("log.cleaner.threads", How.LIVE_CLUSTER, "3", shadowed_by=own),)
    plan = plan_configs(changes, everywhere(), BROKERS)
    assert plan.cluster == {}  # the default would not reach kafka-1: its own value outranks it
    assert plan.nodes["kafka-1"].live == {"log.cleaner.threads": "3"}
    assert refusals(changes, {b: i for i, b in enumerate(BROKERS)}) == []  # set over it, live


def test_a_node_restarts_only_for_a_key_read_at_start_and_gets_its_live_keys_too() -> None:
    changes = {
        "kafka-0": (),
        "kafka-1": (change("num.io.threads", How.LIVE_BROKER, "8"),),
        "kafka-2": (
            change("queued.max.requests", How.RESTART, "600"),
            change("num.io.threads", How.LIVE_BROKER, "8"),
            change("my.plugin.key", How.RESTART, None, listed=False),
        ),
    }
    wanted = {
        "kafka-0": desired(),
        "kafka-1": desired(num__io__threads="8"),
        "kafka-2": desired(queued__max__requests="600", num__io__threads="8", my__plugin__key="1"),
    }
    plan = plan_configs(changes, wanted, BROKERS)
    zero, one, two = (plan.nodes[b] for b in BROKERS)
    assert not zero.changes and zero.why() == "configuration unchanged"
    assert one.live == {"num.io.threads": "8"} and one.restart == ()
    assert two.restart == ("queued.max.requests", "my.plugin.key")
    assert two.live == {"num.io.threads": "8"}  # applied live before its restart
    assert two.why() == "configuration: my.plugin.key, queued.max.requests need a restart"


def test_a_key_dropped_from_the_file_is_set_live_to_kafkas_default_or_restarts() -> None:
    changes = {
        "kafka-0": (change("num.io.threads", How.LIVE_BROKER, "8", removed=True),),
        "kafka-1": (change("some.key", How.LIVE_BROKER, None, removed=True),),
    }
    plan = plan_configs(changes, {"kafka-0": {}, "kafka-1": {}}, BROKERS)
    assert plan.nodes["kafka-0"].live == {"num.io.threads": "8"}
    assert plan.nodes["kafka-1"].restart == ("some.key",)  # no default known


def test_a_sensitive_value_goes_to_kafka_from_the_file_and_an_unknown_one_is_left() -> None:
    secret = "the-desired-secret"
    changes = {
        "kafka-0": (change("ssl.key.password", How.LIVE_BROKER, None, sensitive=True),),
        "kafka-1": (
            change("ssl.key.password", How.LIVE_BROKER, None, sensitive=True, known=False),
        ),
    }
    wanted = {b: desired(ssl__key__password=secret) for b in ("kafka-0", "kafka-1")}
    plan = plan_configs(changes, wanted, BROKERS)
    assert plan.nodes["kafka-0"].live == {"ssl.key.password": secret}
    assert plan.nodes["kafka-0"].sensitive == {"ssl.key.password"}
    assert secret not in plan.nodes["kafka-0"].why()
    assert not plan.nodes["kafka-1"].changes  # may have changed: never set again blindly


def test_a_shadow_a_restart_cannot_cure_is_refused_naming_how_to_remove_it() -> None:
    synonym = Shadow("log.retention.ms", Source.DYNAMIC_BROKER, "3600000")
    default = Shadow("log.dirs", Source.DYNAMIC_DEFAULT, "/x")
    changes = {
        "kafka-0": (change("log.retention.hours", How.LIVE_CLUSTER, "48", shadowed_by=synonym),),
        "kafka-1": (change("log.dirs", How.RESTART, "/y", shadowed_by=default),),
    }
    found = refusals(changes, {"kafka-0": 0, "kafka-1": 1})
    assert found == [
        "kafka-0: log.retention.hours is shadowed by log.retention.ms=3600000 set dynamically "
        "for this broker, which stays in force over the file across a restart; delete it "
        "(kafka-configs --alter --entity-type brokers --entity-name 0 --delete-config "
        "log.retention.ms) or change log.retention.ms in the file instead, then run the roll "
        "again",
        "kafka-1: log.dirs is shadowed by log.dirs=/x set dynamically as the cluster-wide "
        "default, which stays in force over the file across a restart; delete it "
        "(kafka-configs --alter --entity-type brokers --entity-default --delete-config "
        "log.dirs) or change log.dirs in the file instead, then run the roll again",
    ]
