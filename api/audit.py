"""The audit chainer: keeps the hash chain up with the log and records its head now and
then (inside `icelog serve`; `icelog audit chain` does one round by hand)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from icelog.api.services import Services
from icelog.domain.audit import AuditAnchor
from icelog.domain.context import RequestContext
from icelog.projections.audit_chain import AuditChain

log = logging.getLogger("icelog.audit")
CHAINER = RequestContext(actor="system:audit", request_id="audit-chain")


class Indexes(Protocol):
    def catch_up(self, batch: int = ...) -> int: ...


class Chainer:
    """The audit thread of a server: every interval it catches up the event index (when
    given) and the hash chain, and now and then records the chain's head."""

    def __init__(self, services: Services, indexer: Indexes | None = None) -> None:
        self.services = services
        self.indexer = indexer
        self.chain = AuditChain(services.catalog.app.recorder)
        settings = services.settings
        self.interval_s = settings.audit_chain_interval_seconds
        self.anchor_every_s = settings.audit_anchor_interval_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_anchor = 0.0
        self._own_position = -1  # where this chainer's last recorded head landed

    def round(self, *, anchor: bool) -> tuple[int, int, str]:
        """Chain what is new; with `anchor`, record the head as an event (itself chained
        in a later round). Returns (events chained, head position, head link)."""
        chained = self.chain.extend()
        position, link = self.chain.head()
        # The anchor's own events move the head: they alone are no reason for another.
        if anchor and position > 0 and position != self._own_position:
            recorded = self.services.catalog.audit.record_chain_head(CHAINER, position, link)
            if recorded is not None:
                self._own_position = recorded
        return chained, position, link

    def start(self) -> None:
        if self.interval_s <= 0:
            return
        self._thread = threading.Thread(target=self._loop, name="icelog-audit", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        self._last_anchor = time.monotonic()
        while not self._stop.wait(self.interval_s):
            due = self.anchor_every_s > 0 and (
                time.monotonic() - self._last_anchor >= self.anchor_every_s
            )
            try:
                if self.indexer is not None:
                    self.indexer.catch_up()
                self.round(anchor=due)
                if due:
                    self._last_anchor = time.monotonic()
            except Exception:  # a database hiccup must not stop the chainer
                log.exception("audit chainer round failed; retrying")


def recorded_heads(services: Services) -> list[tuple[int, str]]:
    """Every chain head recorded in the log, as (position, link)."""
    catalog = services.catalog
    found = catalog.app.recorder.select_notifications(
        start=0,
        limit=1_000_000,
        topics=[AuditAnchor.HeadRecorded.TOPIC],
        inclusive_of_start=False,
    )
    heads = []
    for notification in found:
        event = catalog.app.mapper.to_domain_event(notification)
        assert isinstance(event, AuditAnchor.HeadRecorded)
        heads.append((event.position, event.link))
    return heads
