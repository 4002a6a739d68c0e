"""`rollguard plan` explains each node: why it is in the plan, its place in the roll order and
why, and what would hold it now; names that do not exist are exit 2 (issue: plan explains).

In process, on the simulated cluster (`rollguard.peers.sim`) with the roll's own `Observer`;
then the command as operators run it, against a cluster of real processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from rollguard.peers.cluster import ProcessCluster
from rollguard.peers.harness import InventoryRoll
from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import SimCluster, SimNode, SimPartition, VirtualClock
from rollguard.roller.model import Node, Role
from rollguard.roller.roll.planning import PlanEntry, check_names, plan_lines
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.roller.roll.stores.journal import FileJournalStore, nothing_to_resume
from rollguard.shared.errors import ConfigError

from helpers import Pki

COMBINED = frozenset({Role.BROKER, Role.CONTROLLER})
BROKER = frozenset({Role.BROKER})


def node(node_id: int, roles: frozenset[Role] = COMBINED) -> SimNode:
    return SimNode(Node(node_id, f"kafka-{node_id}", roles, f"https://kafka-{node_id}:8443"))


def five_nodes(*, recovering: bool = True) -> SimCluster:
    """kafka-0..2 combined (kafka-0 leads the quorum), kafka-3 and 4 brokers. kafka-1 is in log
    recovery (`recovering`): while it is, the roll restarts nothing else; orders-0 (replicas 2,
    3, 4; min ISR 2) has lost kafka-4 from its ISR, so neither kafka-2 nor kafka-3 may go now."""
    nodes = [node(0), node(1), node(2), node(3, BROKER), node(4, BROKER)]
    if recovering:
        nodes[1].down_until, nodes[1].recovery_until = 0.0, 3600.0
        nodes[1].recovery_segments = 500
    partitions = [SimPartition("orders", 0, (2, 3, 4), 2), SimPartition("orders", 1, (0, 3, 4), 1)]
    cluster = SimCluster(nodes, partitions, VirtualClock())
    for sim in nodes:
        sim.rejoin = {i: 0.0 for i, p in enumerate(partitions) if sim.node.node_id in p.replicas}
        sim.catch_up_seconds = 60.0
    nodes[4].rejoin[0] = 1e9  # a follower that never catches up
    return cluster


def test_each_node_says_why_it_is_in_the_plan_where_it_comes_and_what_holds_it() -> None:
    entries = SimRoll(five_nodes()).entries(RollSettings())
    got = [
        (e.position, e.node.name, e.action, e.order.split(":")[0], e.hold and e.hold.kind)
        for e in entries
    ]
    assert got == [
        (1, "kafka-1", "wait", "not ready", "recovering"),
        (2, "kafka-2", "defer", "controller", "unsafe"),
        (3, "kafka-0", "defer", "active controller", "unsafe"),  # held: kafka-1 recovers
        (4, "kafka-3", "defer", "broker", "unsafe"),
        (5, "kafka-4", "defer", "broker", "unsafe"),
    ]
    # an inventory has no revisions: every node is in the plan, and the plan says so
    assert {e.why for e in entries} == {"inventory (no revision to compare)"}
    by_name = {e.node.name: e for e in entries}
    held = by_name["kafka-3"].hold
    assert held is not None and held.reason.startswith("orders-0 has ISR [2, 3]")
    assert [(b.subject, b.waiting_on) for b in held.blockers] == [("orders-0", (4,))]
    assert "log recovery" in by_name["kafka-1"].reason
    assert by_name["kafka-0"].order.endswith("so that leadership moves once")
    # As the roll would: nothing else is restarted while a node is in log recovery.
    recovery = "kafka-1 is in log recovery: no other node is restarted until it is back"
    for name in ("kafka-0", "kafka-4"):
        hold = by_name[name].hold
        assert hold is not None and hold.reason == recovery and by_name[name].reason == recovery
        assert [b.subject for b in hold.blockers] == ["recovery"]


def test_once_no_node_recovers_the_plan_restarts_what_is_safe() -> None:
    entries = SimRoll(five_nodes(recovering=False)).entries(RollSettings())
    got = [(e.position, e.node.name, e.action, e.hold and e.hold.kind) for e in entries]
    assert got == [
        (1, "kafka-1", "restart", None),
        (2, "kafka-2", "defer", "unsafe"),
        (3, "kafka-0", "restart", None),
        (4, "kafka-3", "defer", "unsafe"),
        (5, "kafka-4", "restart", None),
    ]


def test_a_node_whose_agent_cannot_be_read_is_held_as_unknown() -> None:
    cluster = five_nodes()
    cluster.nodes["kafka-4"].jvm_started_at = 10.0  # no JVM answers its agent yet
    entries = {e.node.name: e for e in SimRoll(cluster).entries(RollSettings(), check_agents=False)}
    hold = entries["kafka-4"].hold
    assert entries["kafka-4"].action == "wait"
    assert hold is not None and hold.kind == "agent-unknown"
    assert entries["kafka-4"].order.startswith("not ready: first")


def test_left_out_nodes_say_why_and_have_no_place() -> None:
    settings = RollSettings(only=frozenset({"kafka-0", "kafka-4"}))
    entries = SimRoll(five_nodes()).entries(settings)
    taken = [(e.node.name, e.position, e.why) for e in entries if e.action != "skip"]
    assert taken == [("kafka-0", 1, "named by --only"), ("kafka-4", 2, "named by --only")]
    skipped = {e.why for e in entries if e.action == "skip"}
    assert skipped == {"not named by --only"}
    assert all(e.position is None and e.order == "" for e in entries if e.action == "skip")


def test_batches_share_a_place_and_say_why_they_were_grouped() -> None:
    cluster = five_nodes(recovering=False)
    cluster.nodes["kafka-4"].rejoin[0] = 0.0  # orders-0 back in sync, and with min ISR 1
    cluster.partitions[0] = SimPartition("orders", 0, (2, 3, 4), 1)  # room for two at once
    entries = SimRoll(cluster).entries(RollSettings(max_batch_size=2))
    batched = [e for e in entries if e.batch is not None]
    assert [e.node.name for e in batched] == ["kafka-3", "kafka-4"]
    assert {e.position for e in batched} == {4}  # after kafka-1, kafka-2 and kafka-0
    assert batched[0].order.startswith("batch 1: 2 brokers: no partition loses more")


def test_the_json_fields_say_the_same() -> None:
    plan = SimRoll(five_nodes(recovering=False)).entries(RollSettings())
    entries = {e.node.name: e.to_json() for e in plan}
    deferred = entries["kafka-2"]
    assert deferred["why"] == "inventory (no revision to compare)"
    assert deferred["position"] == 2
    assert deferred["order"].startswith("controller: before the brokers")
    assert deferred["hold"]["kind"] == "unsafe"
    assert deferred["hold"]["blockers"] == [
        {"subject": "orders-0", "reason": deferred["hold"]["blockers"][0]["reason"],
         "waitingOn": [4]}
    ]  # fmt: skip
    assert deferred["hold"]["moreBlockers"] == 0
    assert entries["kafka-0"]["hold"] is None
    json.dumps(list(entries.values()))  # all of it is JSON


def test_the_text_is_a_table_in_roll_order_with_what_each_place_means() -> None:
    lines = plan_lines(SimRoll(five_nodes()).entries(RollSettings()))
    assert lines[0] == "5 nodes: 4 defer, 1 wait"
    assert lines[1].split() == ["#", "NODE", "ROLE", "ACTION", "IN", "THE", "PLAN", "ORDER", "NOW"]
    assert [line.split()[:4] for line in lines[2:7]] == [
        ["1", "kafka-1", "combined", "wait"],
        ["2", "kafka-2", "combined", "defer"],
        ["3", "kafka-0", "combined", "defer"],
        ["4", "kafka-3", "broker", "defer"],
        ["5", "kafka-4", "broker", "defer"],
    ]
    assert lines[4].endswith(
        "kafka-1 is in log recovery: no other node is restarted until it is back"
    )
    # every column starts at the same place on every row
    assert len({line.index("kafka-") for line in lines[2:7]}) == 1
    assert lines[7] == ""
    assert lines[8:] == [
        "not ready: first, so that the others are judged on a settled cluster",
        "controller: before the brokers, so that the quorum rolls while every broker is up",
        "active controller: last of the controllers, so that leadership moves once",
        "broker: after the controllers",
    ]


NODES = [Node(i, f"kafka-{i}", COMBINED) for i in range(4)]


@pytest.mark.parametrize(
    ("only", "skip", "message"),
    [
        # another number is another node (one removed, say), not a typo: the names are listed
        ({"kafka-9"}, set(),
         "--only kafka-9: no such node (the nodes are kafka-0, kafka-1, kafka-2, kafka-3)"),
        (set(), {"kafak-1"}, "--skip kafak-1: no such node; did you mean kafka-1?"),
        (set(), {"Kafka-2"}, "--skip Kafka-2: no such node; did you mean kafka-2?"),
        ({"kafka-8", "kafka-9"}, set(), "--only kafka-8,kafka-9: no such nodes (the nodes are"),
    ],
)  # fmt: skip
def test_a_name_no_node_has_is_a_config_error_with_a_suggestion_or_the_names(
    only: set[str], skip: set[str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        check_names(NODES, RollSettings(only=frozenset(only), skip=frozenset(skip)))
    assert str(caught.value).startswith(message)


def test_a_long_list_of_nodes_is_cut() -> None:
    nodes = [Node(i, f"broker-{i:03d}", BROKER) for i in range(100)]
    with pytest.raises(ConfigError, match=r"broker-011 and 88 more\)$"):
        check_names(nodes, RollSettings(only=frozenset({"zookeeper"})))


def test_a_missing_journal_names_where_it_looked_and_the_rolls_there(tmp_path: Path) -> None:
    store = FileJournalStore(tmp_path)
    assert str(nothing_to_resume(store, "nosuch")) == (
        f"--resume nosuch: no roll journal {tmp_path}/roll-nosuch.json; "
        "there is no roll on record there"
    )
    for roll_id in ("20261120-101500-3fa2", "t1"):
        (tmp_path / f"roll-{roll_id}.json").write_text("{}")
    (tmp_path / "events-t1.jsonl").write_text("")
    assert str(nothing_to_resume(store, "t2")).endswith(
        "; the rolls on record there: 20261120-101500-3fa2, t1"
    )
    assert str(nothing_to_resume(FileJournalStore(tmp_path / "none"), "x")).endswith(
        "there is no roll on record there"
    )


# ---- the command ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[ProcessCluster]:
    """Three combined nodes; orders-0's ISR is [0, 1] = its min.insync.replicas, so kafka-0 and
    kafka-1 may not go now and kafka-2 may."""
    with ProcessCluster(pki, tmp_path_factory.mktemp("cluster")) as cluster:
        cluster.kafka.set_isr("orders", 0, [0, 1])
        yield cluster


def test_plan_prints_the_table_and_json_with_the_reasons(
    target: InventoryRoll, tmp_path: Path
) -> None:
    done = target.plan()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "3 nodes: 1 restart, 2 defer"
    rows = [line.split(maxsplit=4) for line in lines[2:5]]
    assert [row[:4] for row in rows] == [
        ["1", "kafka-1", "combined", "defer"],
        ["2", "kafka-2", "combined", "restart"],
        ["3", "kafka-0", "combined", "defer"],
    ]
    assert "inventory (no revision to compare)  controller " in lines[2]
    assert lines[2].endswith("orders-0 has ISR [0, 1] = min.insync.replicas 2 with this node; "
                             "waiting on node 2")  # fmt: skip
    assert "active controller" in lines[4]
    assert "active controller: last of the controllers, so that leadership moves once" in lines
    entries = target.plan("--output", "json").entries()
    assert [(e["node"], e["position"], e["hold"] and e["hold"]["kind"]) for e in entries] == [
        ("kafka-1", 1, "unsafe"),
        ("kafka-2", 2, None),
        ("kafka-0", 3, "unsafe"),
    ]
    assert entries[0]["hold"]["blockers"][0] == {
        "subject": "orders-0",
        "reason": "orders-0 has ISR [0, 1] = min.insync.replicas 2 with this node",
        "waitingOn": [2],
    }
    assert not list(tmp_path.iterdir())  # a plan writes nothing


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--only", "kafka-9"], "rollguard: --only kafka-9: no such node (the nodes are kafka-0, "
                                "kafka-1, kafka-2)"),
        (["--skip", "kafak-1"], "rollguard: --skip kafak-1: no such node; did you mean kafka-1?"),
    ],
)  # fmt: skip
def test_plan_of_a_node_that_does_not_exist_is_exit_2(
    target: InventoryRoll, extra: list[str], message: str
) -> None:
    done = target.plan(*extra)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == message
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_roll_of_a_node_that_does_not_exist_is_exit_2_and_restarts_nothing(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    done = target.roll("--only", "kafka-2,kafka-9")
    assert done.returncode == 2, done.stderr
    assert "rollguard: --only kafka-9: no such node" in done.stderr
    assert [n.restarts for n in cluster.nodes.values()] == [0, 0, 0]


def test_resuming_a_roll_without_a_journal_is_exit_2_listing_the_rolls_there(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    state = target.state
    state.mkdir()
    (state / "roll-20261120-101500-3fa2.json").write_text("{}")
    done = target.roll("--resume", "nosuch", roll_id=None)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"rollguard: --resume nosuch: no roll journal {state}/roll-nosuch.json; "
        "the rolls on record there: 20261120-101500-3fa2"
    )
    assert [n.restarts for n in cluster.nodes.values()] == [0, 0, 0]


def test_plan_ignores_the_roll_s_own_flags_and_says_so(
    target: InventoryRoll, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    done = target.plan("--state-dir", str(elsewhere), "--roll-id", "r1", "--output", "json")
    assert done.returncode == 0, done.stderr
    # the roll's quick timings (`QUICK_TIMINGS`) give a --poll-interval too
    said = "plan ignores --poll-interval, --roll-id, --state-dir: they are for roll only"
    assert said in done.stderr
    assert len(done.stdout.splitlines()) == 3
    assert not elsewhere.exists() and not target.state.exists()


def test_a_plan_entry_built_by_hand_still_prints_as_before() -> None:
    entry = PlanEntry(Node(3, "kafka-3", BROKER), "restart", "restart")
    assert entry.text() == "restart: restart"
    assert replace(entry, position=1).to_json()["position"] == 1
