"""The commit that completes a staged create, as clients send it."""

from __future__ import annotations

from typing import Any


def staged_create_updates(metadata: dict[str, Any], location: str) -> list[dict[str, Any]]:
    """The updates PyIceberg sends to commit a staged create of `metadata` (the stage's
    answer) at `location`: everything the stage held, each set to the one just added."""
    return [
        {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": metadata["format-version"]},
        {"action": "add-schema", "schema": metadata["schemas"][0]},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": metadata["partition-specs"][0]},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": metadata["sort-orders"][0]},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": location},
    ]
