"""Shared test set-up: hypothesis profiles (`fast` for `make test`, `long` for `make fuzz`)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "fast", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "custom",  # HYPOTHESIS_PROFILE=custom HYPOTHESIS_EXAMPLES=3000: a run of a chosen length
    parent=settings.get_profile("long"),
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "1000")),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))
