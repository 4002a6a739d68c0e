"""The processes tests, benchmarks and the demo start, alike: the one registry of them (`track`,
`forget`: every one still running at interpreter exit is killed then, so that a run that dies or
is interrupted leaves no JVM or server behind, most running in sessions of their own that a
dying parent does not take along), a server's or a JVM's start with its output in a log file
(`start_logged`), its stop (`stop_process`: a signal, SIGKILL if it outlasts its time), and what
a `with` does with something started (`Stops`, `Starts`).
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

_LIVE: set[subprocess.Popen[Any]] = set()
_LIVE_LOCK = threading.Lock()


def track(process: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
    """Register `process` (just started) to be killed at exit if still running then."""
    with _LIVE_LOCK:
        _LIVE.add(process)
    return process


def forget(process: subprocess.Popen[Any] | None) -> None:
    """`process` ended (or was reaped): no longer one to kill at exit."""
    if process is not None:
        with _LIVE_LOCK:
            _LIVE.discard(process)


def tracked() -> list[subprocess.Popen[Any]]:
    """The registered processes (for a test of the registry itself)."""
    with _LIVE_LOCK:
        return list(_LIVE)


@atexit.register
def _kill_leftovers() -> None:
    for process in tracked():
        if process.poll() is None:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)


def start_logged(
    command: Sequence[str],
    log: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`command` in a session of its own (a terminal's signals reach the test, not it), without
    stdin, its output appended to `log`; registered (`track`)."""
    with open(log, "ab") as out:
        process = subprocess.Popen(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    track(process)
    return process


def alive(process: subprocess.Popen[Any] | None) -> bool:
    """Started, and not ended since."""
    return process is not None and process.poll() is None


def stop_process(
    process: subprocess.Popen[Any] | None, timeout: float | None, sig: int = signal.SIGTERM
) -> int | None:
    """`sig` (SIGTERM: its own orderly stop) unless it has ended, SIGKILL if it outlasts
    `timeout` (None: however long it takes); reaped and no longer registered. Its exit code
    (None: never started)."""
    if process is None:
        return None
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    forget(process)
    return process.returncode


def read_log(path: Path) -> str:
    """A process's log so far ("" before it wrote any)."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class Stops:
    """`with` it: itself, stopped at the end."""

    def stop(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Starts(Stops):
    """`with` it: started (what did start stopped if the start fails), stopped at the end."""

    def start(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self
