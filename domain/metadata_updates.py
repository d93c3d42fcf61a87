"""The metadata-update engine that table and view metadata builders share.

A REST commit (table) or replace (view) carries a list of updates, each an object with
an `action`. A builder is a working copy of one metadata document; the engine parses
the action, finds the builder's handler for it and calls it. Handlers declare the
actions they take with `@handles(...)`; each builder class gets its dispatch table
(action -> handler) when it is defined, so an unknown action is refused the same way
for both kinds. The field readers below are the parsing rules both kinds share, with
Java's parser messages.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeGuard, TypeVar

from icelog.domain.errors import BadRequestError, IllegalArgumentError, ValidationError
from icelog.domain.schema_types import is_int

Update = dict[str, Any]
Handler = Callable[[Any, Update, int], None]
F = TypeVar("F", bound=Callable[..., None])

_ACTIONS_ATTR = "__update_actions__"

# An id of -1 in an update means "the one added last in this request" (Java LAST_ADDED).
LAST_ADDED = -1


def show(value: Any) -> str:
    """Format like Java's String.format("%s"): null, not None."""
    return "null" if value is None else str(value)


def is_string_map(value: Any) -> TypeGuard[dict[str, str]]:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def is_string_list(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _refuse(update: Update, problem: str) -> BadRequestError:
    return BadRequestError(f"Cannot parse {update.get('action')} update: {problem}")


def require(update: Update, key: str, kind: str = "field") -> Any:
    if update.get(key) is None:
        raise _refuse(update, f"missing {kind} {key}")
    return update[key]


def require_str(update: Update, key: str) -> str:
    value = require(update, key)
    if not isinstance(value, str):
        raise _refuse(update, f"{key} must be a string")
    return value


def require_obj(update: Update, key: str) -> dict[str, Any]:
    value = require(update, key)
    if not isinstance(value, dict):
        raise _refuse(update, f"{key} must be an object")
    return value


def require_int(update: Update, key: str) -> int:
    value = require(update, key)
    if not is_int(value):
        raise _refuse(update, f"{key} must be an integer")
    return int(value)


def require_int_list(update: Update, key: str) -> list[int]:
    value = require(update, key)
    if not isinstance(value, list) or not all(is_int(v) for v in value):
        raise _refuse(update, f"{key} must be an array of integers")
    return list(value)


def resolve_last_added(requested: int, last_added: int | None, refusal: str) -> int:
    """`requested`, or for LAST_ADDED the id added last in this request; `refusal` (Java's
    message) when nothing was added."""
    if requested != LAST_ADDED:
        return requested
    if last_added is None:
        raise ValidationError(refusal)
    return last_added


def requested_id(update: dict[str, Any], key: str, last_added: int | None, refusal: str) -> int:
    """The id an update's `key` names, resolved as `resolve_last_added` does."""
    return resolve_last_added(require_int(update, key), last_added, refusal)


def property_updates(update: Update) -> dict[str, str]:
    """A set-properties update's map (`updated` is the pre-1.0 name Java's parser still
    accepts)."""
    updates = update.get("updates", update.get("updated"))
    if not is_string_map(updates):
        raise BadRequestError(
            "Cannot parse set-properties update: updates must be a map of strings"
        )
    return updates


def property_removals(update: Update) -> list[str]:
    """A remove-properties update's keys (`removed`: the pre-1.0 name)."""
    removals = update.get("removals", update.get("removed"))
    if not is_string_list(removals):
        raise BadRequestError(
            "Cannot parse remove-properties update: removals must be a list of strings"
        )
    return removals


def check_new_location(raw: Any, kind: str) -> str:
    """A create request's location, with Java LocationUtil.stripTrailingSlash applied
    (which never eats the '//' of a scheme)."""
    if not isinstance(raw, str) or not raw:
        raise IllegalArgumentError(f"Invalid {kind} location: expected a non-empty string")
    location = raw
    while location.endswith("/") and not location.endswith("://"):
        location = location[:-1]
    return location


def check_new_properties(properties: Any, kind: str) -> dict[str, str]:
    if not is_string_map(properties):
        raise IllegalArgumentError(f"Invalid {kind} properties: expected a map of strings")
    return properties


def handles(*actions: str, **fixed: Any) -> Callable[[F], F]:
    """Declare a builder method the handler of `actions`; `fixed` are keyword arguments
    passed to it for these actions (one method for two actions that differ by a key)."""

    def mark(method: F) -> F:
        marks = [*getattr(method, _ACTIONS_ATTR, []), *((a, fixed) for a in actions)]
        setattr(method, _ACTIONS_ATTR, marks)
        return method

    return mark


def _handler(method: Callable[..., None], fixed: dict[str, Any]) -> Handler:
    if "now_ms" in inspect.signature(method).parameters:
        return lambda builder, update, now_ms: method(builder, update, now_ms, **fixed)
    return lambda builder, update, _now_ms: method(builder, update, **fixed)


class UpdateEngine:
    """Base of the metadata builders: `apply` one REST update by its action."""

    # How parse errors name the update ("metadata", "view").
    UPDATE_KIND: ClassVar[str]
    # action -> handler, built from the `@handles` methods of the class and its bases.
    ACTIONS: ClassVar[dict[str, Handler]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        actions: dict[str, Handler] = {}
        for klass in reversed(cls.__mro__):
            for method in vars(klass).values():
                for action, fixed in getattr(method, _ACTIONS_ATTR, []):
                    actions[action] = _handler(method, fixed)
        cls.ACTIONS = actions

    def apply(self, update: Any, now_ms: int) -> None:
        if not isinstance(update, dict) or not isinstance(update.get("action"), str):
            raise BadRequestError(f"Cannot parse {self.UPDATE_KIND} update: missing action")
        handler = self.ACTIONS.get(update["action"].lower())
        if handler is None:
            raise BadRequestError(
                f"Cannot parse {self.UPDATE_KIND} update: unknown action {update['action']}"
            )
        handler(self, update, now_ms)
