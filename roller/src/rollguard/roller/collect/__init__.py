"""The collector: agents' recovery timelines and the roller's events into a Parquet dataset."""

from rollguard.roller.collect.collector import CollectResult, Dataset, State, collect
from rollguard.roller.collect.schema import EVENTS_SCHEMA, TIMELINE_SCHEMA

__all__ = ["EVENTS_SCHEMA", "TIMELINE_SCHEMA", "CollectResult", "Dataset", "State", "collect"]
