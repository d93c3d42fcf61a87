"""Query parameters built in PostgreSQL's binary format, for the one-statement appends.

psycopg adapts a list parameter element by element in Python, and a list of composites
(the events, `stored_event_uuid[]`) by rendering each field in text with its escaping:
profiled, that conversion was about a tenth of a commit's server CPU. The append's arrays
are instead packed here in PostgreSQL's binary array format (`array_recv`: dimensions,
then each element's length and bytes; composites as `record_recv` reads them: each field's
type oid, length and bytes) and handed to psycopg as ready bytes (`Encoded`, passed as is by
`EncodedDumper`), which costs a struct.pack per element.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from psycopg import pq
from psycopg.adapt import AdaptersMap, Dumper

WRITTEN_FOR = ((3, 1), (4, 0))  # psycopg versions: from, up to (excluded)

TEXT, BYTEA, INT8, INT4, UUID_OID = 25, 17, 20, 23, 2950
TEXT_ARRAY, BYTEA_ARRAY, INT8_ARRAY, INT4_ARRAY = 1009, 1001, 1016, 1007

_HEADER = struct.Struct("!iiiii")  # ndim, has-nulls, element oid, length, lower bound
_LENGTH = struct.Struct("!i")
_INT8 = struct.Struct("!iq")  # length 8, value
_INT4 = struct.Struct("!ii")  # length 4, value
_FIELD = struct.Struct("!Ii")  # field type oid, length


class Encoded:
    """A parameter already in PostgreSQL's binary format, with its type's oid."""

    __slots__ = ("data", "oid")

    def __init__(self, data: bytes, oid: int) -> None:
        self.data = data
        self.oid = oid


class EncodedDumper(Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        data: bytes = obj.data
        return data

    def get_key(self, obj: Any, format: Any) -> Any:
        # One dumper per type oid: the oid is what psycopg declares for the parameter.
        return (Encoded, obj.oid)

    def upgrade(self, obj: Any, format: Any) -> Dumper:
        dumper = EncodedDumper(Encoded)
        dumper.oid = obj.oid
        return dumper


def register(adapters: AdaptersMap) -> None:
    adapters.register_dumper(Encoded, EncodedDumper)


def _array(
    element_oid: int, array_oid: int, pieces: list[bytes], count: int, has_nulls: bool = False
) -> Encoded:
    """`pieces`: the `count` elements, each as its length then its bytes (a NULL: length -1
    and no bytes), joined once with the header — a document is copied once, not per step."""
    if not count:
        return Encoded(struct.pack("!iii", 0, 0, element_oid), array_oid)
    header = _HEADER.pack(1, int(has_nulls), element_oid, count, 1)
    return Encoded(b"".join([header, *pieces]), array_oid)


_NULL = _LENGTH.pack(-1)


def _sized(data: bytes) -> bytes:
    return _LENGTH.pack(len(data)) + data


def _byte_strings(values: Iterable[bytes | None]) -> tuple[list[bytes], int, bool]:
    pieces: list[bytes] = []
    count, nulls = 0, False
    for value in values:
        count += 1
        if value is None:
            pieces.append(_NULL)
            nulls = True
        else:
            pieces += (_LENGTH.pack(len(value)), value)
    return pieces, count, nulls


def text_array(values: Iterable[str], encoding: str = "utf-8") -> Encoded:
    """Text in binary form is the client encoding's bytes (psycopg's own dumper does so)."""
    pieces, count, _ = _byte_strings(v.encode(encoding) for v in values)
    return _array(TEXT, TEXT_ARRAY, pieces, count)


def bytea_array(values: Iterable[bytes]) -> Encoded:
    pieces, count, _ = _byte_strings(bytes(v) for v in values)
    return _array(BYTEA, BYTEA_ARRAY, pieces, count)


def int8_array(values: Iterable[int]) -> Encoded:
    pieces = [_INT8.pack(8, v) for v in values]
    return _array(INT8, INT8_ARRAY, pieces, len(pieces))


def int4_array(values: Iterable[int]) -> Encoded:
    pieces = [_INT4.pack(4, v) for v in values]
    return _array(INT4, INT4_ARRAY, pieces, len(pieces))


def nullable_text_array(values: Iterable[str | None], encoding: str = "utf-8") -> Encoded:
    pieces, count, nulls = _byte_strings(None if v is None else v.encode(encoding) for v in values)
    return _array(TEXT, TEXT_ARRAY, pieces, count, has_nulls=nulls)


def nullable_int8_array(values: Iterable[int | None]) -> Encoded:
    pieces = [_NULL if v is None else _INT8.pack(8, v) for v in values]
    return _array(INT8, INT8_ARRAY, pieces, len(pieces), has_nulls=_NULL in pieces)


def column_array(kind: str, values: Sequence[Any], encoding: str) -> Encoded:
    """A column of rows as one array: `kind` "text" or "int8", NULLs allowed."""
    if kind == "text":
        return nullable_text_array(values, encoding)
    if kind == "int8":
        return nullable_int8_array(values)
    raise ValueError(f"no binary array for a column of kind {kind!r}")


def stored_events_array(
    events: Iterable[tuple[UUID | str, int, str, bytes]],
    *,
    type_oid: int,
    array_oid: int,
    id_is_uuid: bool,
    encoding: str = "utf-8",
) -> Encoded:
    """An array of the event store's composite (originator_id, originator_version, topic,
    state); the originator id is a uuid or text, as the store was created."""
    parts = []
    for originator_id, version, topic, state in events:
        if id_is_uuid:
            uuid = originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
            ident = uuid.bytes
            id_field = _FIELD.pack(UUID_OID, 16) + ident
        else:
            ident = str(originator_id).encode(encoding)
            id_field = _FIELD.pack(TEXT, len(ident)) + ident
        topic_bytes = topic.encode(encoding)
        state_bytes = bytes(state)
        record = b"".join(
            (
                _LENGTH.pack(4),  # fields
                id_field,
                _FIELD.pack(INT8, 8),
                struct.pack("!q", version),
                _FIELD.pack(TEXT, len(topic_bytes)),
                topic_bytes,
                _FIELD.pack(BYTEA, len(state_bytes)),
                state_bytes,
            )
        )
        parts.append(_sized(record))
    return _array(type_oid, array_oid, parts, len(parts))
