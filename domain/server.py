"""The catalog server itself: bootstrapped once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent


class Server(Aggregate):
    """Singleton aggregate (id `SERVER_ID`); its creation is the bootstrap."""

    TOPIC = "icelog.server"

    class Event(AttributedEvent):
        TOPIC = "icelog.server.event.v1"

    class Bootstrapped(Event, Aggregate.Created):
        """The catalog was bootstrapped: once per database, at the first start of `icelog serve`
        (actor `system`), or by `POST /management/v1/bootstrap`.

        Data fields:
            is-operator: Whether the bootstrapping user asked to be the operator.
        """

        TOPIC = "icelog.server.bootstrapped.v1"
        is_operator: bool

        COPIES = ("is_operator",)

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        is_operator: bool
