"""Restart and health commands (`rollguard.roller.host_commands`) with real processes: exit
codes and output, a log file instead of pipes, the time limit enforced on the whole process
group, and a command that outlives the roller (cancelled, or killed with its pipes)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rollguard.roller.host_commands import CommandError, CommandResult, CommandTimeout, run_command

from helpers import ROOT, wait_until

ENV = {"PATH": os.environ["PATH"]}


def members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, read from /proc independently of the
    module under test."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _, pgrp = stat[stat.rfind(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def run(
    command: str, log: Path, *, timeout: float = 30, what: str = "command", kill_grace: float = 5
) -> CommandResult:
    return asyncio.run(
        run_command(
            command,
            env=ENV,
            timeout=timeout,
            log_path=log,
            name="kafka-0",
            what=what,
            kill_grace=kill_grace,
        )
    )


async def until(probe: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    ("command", "code", "last", "described"),
    [
        ("true", 0, "", "exited 0 (no output)"),
        ("echo starting; exit 3", 3, "starting", "exited 3: starting"),
        ("echo out; echo 'err line' >&2", 0, "err line", "exited 0: err line"),
        ("echo bye; echo; printf '  \\n'", 0, "bye", "exited 0: bye"),
        ("echo about to die; kill -KILL $$", -9, "about to die", "killed by SIGKILL: about to die"),
    ],
)
def test_exit_codes_and_the_last_output_line_are_reported(
    tmp_path: Path, command: str, code: int, last: str, described: str
) -> None:
    result = run(command, tmp_path / "commands.log")
    assert (result.exit_code, result.last_line, result.ok) == (code, last, code == 0)
    assert result.describe() == described


def test_output_goes_to_the_log_with_a_header_per_run(tmp_path: Path) -> None:
    log = tmp_path / "state" / "commands-r1.log"
    first = run("echo first run", log)
    second = run("echo second run; exit 4", log, what="restart command")
    lines = log.read_text().splitlines()
    assert len(lines) == 6, lines
    assert lines[0].startswith("### rollguard 20") and lines[0].endswith(
        " kafka-0 command: echo first run"
    )
    assert lines[1] == "first run"
    assert "kafka-0 command: exited 0: first run after" in lines[2]
    assert lines[3].endswith(" kafka-0 restart command: echo second run; exit 4")
    assert lines[4] == "second run"
    assert "exited 4: second run" in lines[5]
    assert (first.last_line, second.last_line) == ("first run", "second run")
    assert log.stat().st_mode & 0o777 == 0o600  # commands may carry host names and paths


def test_the_environment_is_exactly_the_one_given(tmp_path: Path) -> None:
    result = asyncio.run(
        run_command(
            'echo "[$ROLLGUARD_NODE_NAME][${HOME-unset}]"',
            env={**ENV, "ROLLGUARD_NODE_NAME": "kafka-0"},
            timeout=30,
            log_path=tmp_path / "log",
            name="kafka-0",
        )
    )
    assert result.last_line == "[kafka-0][unset]"


def test_stdin_is_dev_null_so_a_reading_command_does_not_wait(tmp_path: Path) -> None:
    result = run("cat; readlink /proc/$$/fd/0", tmp_path / "log", timeout=10)
    assert result.ok and result.last_line == "/dev/null"


def test_a_background_child_does_not_keep_the_roller_waiting(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("sleep 777 & echo spawned $!", tmp_path / "log", timeout=20)
    elapsed = time.monotonic() - started
    try:
        assert result.ok and result.last_line.startswith("spawned ")
        assert elapsed < 5, f"the roller waited {elapsed:.1f}s for a background child"
        assert members(result.pid), "the background child should still run, in the group"
    finally:
        os.killpg(result.pid, signal.SIGKILL)
    wait_until(lambda: not members(result.pid), timeout=10, what="the child to go")


def test_the_whole_process_group_is_killed_at_the_timeout(tmp_path: Path) -> None:
    log = tmp_path / "log"
    command = f"echo $$ > {tmp_path}/pgid; echo started; sleep 777 & sleep 777"
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as raised:
        run(command, log, timeout=0.5, what="restart command")
    elapsed = time.monotonic() - started
    pgid = int((tmp_path / "pgid").read_text())
    assert members(pgid) == []  # both sleeps and the shell, not just the shell
    message = str(raised.value)
    assert message.startswith("restart command for kafka-0 did not finish within 0.5s")
    assert f"process group {pgid} was killed" in message and "started" in message
    assert 0.5 <= elapsed < 5
    text = log.read_text()
    assert "started\n" in text and "killed after 0.5s" in text


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    command = f"trap '' TERM; echo $$ > {tmp_path}/pgid; sleep 777 & sleep 777"
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        run(command, tmp_path / "log", timeout=0.3, kill_grace=0.6)
    elapsed = time.monotonic() - started
    assert members(int((tmp_path / "pgid").read_text())) == []
    assert 0.9 <= elapsed < 6  # SIGTERM was ignored: SIGKILL came after the grace


def test_a_cancelled_wait_leaves_the_command_running_to_its_end(tmp_path: Path) -> None:
    log = tmp_path / "log"
    command = (
        f"cd {tmp_path}; echo $$ > started; while [ ! -e go ]; do sleep 0.02; done; "
        "echo finished after all; touch done"
    )

    async def interrupted_roller() -> None:
        task = asyncio.create_task(
            run_command(command, env=ENV, timeout=60, log_path=log, name="kafka-0")
        )
        await until(lambda: (tmp_path / "started").exists())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted_roller())
    pid = int(wait_until(lambda: (tmp_path / "started").read_text().strip(), 5, what="pid"))
    assert members(pid), "cancelling the roller's wait must not kill the command"
    (tmp_path / "go").touch()
    wait_until(lambda: (tmp_path / "done").exists(), timeout=10, what="the command to finish")
    # Reaped by the module's thread: no zombie left behind in a long-lived roller.
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout=10, what="the command reaped")
    text = log.read_text()
    assert "left running, the roller stopped" in text and "finished after all" in text


ROLLER = """
import asyncio, os, sys
from pathlib import Path
from rollguard.roller.host_commands import run_command
asyncio.run(run_command(sys.argv[1], env=dict(os.environ), timeout=60, log_path=Path(sys.argv[2]),
                        name="kafka-0", what="restart command"))
"""


def test_a_command_outlives_a_roller_killed_with_its_pipes(tmp_path: Path) -> None:
    """The roller's process group is killed and its pipes closed while the command runs; the
    command (in its own session, writing to the log, not a pipe) finishes its work."""
    log = tmp_path / "commands.log"
    command = (
        "echo $$ > started; echo before; while [ ! -e go ]; do sleep 0.02; done; "
        "echo written after the roller died; touch done"
    )
    roller = subprocess.Popen(
        [sys.executable, "-c", ROLLER, command, str(log)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until(lambda: (tmp_path / "started").exists(), timeout=20, what="the command")
        os.killpg(roller.pid, signal.SIGKILL)  # the roller and everything in its group
        out, err = roller.communicate(timeout=10)  # reads to EOF and closes the pipes
    finally:
        if roller.poll() is None:
            roller.kill()
            roller.wait()
    pid = int((tmp_path / "started").read_text())
    assert members(pid), f"the command died with the roller: {err.decode()}"
    (tmp_path / "go").touch()
    wait_until(lambda: (tmp_path / "done").exists(), timeout=10, what="the command to finish")
    assert "written after the roller died" in log.read_text()
    assert b"before" not in out  # the command never wrote to the roller's pipes
    wait_until(lambda: not members(pid), timeout=10, what="the command to end")


def test_a_log_that_cannot_be_written_is_a_command_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(CommandError, match=r"^command for kafka-0: cannot write its log .*file"):
        run("true", tmp_path / "file" / "commands.log")


def test_a_timeout_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        run("true", tmp_path / "log", timeout=0)


def test_an_upgrade_runs_the_install_command_then_the_restart_each_told_the_version(
    tmp_path: Path,
) -> None:
    from rollguard.roller.inventory import InventoryNode
    from rollguard.roller.model import Node, Role
    from rollguard.roller.platform import InventoryPlatform, RestartError

    said = tmp_path / "said"
    node = Node(3, "kafka-3", frozenset({Role.BROKER}), "https://kafka-3:8443")

    def platform(install: str) -> InventoryPlatform:
        restart = f'echo "restart $ROLLGUARD_NODE_NAME ${{ROLLGUARD_KAFKA_VERSION-none}}" >> {said}'
        entry = InventoryNode(node, restart, install=install)
        return InventoryPlatform([entry], agents=None, folder=tmp_path, roll_id="u1")  # type: ignore[arg-type]

    fine = platform(f'echo "install $ROLLGUARD_NODE_ID $ROLLGUARD_KAFKA_VERSION" >> {said}')
    asyncio.run(fine.restart(node, kafka_version="4.4.0"))
    assert said.read_text().splitlines() == ["install 3 4.4.0", "restart kafka-3 4.4.0"]
    # Without a target version the install command is not run.
    said.unlink()
    asyncio.run(fine.restart(node))
    assert said.read_text().splitlines() == ["restart kafka-3 none"]
    # An install that fails restarts nothing, and says where its output is.
    said.unlink()
    broken = platform("echo no such package >&2; exit 100")
    with pytest.raises(RestartError) as raised:
        asyncio.run(broken.restart(node, kafka_version="4.4.0"))
    assert str(raised.value).startswith("install command for kafka-3 exited 100: no such package")
    assert "commands-u1.log" in str(raised.value)
    assert not said.exists()
    assert "no such package" in (tmp_path / "commands-u1.log").read_text()
    assert not list(tmp_path.glob("restarting-*.pid"))  # nothing left on record as running
