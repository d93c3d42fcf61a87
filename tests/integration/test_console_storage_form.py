"""The console's new-warehouse form is built from the registered storage kinds: each kind's
inputs are on the page, the chosen kind's inputs become the profile and credential the
management API takes, a refused form keeps what was typed but never a secret, and a kind
no one registered is the API's 400, not a broken page."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import httpx

from icelog.commands.storage import KINDS
from tests.integration.conftest import Api

NIL = "00000000-0000-0000-0000-000000000000"
PAGE = f"/ui/projects/{NIL}/new-warehouse"


def submit(api: Api, fields: dict[str, str]) -> httpx.Response:
    response: httpx.Response = api.client.post(
        PAGE,
        content=urlencode(fields),
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    return response


def test_the_form_offers_every_registered_kind_and_its_inputs(api: Api) -> None:
    page = api.client.get(PAGE)
    assert page.status_code == 200, page.text
    for kind in KINDS:
        assert f'name="storage-type" value="{kind.name}"' in page.text
        assert f'data-for="{kind.name}"' in page.text
        for field in kind.form.fields:
            assert f'name="{field.key}"' in page.text, field.key
    # The first kind is preselected.
    assert f'value="{KINDS[0].name}" checked' in page.text


def test_the_chosen_kinds_inputs_become_the_warehouse(api: Api, tmp_path: Path) -> None:
    base = (tmp_path / "from-console").as_uri()
    created = submit(
        api,
        {
            "name": "from-console",
            "storage-type": "file",
            "base-location": base,
            # Another kind's inputs, sent by a browser without the script: ignored.
            "bucket": "lake",
            "access-key-id": "k",
            "delete-type": "hard",
        },
    )
    assert created.status_code == 303, created.text
    listed = api.client.get("/management/v1/warehouse").json()["warehouses"]
    made = next(w for w in listed if w["name"] == "from-console")
    assert made["storage-profile"] == {"type": "file", "base-location": base}


def test_a_refused_form_keeps_what_was_typed_but_no_secret(api: Api) -> None:
    refused = submit(
        api,
        {
            "name": "s3-from-console",
            "storage-type": "s3",
            "bucket": "lake",
            "region": "us-east-1",
            "endpoint": "http://127.0.0.1:9",  # nothing listens there
            "path-style-access": "true",
            "access-key-id": "AKIDCONSOLE",
            "secret-access-key": "console-secret-123",
        },
    )
    text = refused.text
    assert refused.status_code == 400, text
    assert "no S3 service answered" in text
    assert 'value="AKIDCONSOLE"' in text and 'value="lake"' in text
    assert "console-secret-123" not in text
    # The S3 inputs stay chosen.
    assert 'value="s3" checked' in text


def test_a_kind_no_one_registered_is_the_apis_refusal(api: Api) -> None:
    refused = submit(api, {"name": "odd", "storage-type": "hdfs", "base-location": "/x"})
    text = refused.text
    assert refused.status_code == 400, text
    assert "BadRequestException" in text
