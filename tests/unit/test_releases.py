"""What each Kafka release brings to the finalized features, and Kafka's rules for raising and
lowering them (`rollguard.roller.roll.upgrades.releases`, pure). The table itself is checked against
Kafka's own `kafka-features.sh version-mapping` in tests/real/test_real_kafka_oldest.py."""

from __future__ import annotations

import pytest

from rollguard.roller.roll.upgrades.releases import (
    UnknownRelease,
    finalize_plan,
    metadata_name,
    release_levels,
    software_downgrade,
    target_refusal,
)

# A cluster formatted at Kafka 4.0.0 (measured: ELR off; kraft.version 0, a static quorum).
FORMATTED_4_0 = {"metadata.version": 25, "transaction.version": 2, "group.version": 1}
SUPPORTED_4_4 = {
    "metadata.version": (7, 33),
    "kraft.version": (0, 1),
    "transaction.version": (0, 2),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
    "share.version": (0, 2),
    "streams.version": (0, 1),
}


def test_a_release_s_levels_by_its_minor_version() -> None:
    assert release_levels("4.4.0")["metadata.version"] == 33
    assert release_levels("4.4.1") == release_levels("4.4.0")
    assert release_levels("4.1.0-rc2")["eligible.leader.replicas.version"] == 1
    assert release_levels("4.0.0")["eligible.leader.replicas.version"] == 0
    for version in ("3.9.1", "4.9.0"):
        with pytest.raises(
            UnknownRelease, match=r"knows the feature levels of releases 4\.0, 4\.1"
        ):
            release_levels(version)
    assert metadata_name(33) == "4.4-IV2 (33)"
    assert metadata_name(99) == "level 99"


@pytest.mark.parametrize(
    ("finalized", "target", "refused"),
    [
        (25, "4.0.0", False),  # before a finalize: a rollback is a roll like any other
        (33, "4.4.0", False),
        (27, "4.0.0", True),  # 4.1-IV1 is past what 4.0 runs
        (33, "4.3.1", True),
        (33, "4.9.0", False),  # newer than the table: it runs every level the table knows
    ],
)
def test_a_roll_to_a_release_that_cannot_run_the_finalized_metadata_is_refused(
    finalized: int, target: str, refused: bool
) -> None:
    why = target_refusal({"metadata.version": finalized}, target)
    assert (why is not None) is refused
    if why is not None:
        assert why.startswith(
            f"the cluster's finalized metadata.version is {metadata_name(finalized)}, and Kafka "
            f"{target} runs"
        )


def test_an_upgrade_path_kafka_does_not_support_is_refused_with_its_reason() -> None:
    why = target_refusal({"metadata.version": 6}, "4.4.0")
    assert why is not None and "Kafka 4.x runs 3.3-IV3 (7) or later: upgrade to Kafka 3.9" in why
    assert target_refusal({"metadata.version": 7}, "4.0.0") is None


def test_a_target_older_than_4_0_is_not_a_release_rollguard_rolls_onto() -> None:
    with pytest.raises(UnknownRelease, match=r"older than 4\.0"):
        target_refusal({"metadata.version": 25}, "3.9.0")


def test_a_software_downgrade_is_possible_only_if_no_level_between_changed_the_metadata() -> None:
    assert software_downgrade(25, 29) == (True, [])  # 4.0 to 4.2: nothing changed
    assert software_downgrade(25, 33) == (False, ["4.3-IV0 (30)", "4.4-IV1 (32)", "4.4-IV2 (33)"])
    assert software_downgrade(33, 33) == (True, [])


def test_finalize_sets_each_feature_by_name_and_leaves_kraft_version_unless_named() -> None:
    changes = {c.feature: c for c in finalize_plan(FORMATTED_4_0, SUPPORTED_4_4, "4.4.0")}
    assert {f: (c.current, c.target) for f, c in changes.items() if c.changes} == {
        "metadata.version": (25, 33),
        "eligible.leader.replicas.version": (0, 1),
        "share.version": (0, 2),
        "streams.version": (0, 1),
    }
    kraft = changes["kraft.version"]
    assert not kraft.changes and "KAFKA-21426" in kraft.skipped
    assert (
        changes["metadata.version"]
        .describe()
        .startswith(
            "metadata.version: 4.0-IV3 (25) -> 4.4-IV2 (33): turns on the release's metadata format"
        )
    )
    assert changes["group.version"].describe() == "group.version: 1, already at 1 or above"
    named = {
        c.feature: c
        for c in finalize_plan(
            FORMATTED_4_0, SUPPORTED_4_4, "4.4.0", include=frozenset({"kraft.version"})
        )
    }
    assert (named["kraft.version"].current, named["kraft.version"].target) == (0, 1)
    assert named["kraft.version"].changes


def test_finalize_never_lowers_a_feature() -> None:
    finalized = {**FORMATTED_4_0, "metadata.version": 33, "share.version": 2}
    changes = finalize_plan(finalized, SUPPORTED_4_4, "4.2.0")
    assert not any(c.changes and c.target < c.current for c in changes)
    assert {c.feature for c in changes if c.changes} == {
        "eligible.leader.replicas.version",
        "streams.version",
    }


def test_a_level_no_node_supports_is_refused_before_kafka_is_asked() -> None:
    old_nodes = {**SUPPORTED_4_4, "metadata.version": (7, 25)}  # a node still on 4.0
    with pytest.raises(ValueError, match=r"metadata\.version 33 is not supported by every node"):
        finalize_plan(FORMATTED_4_0, old_nodes, "4.4.0")


def test_every_feature_a_release_sets_says_what_it_turns_on() -> None:
    """A finalize (and its dry run) says what each feature it raises turns on for clients."""
    from rollguard.roller.roll.upgrades.releases import TURNS_ON, release_levels

    features = {f for release in ("4.0.0", "4.4.0") for f in release_levels(release)}
    assert features - set(TURNS_ON) == set()


def test_the_upgrade_guide_says_what_each_feature_turns_on() -> None:
    from rollguard.roller.roll.upgrades.releases import TURNS_ON

    from helpers import ROOT

    guide = (ROOT / "docs" / "upgrade.md").read_text()
    for feature, meaning in TURNS_ON.items():
        assert f"| `{feature}` | {meaning} |" in guide, feature
