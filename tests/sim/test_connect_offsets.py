"""Offsets, nothing half done (issue 17 items 2 and 3): every input checked before the first
request, Connect's asynchronous stop waited for, a failure after `--stop` puts the connector back
(unless `--leave-stopped`), and `--dry-run` shows the change without making it. A null offset is
no offset where Connect lists it and a reset of that partition in a file to alter, named in the
output either way."""
# ruff: noqa: F811 (pytest fixtures imported from test_connect_support, taken as arguments)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_connect_support import (  # noqa: F401
    CHECKPOINT,
    FAST_RETRIES,
    HEARTBEAT,
    MM2,
    Cli,
    changes,
    cli,
    connect,
)

from rollguard.peers.connect import (
    ConnectSim,
    State,
    mirror_checkpoint_offset,
    mirror_heartbeat_offset,
    mirror_source_offset,
)
from rollguard.roller.connect.offsets import diff
from rollguard.roller.connect.shapes import SOURCE, check_offsets, mm2_type
from rollguard.shared.errors import ConfigError

SOURCE_ENTRY = mirror_source_offset("east", "orders", 0, 7)


def body(*entries: Any) -> dict[str, Any]:
    return {"offsets": list(entries)}


# ---- the shape of a file, pure ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "entries"),
    [
        (None, [{"partition": {"file": "a.txt"}, "offset": {"position": 3}}]),
        ("MirrorSourceConnector", [SOURCE_ENTRY]),
        ("MirrorSourceConnector", [{**SOURCE_ENTRY, "offset": None}]),  # a tombstone
        ("MirrorCheckpointConnector", [mirror_checkpoint_offset("billing", "orders", 3, 0)]),
        ("MirrorHeartbeatConnector", [mirror_heartbeat_offset("east", "west", 0)]),
    ],
)
def test_good_files_pass(kind: str | None, entries: list[dict[str, Any]]) -> None:
    assert check_offsets(body(*entries), "f", kind) == entries


@pytest.mark.parametrize(
    ("kind", "given", "problem"),
    [
        (None, {"offset": []}, 'the body is not an object with an "offsets" list'),
        (None, [SOURCE_ENTRY], 'the body is not an object with an "offsets" list'),
        (None, body(), "offsets is not a non-empty list"),
        (None, {"offsets": {"a": 1}}, "offsets is not a non-empty list"),
        (None, body({"partition": {"a": 1}}), 'offsets[0] is not an object with exactly'),
        (None, body({**SOURCE_ENTRY, "extra": 1}), "offsets[0] is not an object with exactly"),
        (None, body({"partition": None, "offset": {}}), "offsets[0].partition is not a non-empty"),
        (None, body({"partition": {"a": 1}, "offset": 5}), "offsets[0].offset is not an object"),
        (None, body(SOURCE_ENTRY, SOURCE_ENTRY), "offsets[1] repeats the partition of offsets[0]"),
        (SOURCE, body({"partition": {"cluster": "east", "topic": "t"}, "offset": {"offset": 1}}),
         "offsets[0].partition has keys cluster, topic; a MirrorSourceConnector partition has "
         "exactly cluster, topic, partition"),
        (SOURCE, body(mirror_source_offset("east", "t", -1, 1)),
         "offsets[0].partition.partition is -1, not a whole number >= 0"),
        (SOURCE, body(mirror_source_offset("east", "t", "0", 1)),  # type: ignore[arg-type]
         "offsets[0].partition.partition is '0', not a whole number"),
        (SOURCE, body(mirror_source_offset("", "t", 0, 1)),
         "offsets[0].partition.cluster is '', not a non-empty string"),
        (SOURCE, body({**SOURCE_ENTRY, "offset": {"offset": 1.5}}),
         'offsets[0].offset is not {"offset": N} with N a whole number >= 0'),
        (SOURCE, body({**SOURCE_ENTRY, "offset": {"offset": True}}), 'offsets[0].offset is not'),
        ("MirrorCheckpointConnector", body(mirror_checkpoint_offset("g", "t", 0, 5)),
         "offsets[0].offset.offset is 5; a MirrorCheckpointConnector takes 0 only"),
        ("MirrorCheckpointConnector", body(SOURCE_ENTRY), "has keys cluster, partition, topic"),
        ("MirrorHeartbeatConnector", body(mirror_heartbeat_offset("a", "b", 1)),
         "a MirrorHeartbeatConnector takes 0 only"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_naming_the_entry(kind: str | None, given: Any, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_offsets(given, "offsets.json", kind)
    assert str(caught.value) == f"offsets.json: {problem}; nothing was sent" or problem in str(
        caught.value
    )


def test_the_mm2_type_comes_from_the_name() -> None:
    assert mm2_type(CHECKPOINT) == "MirrorCheckpointConnector"
    with pytest.raises(ConfigError, match="is not a MirrorMaker 2 connector name"):
        mm2_type("east->west.Something")


def test_the_diff_shows_changed_new_removed_and_kept_partitions() -> None:
    a, b = mirror_source_offset("e", "a", 0, 1), mirror_source_offset("e", "b", 0, 2)
    c = mirror_source_offset("e", "c", 0, 3)
    wanted = [{**a, "offset": {"offset": 5}}, {**b, "offset": None}, {**c}]
    lines = diff([a, b], wanted)
    key_a = '{"cluster":"e","partition":0,"topic":"a"}'
    assert lines[0] == f'~ {key_a}  {{"offset":1}} -> {{"offset":5}}'
    assert lines[1].startswith('- {"cluster":"e","partition":0,"topic":"b"}  {"offset":2} ->')
    assert lines[2].startswith('+ {"cluster":"e","partition":0,"topic":"c"}  (none) ->')
    assert lines[3] == "0 unchanged, 0 not in the file (kept as they are)"
    assert diff([a], None) == [f'- {key_a}  {{"offset":1}} -> (none)']


# ---- the commands against the peer --------------------------------------------------------


def alter(cli: Cli, sim: ConnectSim, folder: Path, *flags: str, name: str = MM2) -> Any:
    return cli("mm2", "offsets", "alter", "--connector", name, "--from", str(folder),
               "--connect-url", sim.url, *FAST_RETRIES, *flags)  # fmt: skip


def write(folder: Path, content: Any, name: str = MM2) -> None:
    text = content if isinstance(content, str) else json.dumps(content, indent=2)
    (folder / (name.replace("->", "--") + ".json")).write_text(text)


def test_a_file_without_offsets_is_exit_2_before_any_request(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    write(tmp_path, {"partitions": []})
    done = alter(cli, connect, tmp_path, "--stop")
    assert done.code == 2
    assert (
        'the body is not an object with an "offsets" list (KIP-875); nothing was sent' in done.err
    )
    assert connect.requests == [] and connect.state(MM2) is State.RUNNING


def test_a_checkpoint_moved_to_another_offset_is_exit_2_before_any_request(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    write(tmp_path, body(mirror_checkpoint_offset("billing", "orders", 0, 9)), CHECKPOINT)
    done = alter(cli, connect, tmp_path, "--stop", name=CHECKPOINT)
    assert done.code == 2 and "takes 0 only" in done.err and connect.requests == []
    not_mm2 = alter(cli, connect, tmp_path, name="my-sink")
    assert not_mm2.code == 2 and "not a MirrorMaker 2 connector name" in not_mm2.err


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--leave-stopped"], "--leave-stopped and --resume go with --stop"),
        (["--stop", "--resume", "--leave-stopped"], "give --leave-stopped or --resume, not both"),
        (["--to", "x"], "--to is not for `offsets alter`"),
    ],
)
def test_contradicting_flags_are_exit_2_before_any_request(
    connect: ConnectSim, cli: Cli, tmp_path: Path, flags: list[str], problem: str
) -> None:
    write(tmp_path, body(SOURCE_ENTRY))
    done = alter(cli, connect, tmp_path, *flags)
    assert done.code == 2 and problem in done.err and connect.requests == []


def test_the_asynchronous_stop_is_waited_for_before_the_patch(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    connect.set_delays(stop=0.4)
    write(tmp_path, body(SOURCE_ENTRY))
    done = alter(cli, connect, tmp_path, "--stop")
    assert done.code == 0, done.err
    assert f"connector {MM2} is STOPPED (it was RUNNING): resume it with" in done.out
    statuses = [r for r in connect.requests if r.path.endswith("/status")]
    assert len(statuses) >= 2  # polled until STOPPED
    assert [r.status for r in connect.calls("PATCH")] == [200]  # never refused with 400
    assert connect.offsets(MM2)[0]["offset"] == {"offset": 7}


def test_a_failure_after_the_stop_resumes_the_connector_and_says_so(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    write(tmp_path, body(SOURCE_ENTRY))
    connect.start_rebalance()  # PATCH gets 409 through every retry; stop and resume do not
    done = alter(cli, connect, tmp_path, "--stop", "--stop-timeout", "2s")
    assert done.code == 5, done.err
    assert "HTTP 409" in done.err
    # Resumed; the task configs that would show it RUNNING are 409 too while the group
    # rebalances, and the message says so.
    assert f"connector {MM2} was resumed, but connector {MM2} is not RUNNING" in done.err
    assert "(no task configs yet)" in done.err
    assert connect.state(MM2) is State.RUNNING and connect.offsets(MM2)[0]["offset"] != {
        "offset": 7
    }
    left = alter(cli, connect, tmp_path, "--stop", "--leave-stopped", "--stop-timeout", "2s")
    assert left.code == 5 and f"connector {MM2} is left STOPPED (--leave-stopped)" in left.err
    assert connect.state(MM2) is State.STOPPED


def test_a_paused_connector_is_paused_again_and_a_slow_stop_times_out(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    connect.add_connector("paused", state=State.PAUSED, tasks=1)
    connect.set_delays(stop=30)
    write(tmp_path, {"offsets": [{"partition": {"f": "a"}, "offset": {"p": 1}}]})
    done = cli("connect", "offsets", "alter", "--connector", "paused", "--from",
               str(tmp_path / "paused.json"), "--stop", "--stop-timeout", "300ms",
               "--connect-url", connect.url)  # fmt: skip
    assert done.code == 2 and "no offsets file" in done.err  # the generic key is offsets.json
    (tmp_path / "offsets.json").write_text(json.dumps(body({"partition": {"f": "a"},
                                                            "offset": {"p": 1}})))  # fmt: skip
    done = cli("connect", "offsets", "alter", "--connector", "paused", "--from", str(tmp_path),
               "--stop", "--stop-timeout", "300ms", "--connect-url", connect.url)  # fmt: skip
    assert done.code == 1
    assert "connector paused is not STOPPED with no task after 300ms" in done.err
    assert "connector paused was paused as it was before (now connector PAUSED" in done.err
    assert connect.state("paused") is State.PAUSED and not connect.calls("PATCH")


def test_resume_after_success_puts_it_back(connect: ConnectSim, cli: Cli, tmp_path: Path) -> None:
    connect.add_mirror_maker()
    done = cli("mm2", "offsets", "reset", "--connector", MM2, "--stop", "--resume",
               "--connect-url", connect.url)  # fmt: skip
    assert done.code == 0, done.err
    assert "reset successfully" in done.out and "resumed as it was before" in done.out
    assert connect.offsets(MM2) == [] and connect.state(MM2) is State.RUNNING


def test_dry_run_prints_the_diff_and_changes_nothing(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker(topics=("orders", "payments"))
    before = connect.offsets(MM2)
    write(tmp_path, body(SOURCE_ENTRY, mirror_source_offset("east", "refunds", 0, 1)))
    done = alter(cli, connect, tmp_path, "--dry-run")
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0] == (
        '~ {"cluster":"east","partition":0,"topic":"orders"}  {"offset":42} -> {"offset":7}'
    )
    assert lines[1].startswith('+ {"cluster":"east","partition":0,"topic":"refunds"}')
    assert lines[2] == "0 unchanged, 1 not in the file (kept as they are)"
    assert (
        f"connector {MM2}: dry run: it is RUNNING" in lines[3]
        and "it would need --stop; nothing was sent" in lines[3]
    )
    reset = cli("mm2", "offsets", "reset", "--connector", MM2, "--stop", "--dry-run",
                "--output", "json", "--connect-url", connect.url)  # fmt: skip
    assert reset.code == 0, reset.err
    (answer,) = reset.json
    assert answer["dryRun"] is True and len(answer["changes"]) == 2
    assert all(line.startswith("- ") for line in answer["changes"])
    assert "--stop would stop it first" in answer["message"]
    assert changes(connect) == [] and connect.offsets(MM2) == before
    assert connect.state(MM2) is State.RUNNING


# ---- a null offset: no offset when listed, a reset when altered ----------------------------

PAYMENTS = mirror_source_offset("east", "payments", 0, 42)
PAYMENTS_KEY = '{"cluster":"east","partition":0,"topic":"payments"}'
# What a real worker lists for a moment after resetting a partition (DELETE, or PATCH with null).
PAYMENTS_RESET = {**PAYMENTS, "offset": None}


def test_the_diff_takes_a_partition_listed_with_a_null_offset_as_one_without() -> None:
    a = mirror_source_offset("e", "a", 0, 1)
    key_a = '{"cluster":"e","partition":0,"topic":"a"}'
    assert diff([a, PAYMENTS_RESET], None) == [f'- {key_a}  {{"offset":1}} -> (none)']
    assert diff([PAYMENTS_RESET], None) == ["(no offsets: nothing to reset)"]
    assert diff([PAYMENTS_RESET], [PAYMENTS_RESET]) == [
        f"  {PAYMENTS_KEY}  (none) -> (none): no offset, nothing to reset",
        "0 unchanged, 0 not in the file (kept as they are)",
    ]
    assert diff([a, PAYMENTS_RESET], [PAYMENTS]) == [
        f'+ {PAYMENTS_KEY}  (none) -> {{"offset":42}}',
        "0 unchanged, 1 not in the file (kept as they are)",
    ]


def list_to(cli: Cli, sim: ConnectSim, folder: Path, *flags: str) -> Any:
    return cli("mm2", "offsets", "list", "--connector", MM2, "--to", str(folder),
               "--connect-url", sim.url, *FAST_RETRIES, *flags)  # fmt: skip


def test_list_keeps_a_null_offset_and_names_its_partition_as_having_none(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    orders = connect.offsets(MM2)
    connect.set_offsets(MM2, [*orders, PAYMENTS_RESET])
    key = tmp_path / "east--west.MirrorSourceConnector.json"

    done = list_to(cli, connect, tmp_path)
    assert done.code == 0, done.err
    assert done.out.splitlines() == [
        f"offsets of connector {MM2} written to {key}",
        f"partition {PAYMENTS_KEY}: offset null: no offset (reset; Connect lists a partition so "
        "for a moment after resetting it)",
    ]
    # Connect's body as it is: null there is null in a PATCH too (see the round trip below).
    assert json.loads(key.read_text()) == body(*orders, PAYMENTS_RESET)

    done = list_to(cli, connect, tmp_path, "--output", "json")
    assert done.json == [
        {"connector": MM2, "written": str(key), "withOffset": 1,
         "reset": [PAYMENTS_RESET["partition"]]}
    ]  # fmt: skip
    connect.set_offsets(MM2, orders)
    done = list_to(cli, connect, tmp_path, "--output", "json")
    assert done.json[0]["withOffset"] == 1 and done.json[0]["reset"] == []
    assert list_to(cli, connect, tmp_path).out.splitlines() == [
        f"offsets of connector {MM2} written to {key}"
    ]


def test_a_null_offset_in_a_file_resets_that_partition_and_says_so(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker(topics=("orders", "payments"))
    orders = mirror_source_offset("east", "orders", 0, 42)
    assert connect.offsets(MM2) == [orders, PAYMENTS]
    write(tmp_path, body(PAYMENTS_RESET))

    dry = alter(cli, connect, tmp_path, "--dry-run", "--output", "json")
    assert dry.code == 0, dry.err
    (answer,) = dry.json
    assert answer["changes"] == [
        f'- {PAYMENTS_KEY}  {{"offset":42}} -> (none)',
        "0 unchanged, 1 not in the file (kept as they are)",
    ]
    assert answer["reset"] == [PAYMENTS["partition"]] and changes(connect) == []

    done = alter(cli, connect, tmp_path, "--stop")
    assert done.code == 0, done.err
    assert f"partition {PAYMENTS_KEY}: reset (offset null in the file)" in done.out.splitlines()
    assert [r.body for r in connect.calls("PATCH")] == [body(PAYMENTS_RESET)]  # sent as it is
    assert connect.offsets(MM2) == [orders]  # that partition alone has no offset now

    write(tmp_path, body({**orders, "offset": {"offset": 7}}))
    done = alter(cli, connect, tmp_path, "--output", "json")
    assert done.code == 0, done.err
    assert done.json[0]["reset"] == []  # nothing null, nothing reset
    assert "reset (offset null" not in done.out


def test_a_listing_with_a_null_offset_fed_back_to_alter_changes_nothing(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_mirror_maker()
    orders = connect.offsets(MM2)
    connect.set_offsets(MM2, [*orders, PAYMENTS_RESET])
    assert list_to(cli, connect, tmp_path).code == 0

    dry = alter(cli, connect, tmp_path, "--dry-run")
    assert dry.code == 0, dry.err
    assert dry.out.splitlines()[:2] == [
        f"  {PAYMENTS_KEY}  (none) -> (none): no offset, nothing to reset",
        "1 unchanged, 0 not in the file (kept as they are)",
    ]
    done = alter(cli, connect, tmp_path, "--stop")
    assert done.code == 0, done.err
    assert connect.offsets(MM2) == orders  # the partition still has none; the others as they were
