"""`--ready-file`: a file that exists exactly while the broker is ready.

For readiness probes that run a command (`test -f`), as Strimzi's `kafka-ready` file is used.
The file is touched only when readiness changes, not on every round.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rollguard.agent.sampler import Sample, Unavailable
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)


def check_ready_file(path: Path) -> None:
    """ConfigError naming --ready-file when the file could never be created or removed: its
    folder does not exist or cannot be written, or it is a folder. Checked at start-up, not
    found at the first change of readiness (and then logged at every one)."""
    folder = path.parent
    if path.is_dir():
        raise ConfigError(f"--ready-file {path}: is a directory, not a file")
    if not folder.exists():
        raise ConfigError(f"--ready-file {path}: its folder {folder} does not exist")
    if not folder.is_dir():
        raise ConfigError(f"--ready-file {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"--ready-file {path}: its folder {folder} is not writable")


def is_ready(outcome: Sample | Unavailable) -> bool:
    return isinstance(outcome, Sample) and outcome.report.broker_state.is_ready


class ReadyFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready: bool | None = None

    def update(self, previous: Sample | Unavailable, latest: Sample | Unavailable) -> None:
        ready = is_ready(latest)
        if ready is self._ready:
            return
        try:
            if ready:
                self.path.touch()
            else:
                self.path.unlink(missing_ok=True)
        except OSError as exc:
            logger.error("cannot update ready file %s: %s", self.path, exc.strerror)
            return
        self._ready = ready

    def clear(self) -> None:
        """On shutdown: whatever the broker does next, this agent no longer vouches for it."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            logger.error("cannot remove ready file %s: %s", self.path, exc.strerror)
        self._ready = False
