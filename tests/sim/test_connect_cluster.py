"""Cluster-wide Connect operations and the CLI base (issue 17 item 4, issue 15 item 4): status as a
check, restart of everything FAILED, --wait, retries of 409, one-line errors for answers that are
not Connect's JSON, --output json, and the ROLLGUARD_CONNECT_ variables."""
# ruff: noqa: F811 (pytest fixtures imported from test_connect_support, taken as arguments)

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import pytest
from test_connect_support import FAST_RETRIES, Cli, changes, cli, connect  # noqa: F401

from rollguard.peers.connect import PROXY_PAGE, ConnectSim, State
from rollguard.peers.processes import wait_until
from rollguard.roller.connect import cli as connect_cli
from rollguard.roller.connect.client import ConnectorStatus
from rollguard.roller.connect.operations import WaitTimeout, is_stopped, wait_for

from helpers import rollguard


def test_status_is_a_table_or_json_and_exit_1_when_anything_failed(
    connect: ConnectSim, cli: Cli
) -> None:
    connect.add_connector("sink", tasks=2, task_states=["RUNNING", "FAILED"])
    connect.add_connector("source", tasks=1)
    done = cli("connect", "status", "--connect-url", connect.url)
    assert done.code == 1
    lines = done.out.splitlines()
    assert lines[0].split() == ["CONNECTOR", "TYPE", "STATE", "WORKER"]
    assert lines[1].split()[:3] == ["sink", "source", "RUNNING"]
    assert lines[3].split()[:4] == ["task", "1", "FAILED", "connect-0.connect:8083"]
    assert "ConnectException: simulated failure" in lines[3]
    assert "2 connectors, 1 with something FAILED: sink" in done.err
    as_json = cli("connect", "status", "source", "--output", "json", "--connect-url", connect.url)
    assert as_json.code == 0
    (entry,) = as_json.json
    assert entry["name"] == "source" and entry["failed"] is False
    assert entry["tasks"] == [{"id": 0, "state": "RUNNING", "worker_id": "connect-1.connect:8083"}]
    missing = cli("connect", "status", "nope", "--connect-url", connect.url)
    assert missing.code == 4 and "no connector nope" in missing.err


def test_restart_all_failed_reads_the_status_once_and_reports_each(
    connect: ConnectSim, cli: Cli
) -> None:
    connect.add_connector("a", tasks=2, task_states=["FAILED", "RUNNING"])
    connect.add_connector("b", tasks=1, state=State.FAILED)
    connect.add_connector("ok", tasks=1)
    done = cli("connect", "restart", "--all-failed", "--output", "json", "--connect-url",
               connect.url)  # fmt: skip
    assert done.code == 0, done.err
    reports = done.json
    assert [r["connector"] for r in reports] == ["a", "b"]
    assert reports[0]["states"]["tasks"][0]["state"] == "RESTARTING"
    assert len(connect.calls("GET", "/connectors")) == 1
    assert changes(connect) == ["POST /connectors/a/restart", "POST /connectors/b/restart"]
    # Without --wait the command returns with the restarts asked; a worker still shows the old
    # FAILED for 10-50 ms after its 202 (the peer too): until both have started again.
    wait_until(
        lambda: State.FAILED not in (connect.state("a", 0), connect.state("b")),
        5,
        what="a's task 0 and b restarted",
    )
    again = cli("connect", "restart", "--all-failed", "--connect-url", connect.url)
    assert again.code == 0 and "nothing is FAILED: nothing restarted" in again.out
    both = cli("connect", "restart", "a", "--all-failed", "--connect-url", connect.url)
    assert both.code == 2 and "give CONNECTOR or --all-failed, not both" in both.err


def test_restart_wait_times_out_naming_the_state(connect: ConnectSim, cli: Cli) -> None:
    connect.add_connector("sink", tasks=1, task_states=["FAILED"])
    connect.set_delays(restart=30)
    done = cli("connect", "restart", "sink", "--include-tasks", "--wait", "--wait-timeout",
               "300ms", "--connect-url", connect.url)  # fmt: skip
    assert done.code == 1
    assert "connector sink is not settled after 300ms: sink: connector RESTARTING" in done.err


def test_every_call_rides_out_a_short_rebalance(connect: ConnectSim, cli: Cli) -> None:
    connect.add_connector("sink", tasks=1, task_states=["FAILED"])
    connect.start_rebalance(requests=2)
    done = cli("connect", "restart", "sink", "--include-tasks", "--connect-url", connect.url,
               *FAST_RETRIES)  # fmt: skip
    assert done.code == 0, done.err
    assert [r.status for r in connect.calls("POST")] == [409, 409, 202]
    stale = '{"error_code":409,"message":"rebalance"}'
    connect.answer_next(2, status=409, body=stale, content_type="application/json")
    status = cli("connect", "status", "--connect-url", connect.url, *FAST_RETRIES)
    assert status.code in (0, 1) and len(connect.calls("GET", "/connectors")) == 3


def test_a_request_forwarded_to_a_leader_that_is_gone_is_retried(
    connect: ConnectSim, cli: Cli
) -> None:
    # A real 4.3.1 worker's answer while the group's leader has crashed
    # (tests/real/test_real_connect.py)
    gone = json.dumps({"error_code": 500, "message": "IO Error trying to forward REST request: "
                       "java.net.ConnectException: Connection refused"})  # fmt: skip
    connect.add_connector("sink", tasks=1, state=State.PAUSED)
    connect.answer_next(2, status=500, body=gone, content_type="application/json")
    done = cli("connect", "resume", "sink", "--connect-url", connect.url, *FAST_RETRIES)
    assert done.code == 0, done.err
    assert [r.status for r in connect.calls("PUT")] == [500, 500, 202]  # asked three times
    # Any other 500 is an answer, not retried.
    connect.answer_next(1, status=500, body='{"error_code":500,"message":"Request timed out"}',
                        content_type="application/json")  # fmt: skip
    done = cli("connect", "resume", "sink", "--connect-url", connect.url, *FAST_RETRIES)
    assert done.code == 1 and "HTTP 500: Request timed out" in done.err


def test_a_proxy_page_or_a_strange_body_is_one_line_naming_url_and_status(
    connect: ConnectSim, cli: Cli
) -> None:
    connect.add_connector("sink")
    connect.answer_next(1)  # nginx's 502 page
    done = cli("connect", "status", "--connect-url", connect.url)
    assert done.code == 1
    assert done.err.count("\n") == 1 and "Traceback" not in done.err
    assert f"GET {connect.url}/connectors?expand=status: HTTP 502: the answer is not JSON" in (
        done.err
    )
    assert "502 Bad Gateway" in done.err and PROXY_PAGE not in done.err
    connect.answer_next(1, status=200, body=PROXY_PAGE)
    page = cli("connect", "stop", "sink", "--connect-url", connect.url)
    assert page.code == 1 and f"GET {connect.url}/: HTTP 200: the answer is not JSON" in page.err
    # the resume's 200 is as good as Connect's; the status after it is not a status
    connect.answer_next(2, status=200, body='{"name": 1}', content_type="application/json")
    odd = cli("connect", "resume", "sink", "--connect-url", connect.url)
    assert odd.code == 1
    assert "/connectors/sink/status: HTTP 200: an answer this client cannot read" in odd.err


def test_the_watcher_reports_a_proxy_page_without_a_traceback(
    connect: ConnectSim, tmp_path: Path
) -> None:
    connect.add_connector("sink")
    connect.answer_next(1)
    done = rollguard("connect", "auto-restart", "--once", "--connect-url", connect.url,
                     "--state-file", str(tmp_path / "s.json"))  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "HTTP 502: the answer is not JSON (text/html" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_stop_and_resume_print_json(connect: ConnectSim, cli: Cli) -> None:
    connect.add_connector("sink", tasks=1)
    done = cli("connect", "stop", "sink", "--wait", "--output", "json", "--connect-url",
               connect.url)  # fmt: skip
    assert done.code == 0
    (answer,) = done.json
    assert answer["action"] == "stop" and answer["states"]["connector"]["state"] == "STOPPED"


# ---- the variables ------------------------------------------------------------------------


def test_variables_have_the_tools_prefix_and_the_old_names_warn(
    connect: ConnectSim, cli: Cli, tmp_path: Path
) -> None:
    connect.add_connector("sink")
    new = cli("connect", "status", env={"ROLLGUARD_CONNECT_URL": connect.url,
                                        "ROLLGUARD_CONNECT_TIMEOUT": "5s"})  # fmt: skip
    assert new.code == 0, new.err
    assert "deprecated" not in new.err
    old = cli("connect", "status", env={"ROLLGUARD_CONNECT_URL": connect.url,
                                        "ROLLGUARD_TIMEOUT": "5s"})  # fmt: skip
    assert old.code == 0
    assert "ROLLGUARD_TIMEOUT is deprecated; use ROLLGUARD_CONNECT_TIMEOUT" in old.err
    bad = cli("connect", "status", env={"ROLLGUARD_CONNECT_URL": connect.url,
                                        "ROLLGUARD_CONNECT_TIMEOUT": "soon",
                                        "ROLLGUARD_TIMEOUT": "5s"})  # fmt: skip
    assert bad.code == 2 and "ROLLGUARD_CONNECT_TIMEOUT: 'soon' is not a duration" in bad.err
    # the agents' CA for the roll is not Connect's
    ca = tmp_path / "missing-ca.pem"
    clash = cli("connect", "status", env={"ROLLGUARD_CONNECT_URL": connect.url,
                                          "ROLLGUARD_CONNECT_CACERT": str(ca)})  # fmt: skip
    assert clash.code == 2 and "missing-ca.pem" in clash.err
    help_text = rollguard("connect", "status", "--help").stdout
    assert "env ROLLGUARD_CONNECT_URL" in help_text and "env ROLLGUARD_CONNECT_CACERT" in help_text


def test_the_password_variable_still_works(cli: Cli) -> None:
    with ConnectSim(basic_auth=("ops", "s3cret")) as sim:
        env = {"ROLLGUARD_CONNECT_URL": sim.url, "ROLLGUARD_CONNECT_PASSWORD": "s3cret"}
        assert cli("connect", "status", "--user", "ops", env=env).code == 0
        denied = cli("connect", "status", "--user", "ops",
                     env={**env, "ROLLGUARD_CONNECT_PASSWORD": "wrong"})  # fmt: skip
        assert denied.code == 1 and "HTTP 401" in denied.err and "wrong" not in denied.err


def test_every_sub_command_has_an_example() -> None:
    from rollguard.roller.cli import build_parser

    parser = build_parser()
    commands = [["connect", c] for c in ("status", "restart", "stop", "resume", "auto-restart")]
    commands += [[tool, "offsets", verb] for tool in ("connect", "mm2")
                 for verb in ("list", "alter", "reset")]  # fmt: skip
    for argv in commands:
        current = parser
        for word in argv:
            sub = next(a for a in current._actions if hasattr(a, "choices") and a.choices)
            current = sub.choices[word]  # type: ignore[index]
        assert "Example:\n  rollguard " in (current.description or ""), argv
    assert json.dumps([f.name for f in connect_cli.OFFSETS_FLAGS]).count('"from"') == 1


def test_waiting_polls_on_the_injected_clock_and_stops_at_the_deadline() -> None:
    """wait_for's timing, exact and without sleeping: a stop that shows STOPPED at the 3rd read,
    and one that never does (a 1 s deadline, 0.25 s polls: 5 reads, then WaitTimeout)."""

    class Fake:
        def __init__(self, states: list[str]) -> None:
            self.states, self.reads, self.now = states, 0, 0.0

        async def status(self, name: str) -> ConnectorStatus:
            self.reads += 1
            return ConnectorStatus(name, self.states[min(self.reads, len(self.states)) - 1])

        async def sleep(self, seconds: float) -> None:
            self.now += seconds

    def wait(fake: Fake) -> ConnectorStatus:
        return asyncio.run(wait_for(cast(Any, fake), "c", is_stopped, "STOPPED", timeout=1.0,
                                    clock=lambda: fake.now, sleep=fake.sleep))  # fmt: skip

    soon = Fake(["RUNNING", "RUNNING", "STOPPED"])
    assert wait(soon).state == "STOPPED" and soon.reads == 3 and soon.now == 0.5
    never = Fake(["RUNNING"])
    with pytest.raises(WaitTimeout, match="connector c is not STOPPED after 1s: c: connector RUN"):
        wait(never)
    assert never.reads == 5 and never.now == 1.0
