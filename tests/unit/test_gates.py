"""The Prometheus and consumer-lag gates, in process: PrometheusGate against httpx's
MockTransport answering as Prometheus' query API does, ConsumerLagGate with a fake lag reader,
and `--gate-consumer-lag`'s GROUP=MAX parsing. The real servers: tests/real/test_gates_real.py."""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from rollguard.roller.kafka_admin import AdminApiError, KafkaObserver, LagUnknown
from rollguard.roller.options import ENV_PREFIX
from rollguard.roller.roll.cli.gates import (
    PROMETHEUS_TIMEOUT,
    close_gates,
    gates_from,
    roll_canary,
)
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.gates.keeper import Closed, GateKind, Gates
from rollguard.roller.roll.gates.lag import MAX_LAG, ConsumerLagGate, LagLimit, lag_limit
from rollguard.roller.roll.gates.prometheus import PrometheusGate
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.errors import ConfigError

URL = "http://prometheus.example:9090"
QUERY = 'ALERTS{alertstate="firing",rollguard="hold"}'


def alert(name: str, **labels: str) -> dict[str, Any]:
    metric = {"__name__": "ALERTS", "alertname": name, "alertstate": "firing", **labels}
    return {"metric": metric, "value": [1764000000.0, "1"]}


def success(kind: str, result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


def check(
    answer: Callable[[httpx.Request], httpx.Response],
    seen: list[httpx.Request] | None = None,
    url: str = URL,
) -> Closed | None:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return answer(request)

    async def run() -> Closed | None:
        gate = PrometheusGate(url, QUERY, timeout=5, transport=httpx.MockTransport(handler))
        try:
            return await gate.check()
        finally:
            await gate.aclose()

    return asyncio.run(run())


def answering(body: Any, status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body)


def failing(
    error: type[httpx.TransportError], said: str, cause: OSError | None = None
) -> Callable[[httpx.Request], httpx.Response]:
    """A request that fails as httpx says it does: `error` saying `said`, over the socket's
    `cause` if any."""

    def fail(request: httpx.Request) -> httpx.Response:
        raise error(said, request=request) from cause

    return fail


# ---- Prometheus ----------------------------------------------------------------------------


def test_an_empty_vector_opens_the_gate_and_the_query_is_asked_as_an_instant_query() -> None:
    seen: list[httpx.Request] = []
    assert check(answering(success("vector", [])), seen) is None
    (request,) = seen
    assert request.method == "GET" and request.url.path == "/api/v1/query"
    assert request.url.params["query"] == QUERY
    assert 0 < float(request.url.params["timeout"]) < 5  # Prometheus gives up before we do


def test_a_firing_alert_closes_the_gate_naming_the_query_the_count_and_its_labels() -> None:
    closed = check(answering(success("vector", [alert("BrokerDown", rollguard="hold")])))
    assert closed is not None
    assert closed.kind == GateKind.PROMETHEUS and closed.name == QUERY and closed.budgeted
    assert closed.deficit == 1
    assert closed.reason == (
        f'query {QUERY} returns 1 series: {{alertname="BrokerDown", alertstate="firing", '
        'rollguard="hold"}'
    )


def test_the_deficit_counts_every_series_and_the_reason_lists_three() -> None:
    series = [alert(f"Alert{n}") for n in range(5)]
    closed = check(answering(success("vector", series)))
    assert closed is not None and closed.deficit == 5
    assert "returns 5 series: " in closed.reason and "and 2 more" in closed.reason
    assert "Alert2" in closed.reason and "Alert3" not in closed.reason
    assert "__name__" not in closed.reason


def test_a_matrix_counts_its_series_too() -> None:
    series = [{"metric": {"job": "kafka"}, "values": [[1764000000.0, "1"]]}]
    closed = check(answering(success("matrix", series)))
    assert closed is not None and closed.deficit == 1 and '{job="kafka"}' in closed.reason


@pytest.mark.parametrize(("kind", "result"), [("scalar", [1764000000.0, "0"]),
                                              ("string", [1764000000.0, "x"])])  # fmt: skip
def test_a_scalar_or_string_result_is_a_configuration_mistake_that_holds_the_roll(
    kind: str, result: Any
) -> None:
    closed = check(answering(success(kind, result)))
    assert closed is not None and closed.deficit == 1
    assert closed.reason.startswith(f"query {QUERY} returns a {kind} result: ")
    assert "must return series" in closed.reason


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        pytest.param(answering({"status": "error", "errorType": "bad_data",
                                "error": "1:8: parse error: unexpected"}, 400),
                     "HTTP 400, bad_data: 1:8: parse error: unexpected", id="its own error"),
        pytest.param(lambda request: httpx.Response(500, text="<html>Internal Server Error</html>"),
                     "HTTP 500, not Prometheus' JSON", id="an HTTP error without its JSON"),
        pytest.param(lambda request: httpx.Response(200, text="OK"),
                     "its answer, not Prometheus' JSON", id="a success that is not JSON"),
        # as httpx raises them: its own words over the socket's error
        pytest.param(failing(httpx.ConnectError, "All connection attempts failed",
                             ConnectionRefusedError(111, "Connect call failed ('10.0.0.9', 9090)")),
                     "cannot connect: connection refused", id="refused: in a few words"),
        pytest.param(failing(httpx.ConnectError, "Name or service not known",
                             socket.gaierror(-2, "Name or service not known")),
                     "cannot connect: does not resolve (Name or service not known)",
                     id="a name that does not resolve"),
        pytest.param(failing(httpx.RemoteProtocolError,
                             "Server disconnected without sending a response."),
                     "Server disconnected without sending a response.",
                     id="another error: httpx's own words"),
        pytest.param(failing(httpx.ReadTimeout, "timed out"), "no answer within 5 s",
                     id="silent: after the timeout"),
    ],
)  # fmt: skip
def test_a_prometheus_that_cannot_be_read_closes_the_gate_saying_why(
    answer: Callable[[httpx.Request], httpx.Response], said: str
) -> None:
    closed = check(answer)
    assert closed is not None and closed.deficit == 1
    assert closed.reason == f"Prometheus at {URL} cannot be read: {said}"


def test_a_token_in_the_url_query_string_is_never_shown() -> None:
    closed = check(
        failing(httpx.ConnectError, "refused"), url="https://prometheus.example/?token=s3cret"
    )
    assert closed is not None and "s3cret" not in closed.reason
    assert "Prometheus at https://prometheus.example/ cannot be read" in closed.reason


def test_a_path_prefix_and_a_query_string_in_the_url_are_kept() -> None:
    seen: list[httpx.Request] = []
    url = "https://proxy.example/prometheus/?tenant=a"
    assert check(answering(success("vector", [])), seen, url) is None
    (request,) = seen
    assert request.url.path == "/prometheus/api/v1/query"
    assert request.url.params["tenant"] == "a" and request.url.params["query"] == QUERY


def test_one_client_serves_every_check_until_closed() -> None:
    answers = iter([success("vector", [alert("A")]), success("vector", [])])

    async def run() -> tuple[Closed | None, Closed | None, bool]:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, json=next(answers)))
        gate = PrometheusGate(URL, QUERY, timeout=5, transport=transport)
        first = await gate.check()
        client = gate._http
        second = await gate.check()
        same = gate._http is client and client is not None
        await close_gates(Gates((gate,)))
        assert client is not None and client.is_closed and gate._http is None
        return first, second, same

    first, second, same = asyncio.run(run())
    assert first is not None and first.deficit == 1 and second is None and same


# ---- consumer lag --------------------------------------------------------------------------


def lag_gate(name: str, max_lag: int, read: Callable[[str], int]) -> Closed | None:
    async def reader(group: str) -> int:
        assert group == name
        return read(group)

    return asyncio.run(ConsumerLagGate(LagLimit(name, max_lag), reader).check())


@pytest.mark.parametrize("lag", [0, 999, 1000])
def test_a_group_within_its_max_lag_opens_the_gate(lag: int) -> None:
    assert lag_gate("orders-app", 1000, lambda group: lag) is None


def test_a_group_lagging_more_than_its_max_closes_the_gate_with_the_lag_above_max() -> None:
    closed = lag_gate("orders-app", 1000, lambda group: 12345)
    assert closed == Closed(
        GateKind.CONSUMER_LAG,
        "orders-app",
        "consumer group orders-app lags 12,345 messages (more than 1,000)",
        deficit=11345,
    )
    assert closed.budgeted


REFUSED = "Kafka Admin API at 127.0.0.1:9092: 127.0.0.1:9092 refused the connection"
UNKNOWN = "no committed offsets (an unknown group, or one that never committed)"


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (AdminApiError(REFUSED), f"the lag of consumer group orders-app cannot be read: {REFUSED}"),
        (LagUnknown(UNKNOWN), f"the lag of consumer group orders-app cannot be read: {UNKNOWN}"),
    ],
)
def test_a_lag_that_cannot_be_read_closes_the_gate_saying_why(error: Exception, said: str) -> None:
    def fail(group: str) -> int:
        raise error

    closed = lag_gate("orders-app", 1000, fail)
    assert closed is not None and closed.reason == said and closed.deficit == 1


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("orders-app=1000", LagLimit("orders-app", 1000)),
        (" orders-app = 0 ", LagLimit("orders-app", 0)),
        ("team=a=5", LagLimit("team=a", 5)),  # the last = splits: a group id may hold one
        (f"g={MAX_LAG}", LagLimit("g", MAX_LAG)),
    ],
)
def test_group_equals_max_parses(text: str, limit: LagLimit) -> None:
    assert lag_limit(text) == limit
    assert str(limit) == f"{limit.group}={limit.max_lag}"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("orders-app", "give GROUP=MAX"),
        ("=1000", "give GROUP=MAX"),
        ("orders-app=", "MAX is a whole number"),
        ("orders-app=-1", "MAX is a whole number"),
        ("orders-app=1e3", "MAX is a whole number"),
        ("orders-app=١٢", "MAX is a whole number"),  # digits, but not ASCII ones
        (f"orders-app={MAX_LAG + 1}", "MAX is a whole number"),
    ],
)
def test_a_bad_group_equals_max_is_refused_naming_the_syntax(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as error:
        lag_limit(text)
    assert repr(text) in str(error.value)


# ---- from the options ----------------------------------------------------------------------


def options(*flags: str) -> RollOptions:
    """`rollguard roll`'s options from its flags, as the command line gives them."""
    parser = argparse.ArgumentParser()
    RollOptions.add_flags(parser, ENV_PREFIX, command="roll")
    args = parser.parse_args(
        ["--inventory", "nodes.yaml", "--bootstrap", "127.0.0.1:9092", "--cert", "roller.crt",
         "--key", "roller.key", "--cacert", "ca.crt", *flags]
    )  # fmt: skip
    return RollOptions.load(args, {}, ENV_PREFIX, command="roll")


async def no_lag(group: str) -> int:
    return 0


def test_the_options_make_a_prometheus_gate_per_query_then_a_lag_gate_per_group() -> None:
    made = gates_from(
        options(
            "--gate-prometheus", URL, "--gate-query", "up == 0", "--gate-query", QUERY,
            "--gate-consumer-lag", "a=1", "--gate-consumer-lag", "b=2",
        ),
        no_lag,
    )  # fmt: skip
    assert [(g.kind, g.name) for g in made.gates] == [
        (GateKind.PROMETHEUS, "up == 0"),
        (GateKind.PROMETHEUS, QUERY),
        (GateKind.CONSUMER_LAG, "a"),
        (GateKind.CONSUMER_LAG, "b"),
    ]
    prometheus = made.gates[0]
    assert isinstance(prometheus, PrometheusGate) and prometheus.timeout == PROMETHEUS_TIMEOUT
    asyncio.run(close_gates(made))


def test_a_short_operation_timeout_bounds_a_prometheus_query() -> None:
    made = gates_from(
        options("--gate-prometheus", URL, "--gate-query", QUERY, "--operation-timeout", "2s"),
        no_lag,
    )
    (gate,) = made.gates
    assert isinstance(gate, PrometheusGate) and gate.timeout == 2.0


def test_no_gate_option_makes_no_gate() -> None:
    assert not gates_from(options(), no_lag)


def test_the_canary_s_gate_comes_last_with_its_window_and_bound() -> None:
    given = options("--canary", "rollguard-canary", "--canary-max-p99", "250ms", "--window",
                    "Mon-Sun 00:00-23:59 UTC", "--canary-window", "30s")  # fmt: skip
    events = EventLog(None, "r1")
    canary = roll_canary(given, KafkaObserver("127.0.0.1:9092"), events)
    assert canary is not None and (canary.window, canary.max_p99) == (30.0, 0.25)
    made = gates_from(given, no_lag, canary=canary)
    assert [(g.kind, g.name) for g in made.gates] == [
        (GateKind.WINDOW, "Mon-Sun 00:00-23:59 UTC"),
        (GateKind.CANARY, "rollguard-canary"),
    ]
    default = roll_canary(options("--canary", "c"), KafkaObserver("127.0.0.1:9092"), events)
    assert default is not None and (default.window, default.max_p99) == (10.0, None)
    assert roll_canary(options(), KafkaObserver("127.0.0.1:9092"), events) is None


def test_a_p99_bound_without_a_canary_is_refused() -> None:
    with pytest.raises(ConfigError, match="--canary-max-p99 needs --canary TOPIC"):
        options("--canary-max-p99", "250ms").check()
