"""One moto server (S3 and STS) for the conformance runs' S3 warehouses."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from tests.conformance.s3 import BUCKET, REGION
from tests.support.moto_server import moto_s3


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's URL, with `BUCKET` created."""
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="conformance",
            aws_secret_access_key="conformance",
        ).create_bucket(Bucket=BUCKET)
        yield endpoint
