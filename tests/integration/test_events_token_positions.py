"""Forged continuation tokens of `POST /v1/{prefix}/events` (a second reader's find).

"No input gets a 5xx": a token is client input. A position past SQLite's 64-bit integer
(orjson reads integers up to 2**64-1) must be a 400, not an OverflowError turned into 500.
"""

from __future__ import annotations

import base64

import orjson
import pytest

from icelog.projections.iceberg_events import BadToken, Cursor
from tests.integration.conftest import Api


def _token(warehouse_id: str, position: int) -> str:
    raw = {"v": 1, "w": warehouse_id, "p": position,
           "f": {"o": [], "n": [], "u": [], "t": [], "a": None}}  # fmt: skip
    return base64.urlsafe_b64encode(orjson.dumps(raw)).decode().rstrip("=")


@pytest.mark.attack
@pytest.mark.parametrize("position", [2**63, 2**64 - 1])
def test_a_token_position_past_64_bits_is_a_400_not_a_500(api: Api, position: int) -> None:
    first = api.post("/events", {})
    assert first.status_code == 200, first.text
    token = first.json()["continuation-token"]
    padded = token + "=" * (-len(token) % 4)
    warehouse_id = orjson.loads(base64.urlsafe_b64decode(padded))["w"]
    answer = api.post("/events", {"continuation-token": _token(warehouse_id, position)})
    assert answer.status_code == 400, answer.text


@pytest.mark.attack
@pytest.mark.parametrize("position", [True, -1, 2**63, 1.5, "7"])
def test_a_token_position_is_a_64_bit_count(position: object) -> None:
    raw = {"v": 1, "w": "w", "p": position, "f": {"o": [], "n": [], "u": [], "t": [], "a": None}}
    token = base64.urlsafe_b64encode(orjson.dumps(raw)).decode().rstrip("=")
    with pytest.raises(BadToken):
        Cursor.decode(token)
    assert Cursor.decode(_token("w", 2**63 - 1)).position == 2**63 - 1
