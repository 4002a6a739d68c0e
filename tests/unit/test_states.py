from __future__ import annotations

import pytest

from rollguard.shared.states import BrokerState


def test_states_carry_kafkas_numbers() -> None:
    assert {s.name: int(s) for s in BrokerState} == {
        "NOT_RUNNING": 0, "STARTING": 1, "RECOVERY": 2, "RUNNING": 3,
        "PENDING_CONTROLLED_SHUTDOWN": 6, "SHUTTING_DOWN": 7, "UNKNOWN": 127,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("state", "ready"),
    [(0, False), (1, False), (2, False), (3, True), (6, True), (7, True), (127, False)],
)
def test_ready_means_running_or_later_but_not_unknown(state: int, ready: bool) -> None:
    assert BrokerState(state).is_ready is ready


@pytest.mark.parametrize(("value", "state"), [("2", 2), (" 3 ", 3), (127, 127), (0, 0)])
def test_parse_reads_jmx_bytes_as_strings_and_json_numbers(value: object, state: int) -> None:
    assert BrokerState.parse(value) is BrokerState(state)


@pytest.mark.parametrize("value", ["banana", "", 4, 128, -1, 2.0, True, None, [2]])
def test_parse_refuses_anything_that_is_not_one_of_kafkas_states(value: object) -> None:
    with pytest.raises(ValueError, match="broker state"):
        BrokerState.parse(value)
