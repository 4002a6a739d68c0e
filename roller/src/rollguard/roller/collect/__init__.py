"""The collector: agents' recovery timelines and the roller's events into a Parquet dataset.

The names below are loaded when first used (PEP 562): pyarrow, which the collector needs, takes
longer to import than the rest of `rollguard` together, and every other command does without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollguard.roller.collect.collector import CollectResult, Dataset, State, collect
    from rollguard.roller.collect.schema import EVENTS_SCHEMA, TIMELINE_SCHEMA

__all__ = ["EVENTS_SCHEMA", "TIMELINE_SCHEMA", "CollectResult", "Dataset", "State", "collect"]

_HOMES = {
    "CollectResult": "collector",
    "Dataset": "collector",
    "State": "collector",
    "collect": "collector",
    "EVENTS_SCHEMA": "schema",
    "TIMELINE_SCHEMA": "schema",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
