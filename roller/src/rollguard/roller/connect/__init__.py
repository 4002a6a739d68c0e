"""Kafka Connect operations: restarts, auto-restart with backoff, connector and MirrorMaker 2
offsets."""
