"""Group commit: the saves of concurrent commands share one append transaction.

Every append takes the event table's lock and waits for its own fsync; with one
transaction per command, writers queue on that lock. A single committer thread per
process instead takes every save that is waiting, appends them all in ONE transaction
(one lock, one fsync) and wakes each caller with its own position. Nothing waits on
purpose: batches form only from saves that arrive while the previous batch is being
written, so a lone writer pays one thread hand-off and no delay.

Each command's events stay atomic: if the shared append fails on a version conflict,
the batch is replayed one command at a time, so exactly the conflicting commands get
`ConcurrentChange` (and reload and retry) while the others land.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventsourcing.application import ProcessingEvent, project_aggregate
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError, StoredEvent

if TYPE_CHECKING:
    from eventsourcing.application import Application

MAX_BATCH = 64
log = logging.getLogger("icelog.commands")


class ConcurrentChange(Exception):
    """Another writer appended first; the command will reload and try again."""


@dataclass
class _Save:
    aggregates: list[Aggregate]
    events: list[Any]
    hints: dict[str, bytes]
    stored: list[StoredEvent] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    position: int = 0
    error: BaseException | None = None


class GroupCommitter:
    def __init__(
        self,
        app: Application[Any],
        on_append: Callable[[float, int], None] | None = None,
        after_append: Callable[[Sequence[Any]], None] | None = None,
    ) -> None:
        self._app = app
        # Told the duration of each append transaction and how many saves it carried.
        self._on_append = on_append or (lambda _seconds, _saves: None)
        # Told the events of each append once they are in and before any caller hears of
        # it: the window in which a process may die with its commits landed but not
        # answered (tests/support/dying_server.py observes it to die there).
        self._after_append = after_append or (lambda _events: None)
        self._queue: queue.SimpleQueue[_Save | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="icelog-group-commit", daemon=True)
        self._thread.start()

    def save(self, aggregates: Sequence[Aggregate], hints: dict[str, bytes]) -> int:
        """Append the pending events of `aggregates` atomically; returns the last position."""
        events = [event for aggregate in aggregates for event in aggregate.collect_events()]
        # Serialise in the caller's thread: the committer thread is the serial section.
        stored = [self._app.mapper.to_stored_event(event) for event in events]
        item = _Save(list(aggregates), events, hints, stored)
        self._queue.put(item)
        item.done.wait()
        if item.error is not None:
            raise item.error
        return item.position

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(nxt)
            self._commit(batch)

    def _commit(self, batch: list[_Save]) -> None:
        batch = self._without_doomed(batch)
        if not batch:
            return
        try:
            processing = self._append(batch)
        except IntegrityError as exc:
            if len(batch) == 1:
                batch[0].error = ConcurrentChange(str(exc))
                batch[0].done.set()
            else:
                for item in batch:
                    self._commit([item])
            return
        except BaseException as exc:
            for item in batch:
                item.error = exc
                item.done.set()
            return
        for item in batch:
            item.done.set()
        # After the callers are on their way: a snapshot reads the aggregate back, and the
        # writers waiting on this append need nothing from it.
        try:
            self._take_snapshots(processing)
        except Exception:
            # Snapshots only make loading faster; the next save takes them again.
            log.warning("could not take snapshots after an append", exc_info=True)

    def _take_snapshots(self, processing: ProcessingEvent[Any]) -> None:
        """What `Application.save()` does after its insert, through the library's public
        snapshot API: a snapshot of each saved aggregate whose new version is a multiple
        of its type's `snapshotting_intervals`."""
        app = self._app
        if app.snapshots is None or not app.snapshotting_intervals:
            return
        for event in processing.events:
            aggregate = processing.aggregates.get(event.originator_id)
            if aggregate is None:
                continue
            kind = type(aggregate)
            interval = app.snapshotting_intervals.get(kind)
            if interval is None or event.originator_version % interval:
                continue
            app.take_snapshot(
                event.originator_id,
                version=event.originator_version,
                projector_func=app.snapshotting_projectors.get(kind, project_aggregate),
            )

    @staticmethod
    def _without_doomed(batch: list[_Save]) -> list[_Save]:
        """Saves that append an (aggregate, version) an earlier save in the batch also
        appends can never land: fail them now, so the rest need not be replayed one by one
        (hot tables: several writers committing on top of the same version)."""
        taken: set[tuple[Any, int]] = set()
        kept: list[_Save] = []
        for item in batch:
            keys = {(e.originator_id, e.originator_version) for e in item.events}
            if keys & taken:
                item.error = ConcurrentChange("another save in the same batch won the race")
                item.done.set()
                continue
            taken |= keys
            kept.append(item)
        return kept

    def _append(self, batch: list[_Save]) -> ProcessingEvent[Any]:
        processing: ProcessingEvent[Any] = ProcessingEvent()
        hints: dict[str, bytes] = {}
        for item in batch:
            processing.events.extend(item.events)
            for aggregate in item.aggregates:
                processing.aggregates[aggregate.id] = aggregate
            hints.update(item.hints)
        stored = [
            s
            for item in batch
            for s in (item.stored if item.stored is not None else self._map(item.events))
        ]
        # What Application.save() does, batched: insert (with the inline read model), then
        # snapshots. The events were mapped by the callers.
        started = time.perf_counter()
        ids = self._app.recorder.insert_events(
            stored, inline_events=processing.events, inline_hints=hints
        )
        offset = 0
        for item in batch:
            offset += len(item.events)
            item.position = ids[offset - 1] if item.events and ids else 0
        # The events are in: nothing after this point may report the saves as failed.
        with contextlib.suppress(Exception):
            self._after_append(processing.events)
        with contextlib.suppress(Exception):
            self._on_append(time.perf_counter() - started, len(batch))
        return processing

    def _map(self, events: list[Any]) -> list[StoredEvent]:
        return [self._app.mapper.to_stored_event(event) for event in events]
