"""rollguard roller: see docs/architecture.md (not built yet)."""
