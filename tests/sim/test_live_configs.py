"""A roll with desired configurations on the simulated cluster and the virtual clock: the live
steps (`roll/configs/live.py`, `Restarts.configure`) through the production roller, with a
Kafka Admin peer of the test's own that keeps each broker's dynamic values, answers
DescribeConfigs from them, and can refuse a change or not take it (a broker that does not
replay the record). What a real Kafka does with the same roll is tests/real/
test_real_kafka_configs.py; this is what a real one cannot be made to do on demand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rollguard.peers.harness import Done
from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import (
    SimCluster,
    SimNode,
    SimPartition,
    SimPlatform,
    VirtualClock,
    spread_rejoins,
)
from rollguard.roller.model import Node, PlatformView, Role
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.configs.plan import ConfigPlan, NodePlan

COMBINED = frozenset({Role.BROKER, Role.CONTROLLER})
SECRET = "the-new-secret"


class Admin:
    """Each broker's keys in force: the file's, the cluster default's, its own dynamic ones."""

    def __init__(self, brokers: int) -> None:
        self.file = {b: {"num.io.threads": "8", "log.cleaner.threads": "1"} for b in range(brokers)}
        self.default: dict[str, str] = {}
        self.own: dict[int, dict[str, str]] = {b: {} for b in range(brokers)}
        self.altered: list[tuple[int | None, tuple[str, ...]]] = []
        self.refuse: dict[int | None, str] = {}  # resource -> Kafka's refusal
        self.deaf: set[int] = set()  # brokers that never take a change

    async def alter(self, broker: int | None, configs: Mapping[str, str | None]) -> str | None:
        if broker in self.refuse:
            return self.refuse[broker]
        self.altered.append((broker, tuple(sorted(configs))))
        target = self.default if broker is None else self.own[broker]
        target.update({k: v for k, v in configs.items() if v is not None})
        return None

    async def running(self, broker: int) -> dict[str, dict[str, Any]]:
        found = {}
        for key in [*self.file[broker], "ssl.key.password"]:
            value, source = self.file[broker].get(key), "STATIC_BROKER_CONFIG"
            if broker not in self.deaf:
                if key in self.default:
                    value, source = self.default[key], "DYNAMIC_DEFAULT_BROKER_CONFIG"
                if key in self.own[broker]:
                    value, source = self.own[broker][key], "DYNAMIC_BROKER_CONFIG"
            sensitive = key == "ssl.key.password"
            found[key] = {
                "value": None if sensitive else value,
                "config_source": source,
                "read_only": False,
                "is_sensitive": sensitive,
                "synonyms": [],
                "config_type": "PASSWORD" if sensitive else "INT",
            }
        return found


def cluster() -> SimCluster:
    nodes = [
        SimNode(Node(i, f"kafka-{i}", COMBINED, f"https://kafka-{i}:8443"), restart_seconds=30)
        for i in range(3)
    ]
    parts = [SimPartition("orders", i, (i % 3, (i + 1) % 3, (i + 2) % 3), 2) for i in range(6)]
    sim = SimCluster(nodes, parts, VirtualClock())
    spread_rejoins(sim)
    return sim


def plan() -> ConfigPlan:
    """log.cleaner.threads to 2 everywhere (at the default), num.io.threads to 16 and a new
    password on kafka-1 (its own), a read-only key on kafka-2 (a restart)."""
    nodes = {
        "kafka-0": NodePlan(cluster=("log.cleaner.threads",)),
        "kafka-1": NodePlan(
            {"num.io.threads": "16", "ssl.key.password": SECRET},
            sensitive=frozenset({"ssl.key.password"}),
            cluster=("log.cleaner.threads",),
        ),
        "kafka-2": NodePlan(restart=("log.dirs",), cluster=("log.cleaner.threads",)),
    }
    return ConfigPlan(nodes, {"log.cleaner.threads": "2"})


class Pods(SimPlatform):
    """As Kubernetes sees the nodes: revisions; kafka-0's pod is out of date, the others are
    up to date (their ConfigMap changed in place, no new revision)."""

    revisions = True

    async def observe(self, node: Node) -> PlatformView:
        view = await super().observe(node)
        return replace(
            view, up_to_date=node.name != "kafka-0" or self.cluster.by_id[0].restarts > 0
        )


def roll(
    sim: SimCluster,
    folder: Path,
    admin: Admin,
    *,
    resume: bool = False,
    pods: bool = False,
    config_plan: ConfigPlan | None = None,
) -> Done:
    """The roll, its live steps on `admin` (`config_plan`, else `plan()`); `pods`: as
    Kubernetes sees the nodes (`Pods`)."""
    steps = config_plan or plan()
    configs = LiveConfigs(admin, steps, clock=sim.clock, sleep=sim.clock.sleep)  # type: ignore[arg-type]
    target = SimRoll(sim, folder, platform=Pods if pods else None, configs=configs)
    return target.roll(resume=resume)


def phases(done: Done) -> dict[str, str]:
    """Each node's phase on record, and how it was rolled (`restart` or `live`) once it was."""
    assert done.journal is not None
    return {
        name: node["phase"] + (f" ({node['how']})" if node.get("how") else "")
        for name, node in done.journal["nodes"].items()
    }


def test_live_keys_are_set_one_broker_at_a_time_and_only_a_read_only_change_restarts(
    tmp_path: Path,
) -> None:
    sim, admin = cluster(), Admin(3)
    done = roll(sim, tmp_path, admin)
    assert done.stderr == ""
    assert [sim.by_id[i].restarts for i in range(3)] == [0, 0, 1]
    assert phases(done) == {
        "kafka-0": "done (live)",
        "kafka-1": "done (live)",
        "kafka-2": "done (restart)",
    }
    # The cluster-wide key once, at the default, at the first step (kafka-1's); then its own.
    assert admin.altered == [
        (None, ("log.cleaner.threads",)),
        (1, ("num.io.threads", "ssl.key.password")),
    ]
    said = done.events
    steps = [
        (e["node"], e["action"], e["reason"])
        for e in said
        if e["action"] in ("configure", "configured", "restart", "ready")
    ]
    # In the roll's order (the active controller, kafka-0, last), one node at a time.
    live = "configuration applied live: "
    assert steps == [
        ("kafka-1", "configure", "log.cleaner.threads, num.io.threads, ssl.key.password"),
        ("kafka-1", "configured", f"{live}log.cleaner.threads, num.io.threads, "
                                  "ssl.key.password; ready and in sync"),
        ("kafka-2", "restart", "restart"),
        ("kafka-2", "ready", "restarted, ready and in sync"),
        ("kafka-0", "configure", "log.cleaner.threads"),
        ("kafka-0", "configured", f"{live}log.cleaner.threads; ready and in sync"),
    ]  # fmt: skip
    first = next(e for e in said if e["action"] == "configure")
    assert (first["keys"], first["cluster"]) == (
        ["num.io.threads", "ssl.key.password"],
        ["log.cleaner.threads"],
    )
    assert all(SECRET not in p.read_text() for p in tmp_path.iterdir())


def test_a_change_kafka_refuses_fails_the_roll_saying_what_it_left_and_resumes(
    tmp_path: Path,
) -> None:
    sim, admin = cluster(), Admin(3)
    admin.refuse[1] = "Invalid value 16 for configuration num.io.threads"
    done = roll(sim, tmp_path, admin)
    assert done.stderr == (
        "kafka-1: Kafka refused the live change of num.io.threads, ssl.key.password at broker "
        "1: Invalid value 16 for configuration num.io.threads; nothing of it was changed there; "
        "log.cleaner.threads was set at the cluster default just before, and stays"
    )
    assert admin.default == {"log.cleaner.threads": "2"} and admin.own[1] == {}
    assert [sim.by_id[i].restarts for i in range(3)] == [0, 0, 0]
    assert phases(done) == {
        "kafka-0": "pending",
        "kafka-1": "failed (live)",  # its live step on record, and its failure
        "kafka-2": "pending",
    }
    # Resumed once Kafka takes it: kafka-1 is taken again, then kafka-2 restarts and kafka-0 is
    # read back. (The plan here is the test's, the same again: the cluster's key is set again
    # at the first step; `rollguard roll --resume` compares anew and finds it in force.)
    del admin.refuse[1]
    admin.altered.clear()
    resumed = roll(sim, tmp_path, admin, resume=True)
    assert resumed.stderr == ""
    assert admin.altered == [
        (None, ("log.cleaner.threads",)),
        (1, ("num.io.threads", "ssl.key.password")),
    ]
    assert phases(resumed) == {
        "kafka-0": "done (live)",
        "kafka-1": "done (live)",
        "kafka-2": "done (restart)",
    }
    assert [sim.by_id[i].restarts for i in range(3)] == [0, 0, 1]


def test_a_change_kafka_does_not_take_fails_once_the_read_back_gives_up(tmp_path: Path) -> None:
    """A sensitive key's read-back is judged by its source, never by its value."""
    sim, admin = cluster(), Admin(3)
    admin.deaf.add(1)
    began = sim.clock()
    done = roll(sim, tmp_path, admin)
    assert done.stderr == (
        "kafka-1: Kafka did not take the live change of log.cleaner.threads, num.io.threads, "
        "ssl.key.password within 60s (log.cleaner.threads: it runs 1 (from the broker's file); "
        "num.io.threads: it runs 8 (from the broker's file); ssl.key.password: it runs "
        "(sensitive, from the broker's file))"
    )
    assert sim.clock() - began >= 60
    assert [sim.by_id[i].restarts for i in range(3)] == [0, 0, 0]
    assert phases(done) == {
        "kafka-0": "pending",
        "kafka-1": "failed (live)",  # its live step on record, and its failure
        "kafka-2": "pending",
    }


def test_on_kubernetes_an_up_to_date_pod_is_taken_for_its_configuration_alone(
    tmp_path: Path,
) -> None:
    """kafka-0's pod is out of date: restarted as ever, its live key set first; kafka-1's is up
    to date and its ConfigMap changed a live key: configured, not restarted; kafka-2's is up to
    date and its ConfigMap says what it runs: left out."""
    sim, admin = cluster(), Admin(3)
    nodes = {
        "kafka-0": NodePlan({"num.io.threads": "16"}),
        "kafka-1": NodePlan({"num.io.threads": "16"}),
        "kafka-2": NodePlan(),
    }
    done = roll(sim, tmp_path, admin, pods=True, config_plan=ConfigPlan(nodes))
    assert done.stderr == ""
    assert [sim.by_id[i].restarts for i in range(3)] == [1, 0, 0]
    assert phases(done) == {
        "kafka-0": "done (restart)",
        "kafka-1": "done (live)",
        "kafka-2": "left-out",
    }
    said = {(e["node"], e["action"]): e["reason"] for e in done.events}
    assert said[("kafka-0", "configure")] == "num.io.threads (before its restart)"
    assert said[("kafka-2", "skip")] == "configuration unchanged"
    # In the roll's order (kafka-0, the active controller, last): kafka-1 live, then kafka-0's
    # live key just before its restart.
    assert admin.altered == [(1, ("num.io.threads",)), (0, ("num.io.threads",))]
    steps = [(e["node"], e["action"]) for e in done.events if e["node"] != "kafka-2"]
    assert [s for s in steps if s[1] in ("configure", "configured", "restart", "ready")] == [
        ("kafka-1", "configure"),
        ("kafka-1", "configured"),
        ("kafka-0", "configure"),
        ("kafka-0", "restart"),
        ("kafka-0", "ready"),
    ]
