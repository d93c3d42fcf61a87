"""A hash chain over the stored events: tamper evidence for the whole log.

Link n = SHA-256(link n-1 ‖ position ‖ aggregate id ‖ version ‖ topic ‖ state), over the
exact bytes the event store holds (`state` is the stored, serialised event). The chain is
kept in `icelog_audit_chain` by a chainer that follows the log (inside `icelog serve`, or
`icelog audit chain`); `icelog audit verify` recomputes it from the events and reports the
first link that no longer matches. Changing, removing or inserting a stored event breaks
every later link, so whoever holds a copy of a recent head (published as an
`icelog.audit.head-recorded.v1` event on the change stream) can tell.

The link encoding is stored format (docs/audit.md, ADR 0009): never change it in place.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder

from icelog.projections.sql import SqlStore, write_transaction

GENESIS = bytes(32)
# A link as stored, printed and published: the SHA-256 digest in lower-case hex.
LINK_HEX_DIGITS = 2 * hashlib.sha256().digest_size
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS icelog_audit_chain ("
    "position BIGINT PRIMARY KEY, link TEXT NOT NULL)"
)
BATCH = 2000


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def link(
    previous: bytes, position: int, aggregate_id: UUID | str, version: int, topic: str, state: bytes
) -> bytes:
    """The chain link of one stored event (length-prefixed fields: no ambiguity)."""
    digest = hashlib.sha256()
    digest.update(previous)
    digest.update(position.to_bytes(8, "big"))
    digest.update(_field(str(aggregate_id).encode()))
    digest.update(version.to_bytes(8, "big", signed=True))
    digest.update(_field(topic.encode()))
    digest.update(_field(bytes(state)))
    return digest.digest()


@dataclass(frozen=True)
class Verdict:
    checked: int  # chained events recomputed
    head_position: int
    head_link: str
    broken_at: int | None  # first position whose link does not match, if any
    reason: str | None


class AuditChain(SqlStore):
    def __init__(self, recorder: ApplicationRecorder) -> None:
        super().__init__(recorder.datastore)  # type: ignore[attr-defined]
        self.recorder = recorder

    def ensure_schema(self) -> None:
        self._run(SCHEMA, fetch=False)

    def head(self) -> tuple[int, str]:
        rows = self._run(
            "SELECT position, link FROM icelog_audit_chain ORDER BY position DESC LIMIT 1"
        )
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, GENESIS.hex())

    def extend(self, limit: int = 100_000) -> int:
        """Chain the events after the current head; returns how many were chained.
        Several chainers may run: links are deterministic, so a conflict is a no-op."""
        position, last = self.head()
        previous = bytes.fromhex(last)
        done = 0
        while done < limit:
            batch = self.recorder.select_notifications(
                start=position, limit=BATCH, inclusive_of_start=False
            )
            if not batch:
                break
            rows = []
            for n in batch:
                previous = link(
                    previous, n.id, n.originator_id, n.originator_version, n.topic, n.state
                )
                rows.append((n.id, previous.hex()))
            with write_transaction(self._datastore) as cur:
                self._insert_rows(
                    cur,
                    "icelog_audit_chain",
                    (("position", "int8"), ("link", "text")),
                    rows,
                    "ON CONFLICT (position) DO NOTHING",
                )
            position = batch[-1].id
            done += len(batch)
        return done

    def link_at(self, position: int) -> str | None:
        rows = self._run("SELECT link FROM icelog_audit_chain WHERE position = ?", (position,))
        return str(rows[0][0]) if rows else None

    def verify(self) -> Verdict:
        """Recompute every link from the stored events and compare with the chain; the
        first position that does not match is reported with what happened there."""
        head_position, head_link = self.head()

        def broken(position: int, reason: str) -> Verdict:
            return Verdict(checked, head_position, head_link, position, reason)

        previous, last, checked = GENESIS, 0, 0
        while last < head_position:
            batch = [
                n
                for n in self.recorder.select_notifications(
                    start=last, limit=BATCH, inclusive_of_start=False
                )
                if n.id <= head_position
            ]
            upper = batch[-1].id if batch else head_position
            stored = self._run(
                "SELECT position, link FROM icelog_audit_chain "
                "WHERE position > ? AND position <= ? ORDER BY position",
                (last, upper),
            )
            links = {int(p): str(v) for p, v in stored}
            logged = {n.id for n in batch}
            for position in sorted(links):
                if position not in logged:
                    return broken(position, "a chained event is no longer in the log (deleted)")
            for n in batch:
                if n.id not in links:
                    return broken(n.id, "an event is in the log but was never chained (inserted)")
                previous = link(
                    previous, n.id, n.originator_id, n.originator_version, n.topic, n.state
                )
                if previous.hex() != links[n.id]:
                    return broken(n.id, "the stored event differs from what was chained")
                checked += 1
            if not batch:
                break
            last = upper
        return Verdict(checked, head_position, head_link, None, None)

    def export_lines(self, after: int = 0, until: int | None = None) -> Iterator[str]:
        """JSON Lines of the chained events after `after` (to `until`), verifiable offline
        with scripts/verify_export.py: a header with the link they continue from, then one
        line per stored event with its exact bytes and its link."""
        head_position, _ = self.head()
        last = min(until, head_position) if until is not None else head_position
        previous = GENESIS.hex() if after == 0 else self.link_at(after)
        if previous is None:
            raise ValueError(f"position {after} is not in the chain")
        yield json.dumps(
            {
                "format": "icelog-audit-export/1",
                "after-position": after,
                "previous-link": previous,
                "until-position": last,
            }
        )
        position = after
        while position < last:
            batch = [
                n
                for n in self.recorder.select_notifications(
                    start=position, limit=BATCH, inclusive_of_start=False
                )
                if n.id <= last
            ]
            if not batch:
                return
            links = dict(
                self._run(
                    "SELECT position, link FROM icelog_audit_chain "
                    "WHERE position > ? AND position <= ?",
                    (position, batch[-1].id),
                )
            )
            for n in batch:
                yield json.dumps(
                    {
                        "position": n.id,
                        "aggregate-id": str(n.originator_id),
                        "version": n.originator_version,
                        "topic": n.topic,
                        "state": base64.b64encode(n.state).decode(),
                        "link": links.get(n.id),
                    }
                )
            position = batch[-1].id
