"""Shared fixtures for the collect tests: moto's S3 on 127.0.0.1, for SSM uploads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch, fake_aws: None) -> Iterator[str]:
    """A fresh bucket on moto's S3 server (moto's state outlives one server: a new name)."""
    import uuid

    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://{host}:{port}")
        name = f"bundles-{uuid.uuid4().hex[:12]}"
        boto3.client("s3").create_bucket(
            Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
        )
        yield name
    finally:
        server.stop()
