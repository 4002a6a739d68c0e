"""rollguard spark: see docs/architecture.md (not built yet)."""
