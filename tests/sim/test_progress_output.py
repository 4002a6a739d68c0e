"""Never silent, and each stream one whole thing: the installed `rollguard` in its own process.

stdout carries a command's result (the state, the plan, a roll's outcome, JSON objects with
`--output json`, and then an `{"error": ...}` object when it failed); stderr its progress and
log lines in `--log-format` (text: timestamped lines; json: one object a line), each retry
among them as it happens. See docs/operations.md, "Output: which stream carries what".
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from rollguard.peers.cluster import ProcessCluster
from rollguard.peers.harness import InventoryRoll

from helpers import Agent, Pki, free_port, inventory, rollguard, wait_until

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|ERROR) ")


def objects(text: str) -> list[dict[str, Any]]:
    """Every line of `text` as a JSON object (a line that is not one fails the test)."""
    return [json.loads(line) for line in text.splitlines()]


def at(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()


# ---- rollguard state ----------------------------------------------------------------------


def test_state_against_a_closed_port_says_each_retry_as_it_happens_and_ends_in_a_second(
    pki: Pki,
) -> None:
    url = f"https://127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = rollguard("state", *pki.client_flags(), url, "--log-format", "json")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    log = objects(done.stderr)  # every line of stderr a JSON object
    retries = [e for e in log if e["message"].startswith("retrying ")]
    assert [e["message"][:17] for e in retries] == ["retrying 2/3 in 0", "retrying 3/3 in 0"]
    assert all(e["level"] == "warning" for e in retries)
    assert all(f"agent-broker-state {url}/v1/broker-state: ConnectError: " in e["message"]
               for e in retries)  # fmt: skip
    # Two quick retries (a look, like curl), not a roll's five: from the first retry line to
    # the last line about a second; the whole command a few, Python's start included.
    assert at(log[-1]) - at(retries[0]) < 2.5, log
    assert took < 10, took  # it was 12 s, silent
    assert log[-1]["logger"] == "rollguard.failure" and "1 agent: 0 reported" in log[-1]["message"]
    assert "unavailable (no HTTP answer, unreachable)" in done.stdout


def test_state_shows_a_503_at_once_as_not_ready_with_its_reason_and_counts_it_apart(
    pki: Pki,
) -> None:
    with Agent(pki, f"127.0.0.1:{free_port()}") as agent:  # its JMX port is closed
        wait_until(lambda: "jmx-unreachable" in agent.state().body, timeout=20,
                   what="503 jmx-unreachable")  # fmt: skip
        done = rollguard("state", *pki.client_flags(), agent.api)
        as_json = rollguard("state", *pki.client_flags(), agent.api, "--output", "json")
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(f"{agent.api}/v1/broker-state  not ready (HTTP 503, "
                                  "jmx-unreachable): JMX at ")  # fmt: skip
    assert "retrying" not in done.stderr  # an answer: not asked five times
    assert (
        "1 agent: 0 reported, 1 answered not ready, 0 unavailable; agent-broker-state: 0 ok, "
        "1 answered not ready, 0 retries, 0 failed"
    ) in done.stderr
    answer, error = objects(as_json.stdout)
    assert (answer["status"], answer["error"]) == (503, "jmx-unreachable")
    assert error["error"]["kind"] == "failed" and error["error"]["exitCode"] == 1


# ---- failures as JSON ---------------------------------------------------------------------


def test_a_failure_under_output_json_is_one_error_object_on_stdout_and_a_line_on_stderr(
    pki: Pki,
) -> None:
    url = "https://127.0.0.1:1"
    bad = rollguard("state", *pki.client_flags(), url, "--output", "json",
                    "--retry-jitter-factor", "2")  # fmt: skip
    assert bad.returncode == 2
    assert objects(bad.stdout) == [{"error": {
        "kind": "config",
        "message": "--retry-jitter-factor 2 must be in [0, 1]",
        "exitCode": 2,
    }}]  # fmt: skip
    assert bad.stderr == "rollguard: --retry-jitter-factor 2 must be in [0, 1]\n"
    # the output format from its variable as well
    env = {"ROLLGUARD_OUTPUT": "json", "ROLLGUARD_RETRY_JITTER_FACTOR": "2"}
    from_env = rollguard("state", *pki.client_flags(), url, env=env)
    assert from_env.returncode == 2 and objects(from_env.stdout)[0]["error"]["kind"] == "config"
    # a usage error comes before the output format is known: plain, stdout empty
    usage = rollguard("state", *pki.client_flags(), url, "--output", "json", "--bogus")
    assert usage.returncode == 2 and usage.stdout == "" and "unrecognized" in usage.stderr


def test_plan_with_nothing_at_bootstrap_says_so_at_once_and_fails_as_a_json_error(
    pki: Pki, tmp_path: Path
) -> None:
    path = inventory(tmp_path / "inventory.yaml", [f"https://127.0.0.1:{free_port()}"], cluster="c")
    bootstrap = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = rollguard("plan", "--inventory", str(path), "--bootstrap", bootstrap,
                     *pki.client_flags(), "--on-agent-unreachable", "force", "--output", "json",
                     "--retry-max-retries", "1", "--retry-initial-backoff-ms", "10")  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert all(STAMP.match(line) for line in lines[:-1]), lines
    assert "plan: 1 node; asking Kafka at " + bootstrap in done.stderr
    retry = rf"WARNING retrying 2/2 in 1\dms: kafka-admin: Kafka Admin API at {bootstrap}: "
    assert re.search(retry + rf"{bootstrap} refused the connection\n", done.stderr)
    assert lines[-1].startswith("rollguard: plan failed: the Kafka Admin API cannot be reached")
    (error,) = objects(done.stdout)
    assert error["error"]["kind"] == "failed" and error["error"]["exitCode"] == 1
    assert error["error"]["message"].startswith("plan failed: ")
    assert took < 20, took  # 71 s, silent, before: six bootstrap timeouts of 10 s


def test_every_command_that_logs_takes_log_format() -> None:
    from rollguard.roller.cli import build_parser

    def leaves(parser: Any, path: str) -> list[tuple[str, Any]]:
        subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs:
            return [(path, parser)]
        return [leaf for name, child in subs[0].choices.items()
                for leaf in leaves(child, f"{path} {name}")]  # fmt: skip

    commands = leaves(build_parser(), "rollguard")
    assert {"rollguard roll", "rollguard plan", "rollguard state", "rollguard collect"} <= {
        name for name, _ in commands
    }
    missing = [name for name, parser in commands
               if not any("--log-format" in a.option_strings for a in parser._actions)]  # fmt: skip
    assert missing == []


# ---- a roll, redirected ----------------------------------------------------------------------


def test_a_redirected_roll_keeps_its_outcome_on_stdout_and_its_progress_on_stderr(
    pki: Pki, tmp_path: Path
) -> None:
    out, err, both = tmp_path / "roll.out", tmp_path / "progress.log", tmp_path / "roll.log"
    with ProcessCluster(pki, tmp_path) as cluster:
        target = InventoryRoll(cluster, tmp_path)
        # rollguard roll > roll.out 2> progress.log
        with out.open("w") as stdout, err.open("w") as stderr:
            first = subprocess.run(target.command(roll_id="r1"), stdout=stdout, stderr=stderr,
                                   timeout=240)  # fmt: skip
        assert first.returncode == 0, err.read_text()
        # rollguard roll --log-format json > roll.log 2>&1 (one node is enough to see it)
        with both.open("w") as stdout:
            command = target.command("roll", "--log-format", "json", "--only", "kafka-2",
                                     roll_id="r2")  # fmt: skip
            second = subprocess.run(command, stdout=stdout, stderr=subprocess.STDOUT, timeout=240)
        assert second.returncode == 0, both.read_text()

    # stdout: the outcome alone. The agents' 503s while their brokers restarted (if a poll
    # came then) are answers, counted apart: a normal roll does not end with "N failed".
    (outcome,) = out.read_text().splitlines()
    assert re.fullmatch(
        r"roll r1 completed: restarted 3 \(kafka-\d, kafka-\d, kafka-\d\), skipped 0; "
        r"agent-broker-state: \d+ ok, "
        r"(\d+ answered not ready, )?\d+ retries, 0 failed.*; journal and events in .+",
        outcome,
    ), outcome
    # stderr: timestamped lines, one per transition, no live table off a terminal, ending
    # with the outcome
    progress = err.read_text().splitlines()
    assert progress and all(STAMP.match(line) for line in progress), progress
    assert any(line.endswith(" INFO kafka-1: restarting") for line in progress)
    assert progress[-1].split(" INFO ", 1)[1] == outcome.split("; journal and events")[0]

    # one file for both: JSON log objects, and the outcome once (the result line, last)
    *logged, result = both.read_text().splitlines()
    entries = [json.loads(line) for line in logged]
    assert all(set(e) == {"time", "level", "logger", "message"} for e in entries)
    assert any(e["message"] == "kafka-2: restarting" for e in entries)
    assert not any("completed" in e["message"] for e in entries)
    assert result.startswith(
        "roll r2 completed: restarted 1 (kafka-2), skipped 2 (kafka-0, kafka-1: not named by "
        "--only); agent-broker-state: "
    ), result


# ---- the one place failures are told (in-process) -------------------------------------------


def test_run_command_tells_every_failure_once_as_json(capsys: Any) -> None:
    from rollguard.shared.cli import report_failure, run_command
    from rollguard.shared.errors import ConfigError, RollguardError

    def raises(error: Exception) -> Any:
        def command() -> int:
            raise error

        return command

    assert run_command(raises(ConfigError("--x: bad")), json_output=True) == 2
    assert run_command(raises(RollguardError("peer down")), json_output=True) == 1
    # a command that said why itself is not told twice; one that did not still leaves an object
    assert run_command(lambda: report_failure("half", 1, json_output=True), json_output=True) == 1
    assert run_command(lambda: 4, json_output=True) == 4
    assert run_command(lambda: 3, json_output=True) == 3  # interrupted: not a failure
    assert run_command(lambda: 1, json_output=False) == 1
    errors = [e["error"] for e in objects(capsys.readouterr().out)]
    assert errors == [
        {"kind": "config", "message": "--x: bad", "exitCode": 2},
        {"kind": "failed", "message": "peer down", "exitCode": 1},
        {"kind": "failed", "message": "half", "exitCode": 1},
        {"kind": "failed", "exitCode": 4,
         "message": "the command failed with exit code 4; its reason is on stderr"},
    ]  # fmt: skip
