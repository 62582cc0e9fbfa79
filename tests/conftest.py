"""Suite-wide settings. Tests reach nothing but 127.0.0.1."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# CI machines have two cores shared with the stand-in servers: judge correctness, not speed.
settings.register_profile(
    "mignurse", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=80
)
settings.load_profile("mignurse")
