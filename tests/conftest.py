"""Suite-wide settings. Tests reach nothing but 127.0.0.1."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

# CI machines have two cores shared with the stand-in servers: judge correctness, not speed.
settings.register_profile(
    "mignurse", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=80
)
settings.load_profile("mignurse")


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test credentials and a region for boto3 against the local stand-ins; no profile, so
    nothing on this machine's ~/.aws is read."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
