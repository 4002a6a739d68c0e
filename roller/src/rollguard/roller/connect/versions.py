"""Which Kafka Connect version brought which REST endpoint, and the refusal when a worker is
older: decided from `GET /`'s version before anything that changes state is sent.

- KIP-745 (Kafka 3.0): `POST /connectors/{c}/restart` takes `includeTasks` and `onlyFailed`.
  Older workers ignore both and restart the connector object alone, answering 204 as if all
  went well; rollguard restarts the tasks one by one there instead.
- KIP-875 (Kafka 3.5): `PUT /connectors/{c}/stop` and `GET /connectors/{c}/offsets`.
- KIP-875 (Kafka 3.6): `PATCH` and `DELETE /connectors/{c}/offsets`.

Older workers answer these paths 404 or 405, which reads like "no such connector"; refusing up
front, naming the version needed, is clearer and leaves nothing half done.
"""

from __future__ import annotations

import re

from rollguard.shared.errors import ConfigError

Version = tuple[int, int]

RESTART_PARAMS_SINCE: Version = (3, 0)  # KIP-745
STOP_SINCE: Version = (3, 5)  # KIP-875: PUT stop, GET offsets
MODIFY_OFFSETS_SINCE: Version = (3, 6)  # KIP-875: PATCH and DELETE offsets

_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse_version(text: str) -> Version:
    """`"3.6.1"` -> (3, 6); a version this cannot read counts as (0, 0), the oldest."""
    match = _VERSION.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def shown(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


class UnsupportedVersion(ConfigError):
    """The worker is too old for what was asked: exit 2, nothing was sent that changes state."""


def require(worker: str, since: Version, what: str) -> None:
    """Refuse `what` on a worker older than `since`, naming both versions."""
    if parse_version(worker) < since:
        raise UnsupportedVersion(
            f"{what} needs Kafka Connect {shown(since)} or later (KIP-875); this worker is "
            f"{worker or 'of an unknown version'}. Nothing was sent"
        )
