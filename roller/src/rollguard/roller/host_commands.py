"""Running an inventory's restart and health commands so that they outlive the roller's troubles.

A restart command is usually `ssh host sudo systemctl restart kafka`: cutting it off halfway can
leave a broker stopped. Three things went wrong when it was a plain child with pipes:

- Its output went to a pipe read by the roller. When the roller died, the next write got
  SIGPIPE and the restart died with it, yet a resumed roll believed it had happened.
- A command that started a background child kept the pipe open, so the roller hung waiting for
  end-of-file long after the command itself had finished.
- The time limit killed only the shell; its children ran on.

So each command runs in its own session and process group (a terminal's Ctrl-C or a kill of the
roller's group does not reach it), with stdin from /dev/null and stdout and stderr appended to a
log file beside the event log: no pipe to the roller at all. At the time limit the whole
process group is sent SIGTERM, then SIGKILL after a grace period. The exit status is collected by
a daemon thread, so the roller can stop waiting (cancellation) without killing the command and
without leaving a zombie behind.

    CommandError     the command could not be started, or did not finish in time
     +-- CommandTimeout
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rollguard.shared.errors import NodeFailed
from rollguard.shared.wire import format_time

logger = logging.getLogger(__name__)

MARK = "### rollguard"  # starts the lines the roller writes itself, to tell them from output
TAIL_BYTES = 64 * 1024
LAST_LINE_CHARS = 200
GROUP_POLL = 0.02  # seconds between looks at a process group that is being killed
KILL_WAIT = 5.0  # seconds for SIGKILL to take effect (a process in uninterruptible sleep)


class CommandError(NodeFailed):
    """A command could not be started or did not finish in time; the message names the node."""


class CommandTimeout(CommandError):
    """The command ran past its time limit; its whole process group was killed."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int  # negative: killed by that signal (the subprocess module's convention)
    last_line: str  # the last non-empty line the command wrote in this run, "" if none
    duration: float  # seconds
    pid: int  # also the process group id

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        """For messages: `exited 3: <last line>` or `killed by SIGKILL`."""
        if self.exit_code < 0:
            try:
                text = f"killed by {signal.Signals(-self.exit_code).name}"
            except ValueError:
                text = f"killed by signal {-self.exit_code}"
        else:
            text = f"exited {self.exit_code}"
        return f"{text}: {self.last_line}" if self.last_line else f"{text} (no output)"


async def run_command(
    command: str,
    *,
    env: Mapping[str, str],
    timeout: float,
    log_path: Path,
    name: str,
    what: str = "command",
    kill_grace: float = 5.0,
    on_start: Callable[[int], None] | None = None,
) -> CommandResult:
    """Run `command` with /bin/sh in a session and process group of its own.

    `env` is the whole environment of the command. Output is appended to `log_path` (created
    0600), after a header line with the time, `name` (the node) and the command. A non-zero
    exit is a result, not an error: a health command says "not running" that way.

    At `timeout` seconds the process group gets SIGTERM, and SIGKILL `kill_grace` seconds later
    if any member is left; then CommandTimeout. If the caller is cancelled (the roller was
    interrupted), the command is NOT killed: a restart in progress must finish rather than
    leave a broker half-stopped. The caller only stops waiting; a daemon thread reaps the
    command when it ends, and the log file gets its output either way.
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise CommandError(
            f"{what} for {name}: cannot write its log {log_path} ({exc.strerror or exc})"
        ) from None
    try:
        _write(log, f"{MARK} {_now()} {name} {what}: {command}")
        start_offset = os.fstat(log).st_size
        # The inventory's command is a shell command line by design, written by the operator.
        process = subprocess.Popen(  # noqa: S602
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,  # own session and process group: pgid == pid
            close_fds=True,
        )
    except OSError as exc:
        os.close(log)
        raise CommandError(
            f"{what} for {name} could not be started: {exc.strerror or exc}"
        ) from None
    exited: asyncio.Future[int] = loop.create_future()
    if on_start is not None:
        on_start(process.pid)
    threading.Thread(
        target=_reap, args=(process, loop, exited), name=f"reap-{process.pid}", daemon=True
    ).start()
    # The command line itself goes to the 0600 log only: it may carry what others should not read.
    logger.info("%s for %s started (pid %s), output in %s", what, name, process.pid, log_path)
    try:
        try:
            code = await asyncio.wait_for(asyncio.shield(exited), timeout)
        except TimeoutError:
            await _kill_group(process.pid, kill_grace)
            _note(log, f"{MARK} {_now()} {name} {what}: killed after {timeout:g}s")
            last = _last_line(log_path, start_offset)
            detail = f"; its last output: {last}" if last else ""
            raise CommandTimeout(
                f"{what} for {name} did not finish within {timeout:g}s; its process group "
                f"{process.pid} was killed{detail}"
            ) from None
        except asyncio.CancelledError:
            _note(log, f"{MARK} {_now()} {name} {what}: left running, the roller stopped")
            logger.warning(
                "%s for %s (pid %s) left running: the roller stopped waiting for it",
                what,
                name,
                process.pid,
            )
            raise
        duration = time.monotonic() - started
        result = CommandResult(code, _last_line(log_path, start_offset), duration, process.pid)
        _note(log, f"{MARK} {_now()} {name} {what}: {result.describe()} after {duration:.1f}s")
        logger.info("%s for %s %s after %.1fs", what, name, result.describe(), duration)
        return result
    finally:
        os.close(log)


def _reap(
    process: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop, exited: asyncio.Future[int]
) -> None:
    """On a daemon thread: wait for the command and hand its status to the loop."""
    code = process.wait()
    # A closed loop means nobody waits any more; the process is reaped all the same.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, exited, code)


def _settle(exited: asyncio.Future[int], code: int) -> None:
    if not exited.done():
        exited.set_result(code)


async def _kill_group(pgid: int, grace: float) -> None:
    """SIGTERM to the group, SIGKILL to what is left after `grace`, then wait until it is gone."""
    _signal_group(pgid, signal.SIGTERM)
    if await _group_gone(pgid, grace):
        return
    logger.warning("process group %s outlived SIGTERM by %gs: SIGKILL", pgid, grace)
    _signal_group(pgid, signal.SIGKILL)
    if not await _group_gone(pgid, KILL_WAIT):
        logger.error("process group %s still has members %gs after SIGKILL", pgid, KILL_WAIT)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # every member has exited already
        os.killpg(pgid, sig)


async def _group_gone(pgid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(GROUP_POLL)
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs. Zombies do not count: an orphan's zombie
    stays until its new parent reaps it, and where PID 1 never reaps (some containers) that is
    for ever. Read from /proc; without /proc, a signal 0 says whether the group exists."""
    try:
        entries = [entry.name for entry in Path("/proc").iterdir()]
    except OSError:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # Fields after the command name, which is in parentheses and may hold anything.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _last_line(path: Path, start: int) -> str:
    """The last line the command wrote, from its part of the log (read from the tail)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(start, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return ""
    for line in reversed(data.decode(errors="replace").splitlines()):
        text = line.strip()
        if text and not text.startswith(MARK):
            return text[:LAST_LINE_CHARS]
    return ""


def _write(fd: int, line: str) -> None:
    """One line in one write(2): with O_APPEND it cannot interleave with another writer's."""
    os.write(fd, (line.replace("\n", " ") + "\n").encode(errors="replace"))


def _note(fd: int, line: str) -> None:
    """A line after the command started: losing it (a full disk) must not fail the roll."""
    try:
        _write(fd, line)
    except OSError as exc:
        logger.warning("cannot write to a command log: %s", exc.strerror or exc)


def _now() -> str:
    return format_time(datetime.now(UTC))
