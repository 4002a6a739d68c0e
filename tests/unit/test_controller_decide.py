"""The controller's decisions for a cluster (`controller.decide`) and what they are made of:
the clusters, their triggers and roll ids (`controller.clusters`), the status annotation
(`controller.status`). Pure, table-tested."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rollguard.roller.controller.clusters import (
    ClusterView,
    PodView,
    StatefulSetView,
    group,
    image_version,
    lease_name,
    roll_id,
    selector,
    target_version,
    trigger,
    unselectable,
    versions_disagree,
)
from rollguard.roller.controller.decide import (
    Busy,
    Done,
    Hold,
    Idle,
    Ignore,
    Refuse,
    Seen,
    Start,
    backoff,
    decide,
    upgrade_target,
)
from rollguard.roller.controller.status import ControllerPhase, Status, working_on
from rollguard.roller.roll.node.record import NodeRecord, Phase, Waiting
from rollguard.roller.roll.stores.journal import RollState

BROKERS = StatefulSetView(
    "prod-broker",
    cluster_label="prod",
    update_revision="b2",
    template_labels={"app": "prod-broker", "kafka": "prod", "role": "broker"},
    image="apache/kafka:4.1.1",
)
CONTROLLERS = StatefulSetView(
    "prod-controller",
    cluster_label="prod",
    update_revision="c2",
    template_labels={"app": "prod-controller", "kafka": "prod", "role": "controller"},
    image="apache/kafka:4.1.1",
)
PODS = (
    PodView("prod-broker-0", "prod-broker", "b2"),
    PodView("prod-broker-1", "prod-broker", "b1"),
    PodView("prod-controller-3", "prod-controller", "c2"),
)
VIEW = ClusterView("kafka", "prod", (BROKERS, CONTROLLERS), PODS, {"broker-config": "a=1\n"})
TRIGGER = trigger(VIEW, "4.1.1")


def seen(**changes: object) -> Seen:
    base = Seen(VIEW, TRIGGER, None, "fp", now=1000.0)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_statefulsets_with_one_cluster_label_are_one_cluster_and_others_their_own() -> None:
    alone = StatefulSetView("other-kafka")
    found = group([CONTROLLERS, alone, BROKERS])
    assert {name: [s.name for s in members] for name, members in found.items()} == {
        "prod": ["prod-broker", "prod-controller"],
        "other-kafka": ["other-kafka"],
    }


def test_the_pods_selector_is_what_every_template_shares_or_the_annotation() -> None:
    assert selector(VIEW) == "kafka=prod"
    one = ClusterView("kafka", "prod", (BROKERS,))
    assert selector(one) == "app=prod-broker,kafka=prod,role=broker"
    apart = replace(CONTROLLERS, template_labels={"app": "x"})
    assert selector(ClusterView("kafka", "prod", (BROKERS, apart))) is None
    said = unselectable(ClusterView("kafka", "prod", (BROKERS, apart)))
    assert said is not None and "give the selector as the annotation rollguard.io/selector" in said
    assert unselectable(VIEW) is None
    given = replace(BROKERS, annotations={"rollguard.io/selector": "tier=kafka"})
    assert selector(ClusterView("kafka", "prod", (given, apart))) == "tier=kafka"


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("apache/kafka:4.1.1", "4.1.1"),
        ("registry:5000/bitnami/kafka:4.0.0-debian-12-r3", "4.0.0"),
        ("kafka@sha256:abcd", None),
        ("registry:5000/kafka", None),
        ("apache/kafka:latest", None),
        ("apache/kafka:4.1", None),
    ],
)
def test_an_image_s_tag_names_its_kafka_release_when_it_is_one(
    image: str, version: str | None
) -> None:
    assert image_version(image) == version


def test_the_template_annotation_names_the_version_over_the_image_tag() -> None:
    named = replace(BROKERS, template_annotations={"rollguard.io/kafka-version": "4.2.0"})
    assert named.kafka_version == "4.2.0"
    both = ClusterView("kafka", "prod", (named, CONTROLLERS))
    assert target_version(both) is None
    said = versions_disagree(both)
    assert said is not None and "prod-broker: 4.2.0, prod-controller: 4.1.1" in said
    assert versions_disagree(VIEW) is None and target_version(VIEW) == "4.1.1"


def test_a_trigger_changes_with_a_revision_a_configmap_or_the_version_and_names_the_roll() -> None:
    assert trigger(VIEW, "4.1.1") == TRIGGER  # the same change: the same roll
    other = [
        trigger(replace(VIEW, statefulsets=(replace(BROKERS, update_revision="b3"),)), "4.1.1"),
        trigger(replace(VIEW, configs={"broker-config": "a=2\n"}), "4.1.1"),
        trigger(replace(VIEW, configs={"broker-config": None}), "4.1.1"),
        trigger(VIEW, "4.2.0"),
    ]  # fmt: skip
    assert len({TRIGGER.key, *(t.key for t in other)}) == 5
    rid = roll_id("prod", TRIGGER.key)
    assert rid == f"prod-{TRIGGER.key}" and len(TRIGGER.key) == 8
    long = roll_id("A.Very_Long.Cluster.Name.That.Goes.On.And.On", TRIGGER.key)
    assert len(long) <= 40 and long.endswith(TRIGGER.key) and long == long.lower()


def test_each_cluster_has_a_lease_of_its_own() -> None:
    assert lease_name("prod") == "rollguard-roll-prod"
    assert lease_name("Prod.EU") != lease_name("prod-eu")
    assert len(lease_name("x" * 300)) <= 253


def test_a_rolling_update_statefulset_is_ignored_whatever_else() -> None:
    rolling = replace(BROKERS, strategy="RollingUpdate")
    view = replace(VIEW, statefulsets=(rolling, CONTROLLERS))
    assert decide(seen(view=view, running=True, refused="bad")) == Ignore(("prod-broker",))


def test_a_running_roll_goes_on_and_bad_settings_are_refused() -> None:
    assert decide(seen(running=True)) == Busy()
    assert decide(seen(refused="annotation rollguard.io/window: ...")) == Refuse(
        "annotation rollguard.io/window: ..."
    )


def test_an_unobserved_change_or_no_pods_is_waited_for() -> None:
    changing = replace(BROKERS, generation=3, observed_generation=2)
    held = decide(seen(view=replace(VIEW, statefulsets=(changing, CONTROLLERS))))
    assert isinstance(held, Hold) and "prod-broker" in held.reason and held.retry_at is None
    assert isinstance(decide(seen(view=replace(VIEW, pods=()))), Hold)


def test_a_cluster_first_seen_is_rolled_and_then_idle_at_that_trigger() -> None:
    first = decide(seen())
    assert first == Start(roll_id("prod", TRIGGER.key), False, first.why)  # type: ignore[union-attr]
    assert isinstance(first, Start) and first.why.startswith("first look")
    rolled = Status(ControllerPhase.COMPLETED, rolled=TRIGGER.key)
    assert decide(seen(status=rolled)) == Idle()
    changed = Status(ControllerPhase.COMPLETED, rolled="another")
    again = decide(seen(status=changed))
    assert isinstance(again, Start) and "prod-broker-1 out of date" in again.why


def test_a_journal_says_whether_the_roll_resumes_or_is_done() -> None:
    rid = roll_id("prod", TRIGGER.key)
    for state in (RollState.RUNNING, RollState.INTERRUPTED, RollState.FAILED):
        assert decide(seen(journal=state)) == Start(rid, True, "resumed from its journal")
    assert decide(seen(journal=RollState.COMPLETED)) == Done(rid)


def test_a_refused_or_failed_roll_is_tried_after_a_backoff_or_once_its_inputs_change() -> None:
    for phase in (ControllerPhase.REFUSED, ControllerPhase.FAILED):
        status = Status(phase, reason="delete pods refused", attempt="fp", attempts=2)
        held = decide(seen(status=status, since=900.0))
        assert held == Hold("tried 2 time(s): delete pods refused", 900.0 + 120.0)
        assert isinstance(decide(seen(status=status, since=900.0, now=1021.0)), Start)
        assert isinstance(decide(seen(status=status, fingerprint="other")), Start)
    assert [backoff(n) for n in (1, 2, 3, 6, 20)] == [60, 120, 240, 1800, 1800]


def test_the_status_reads_back_what_it_wrote_and_names_the_node_worked_on() -> None:
    status = Status(ControllerPhase.ROLLING, "prod-1", "prod-broker-1", "waiting", "t0", "k", "", 0)
    assert Status.from_text(status.to_text()) == status
    assert '"attempts"' not in status.to_text()
    assert Status.from_text("not json") is None and Status.from_text(None) is None
    moved = status.moved(ControllerPhase.ROLLING, "t1", node="prod-broker-2")
    assert moved.since == "t0" and moved.node == "prod-broker-2"
    assert status.moved(ControllerPhase.PAUSED, "t1").since == "t1"
    assert moved.same_as(replace(moved, since="t9")) and not moved.same_as(status)
    nodes = {
        "a": NodeRecord("a", Phase.DONE),
        "b": NodeRecord("b", Phase.WAITING, waiting=Waiting("ready", "not ready", 0.0)),
        "c": NodeRecord("c", Phase.RECOVERING, waiting=Waiting("recovery", "recovering", 0.0)),
    }
    assert working_on(nodes) == ("c", "recovering")
    assert working_on({"a": NodeRecord("a", Phase.DONE)}) == ("", "")


def test_a_roll_is_held_to_a_version_only_when_the_templates_name_another_than_last_time() -> None:
    rolled = Status(ControllerPhase.COMPLETED, rolled="k", kafka_version="4.0.0")
    assert upgrade_target("4.4.0", rolled, resume=False) == "4.4.0"  # an upgrade
    assert upgrade_target("4.0.0", rolled, resume=False) is None  # a template or ConfigMap change
    assert upgrade_target("4.4.0", rolled, resume=True) is None  # the journal keeps its own
    assert upgrade_target("4.4.0", None, resume=False) is None  # a first look
    assert upgrade_target(None, rolled, resume=False) is None
