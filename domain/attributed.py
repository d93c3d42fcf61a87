"""The fields every catalog event carries: who asked, in which request.

A module-level base, not a class nested in an aggregate: the library re-creates in each
aggregate subclass the event classes nested in its bases, and such a copy has no topic of
its own. Each aggregate's `Event` derives from it and keeps its own topic; the fields come
first, in the order they have always been stored in.
"""

from __future__ import annotations

from eventsourcing.domain import Aggregate


class AttributedEvent(Aggregate.Event):
    """Every event says who asked (`actor`: the principal, or `system` for the server's own
    work) and in which request (`request_id`)."""

    actor: str
    request_id: str
