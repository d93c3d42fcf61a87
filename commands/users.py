"""What a token (or the create endpoint) says about a user, and how a user record came
to change; the user commands are AccessCommands' (commands/access.py)."""

from __future__ import annotations

from dataclasses import dataclass

# Lakekeeper's `last-updated-with` values.
BY_CALL = "config-call-creation"
BY_CREATE_ENDPOINT = "create-endpoint"
BY_UPDATE_ENDPOINT = "update-endpoint"


@dataclass(frozen=True)
class UserFacts:
    """What a token (or the create endpoint) says about a user."""

    user_id: str
    name: str
    email: str | None
    user_type: str
