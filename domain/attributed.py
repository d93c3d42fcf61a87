"""The fields every catalog event carries: who asked, in which request.

A module-level base, not a class nested in an aggregate: the library re-creates in each
aggregate subclass the event classes nested in its bases, and such a copy has no topic of
its own. Each aggregate's `Event` derives from it and keeps its own topic; the fields come
first, in the order they have always been stored in.

Most events change their aggregate by copying some of their fields onto it and setting a
few flags; they say which in `COPIES` and `SETS` instead of each writing an apply() of
assignments. An event whose change is more than that still writes its own apply() (and
calls this one through `super()` for what it copies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from eventsourcing.domain import Aggregate


def copy_fields(event: object, aggregate: object, names: Iterable[str]) -> None:
    """Set each named field of `event` on `aggregate` under the same name. A list or dict
    is copied, so the aggregate never shares a mutable value with a logged event."""
    for name in names:
        value = getattr(event, name)
        if isinstance(value, list):
            value = list(value)
        elif isinstance(value, dict):
            value = dict(value)
        setattr(aggregate, name, value)


def fixed(**values: Any) -> Mapping[str, Any]:
    """An event class's `SETS`: read-only, as every event of the class shares it. Only
    immutable values: a list or dict would be shared by every aggregate it is set on."""
    return MappingProxyType(values)


class AttributedEvent(Aggregate.Event):
    """Every event says who asked (`actor`: the principal, or `system` for the server's own
    work) and in which request (`request_id`)."""

    actor: str
    request_id: str

    # The event's fields its aggregate takes over as they are (ClassVars: not stored).
    COPIES: ClassVar[tuple[str, ...]] = ()
    # Attributes the event sets on its aggregate to fixed values (flags, counters' start).
    SETS: ClassVar[Mapping[str, Any]] = fixed()

    def apply(self, aggregate: Any) -> None:
        copy_fields(self, aggregate, self.COPIES)
        for name, value in self.SETS.items():
            setattr(aggregate, name, value)
