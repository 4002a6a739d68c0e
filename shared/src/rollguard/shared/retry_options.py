"""The retry policy's five options (`--retry-*`), the same in every network client, in the
reference's units (milliseconds, as their names say), and the policy they make
(`retry.RetryPolicy`, whose defaults they share: tests/unit/test_settings.py holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollguard.shared.converters import MAX_INT, decimal, integer
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.settings import Group, Options, option

RETRIES = Group(
    "retries", "a request that failed for a reason that may pass is tried again, with this backoff"
)


def _number(text: str) -> float:
    # The syntax only (finite, ASCII digits): RetryPolicy checks the ranges, with their names.
    return decimal(text.strip())


def max_retries_option(default: str = "5") -> Any:
    """`--retry-max-retries`, with another default for a command that looks once (`state`)."""
    return option(
        default, integer(0, MAX_INT), "retries after the first attempt", "N", group=RETRIES
    )


@dataclass(frozen=True, kw_only=True)
class RetryOptions(Options):
    """The policy's five options: their defaults are the policy's."""

    group = RETRIES

    retry_max_retries: int = max_retries_option()
    retry_initial_backoff_ms: float = option("300", _number, "delay before the first retry", "N")
    retry_max_backoff_ms: float = option("10000", _number, "cap of the delay, before jitter", "N")
    retry_backoff_multiplier: float = option("2.0", _number, "growth of the delay per retry", "N")
    retry_jitter_factor: float = option(
        "0.25", _number, "random extra delay, as a share of it", "N"
    )

    def retry_policy(self) -> RetryPolicy:
        """The policy; ConfigError naming the flag when a value is out of its range."""
        return RetryPolicy(
            max_retries=self.retry_max_retries,
            initial_backoff_ms=self.retry_initial_backoff_ms,
            max_backoff_ms=self.retry_max_backoff_ms,
            backoff_multiplier=self.retry_backoff_multiplier,
            jitter_factor=self.retry_jitter_factor,
        )

    def check(self) -> None:
        super().check()
        self.retry_policy()
