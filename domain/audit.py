"""The audit anchor: the hash chain's head, recorded in the log now and then.

Recording the head as an event publishes it on the change stream, so parties outside
the catalog hold copies of it; a later rewrite of the log (and a recomputed chain) cannot
match the heads they hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid5

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.identifiers import ICELOG_NAMESPACE

AUDIT_ANCHOR_ID = uuid5(ICELOG_NAMESPACE, "audit-anchor")


class AuditAnchor(Aggregate):
    TOPIC = "icelog.audit"

    class Event(AttributedEvent):
        TOPIC = "icelog.audit.event.v1"

    class Started(Event, Aggregate.Created):
        """The first chain head is about to be recorded (once per catalog, in the same append)."""

        TOPIC = "icelog.audit.started.v1"

        SETS = fixed(position=0, link="")

    class HeadRecorded(Event):
        """The audit chainer recorded the hash chain's head: the link at log `position`. Appended by
        `icelog serve` every ICELOG_AUDIT_ANCHOR_INTERVAL_SECONDS when the log grew, or by `icelog
        audit chain --anchor`.

        Data fields:
            position: Log position of the newest chained event.
            link: The chain's link at that position: hex SHA-256 (see docs/audit.md).
        """

        TOPIC = "icelog.audit.head-recorded.v1"
        position: int
        link: str
        COPIES = ("position", "link")

    if TYPE_CHECKING:
        position: int
        link: str

    @classmethod
    def start(cls, *, actor: str, request_id: str) -> AuditAnchor:
        return cls._create(cls.Started, id=AUDIT_ANCHOR_ID, actor=actor, request_id=request_id)

    def record(self, *, position: int, link: str, actor: str, request_id: str) -> bool:
        """Record a newer head; False (nothing recorded) when it is not newer."""
        if position <= self.position:
            return False
        self.trigger_event(
            self.HeadRecorded, position=position, link=link, actor=actor, request_id=request_id
        )
        return True
