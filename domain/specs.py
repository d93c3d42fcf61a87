"""Partition specs and sort orders as JSON dicts: binding and compatibility.

Mirrors Java `PartitionSpec`, `UnboundPartitionSpec.bind`, `SortOrder` and
their `checkCompatibility`, so that a spec or order the Java server would
refuse is refused here with the same message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from icelog.domain.errors import IllegalArgumentError, ValidationError
from icelog.domain.metadata_rules import legacy
from icelog.domain.schema_ids import (
    id_to_name,
    id_to_type,
)
from icelog.domain.schema_types import (
    INT_MAX,
    brief,
    is_int32,
    is_primitive,
    primitive_name,
)

PARTITION_DATA_ID_START = 1000
UNPARTITIONED_LAST_ASSIGNED_ID = PARTITION_DATA_ID_START - 1

_TRANSFORM = re.compile(r"^(identity|year|month|day|hour|void|(bucket|truncate)\[([0-9]+)\])$")
_LEGACY_TRANSFORM = re.compile(
    r"^(identity|year|month|day|hour|void|bucket\[\d+\]|truncate\[\d+\])$"
)
_DIRECTIONS = ("asc", "desc")
_NULL_ORDERS = ("nulls-first", "nulls-last")

# Source type families each transform accepts (Java `Transform.canTransform`).
_TEMPORAL = {"date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}
_HOURLY = {"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}
_BUCKETABLE = {"int", "long", "decimal", "time", *_TEMPORAL, "string", "uuid", "fixed", "binary"}
_TRUNCATABLE = {"int", "long", "decimal", "string", "binary"}
_NOT_IDENTITY = {"variant", "geometry", "geography", "unknown"}


def _int(value: Any) -> bool:
    """An id as the rules in force read it: a Java int, or (rules 1) any JSON integer."""
    if legacy():
        return isinstance(value, int) and not isinstance(value, bool)
    return is_int32(value)


def normalize_transform(transform: Any) -> str:
    """Lower-cased canonical transform string (`bucket[16]`); 400 if unknown or out of range."""
    if not isinstance(transform, str):
        raise IllegalArgumentError(f"Cannot parse transform: {brief(transform)}")
    norm = re.sub(r"\s+", "", transform.lower())
    if legacy():  # rules 1: no argument normalisation or range checks
        if not _LEGACY_TRANSFORM.match(norm):
            raise IllegalArgumentError(f"Unsupported transform: {brief(transform)}")
        return norm
    match = _TRANSFORM.match(norm)
    if not match:
        # Java keeps unknown transforms (UnknownTransform) for forward
        # compatibility, but cannot bind them; a server must not accept them.
        raise IllegalArgumentError(f"Unsupported transform: {brief(transform)}")
    if match.group(2) is None:
        return norm
    name, argument = match.group(2), int(match.group(3))
    if argument > INT_MAX:
        # Java Transforms.fromString: Integer.parseInt fails (NumberFormatException).
        raise IllegalArgumentError(f"Invalid transform argument: {transform} (not an int)")
    if argument <= 0:
        # Java Bucket.get / Truncate.get; PyIceberg would divide by zero on write.
        if name == "bucket":
            raise IllegalArgumentError(f"Invalid number of buckets: {argument} (must be > 0)")
        raise IllegalArgumentError(f"Invalid truncate width: {argument} (must be > 0)")
    return f"{name}[{argument}]"


def source_ids(field: dict[str, Any]) -> list[int]:
    """Source column ids of a partition or sort field (`source-id` or v3 `source-ids`)."""
    if "source-ids" in field and field["source-ids"] is not None:
        ids = field["source-ids"]
        if not isinstance(ids, list) or not ids or not all(_int(i) for i in ids):
            raise IllegalArgumentError(
                "Cannot parse source-ids: expected a non-empty array of integers"
            )
        if len(ids) > 1 and not legacy():
            # No transform Java ships takes several arguments yet, and PyIceberg 0.12
            # refuses to load such a field ("Multi argument transforms are not yet supported").
            raise IllegalArgumentError(
                f"Invalid source-ids: {ids} (multi-argument transforms are not supported)"
            )
        return list(ids)
    if not _int(field.get("source-id")):
        raise IllegalArgumentError("Cannot parse missing int: source-id")
    return [field["source-id"]]


def with_source_ids(field: dict[str, Any], ids: list[int]) -> dict[str, Any]:
    """Copy of `field` with its source ids replaced, keeping its JSON form."""
    if "source-ids" in field and field["source-ids"] is not None:
        return {**field, "source-ids": ids}
    return {**field, "source-id": ids[0]}


def _can_transform(transform: str, source_type: Any) -> bool:
    if not is_primitive(source_type):
        return False
    family = primitive_name(source_type)
    if transform == "void":
        return True
    if transform == "identity":
        return family not in _NOT_IDENTITY
    if transform in ("year", "month", "day"):
        return family in _TEMPORAL
    if transform == "hour":
        return family in _HOURLY
    if transform.startswith("bucket"):
        return family in _BUCKETABLE
    return family in _TRUNCATABLE


def _check_field_types(
    kind: str, field: dict[str, Any], transform: str, schema: dict[str, Any]
) -> None:
    types = id_to_type(schema)
    parents = _container_parents(schema) if kind == "partition" and not legacy() else {}
    for sid in source_ids(field):
        source_type = types.get(sid)
        if source_type is None:
            if transform == "void" and (kind == "partition" or legacy()):
                # Java allows a void field whose source column was dropped (v1 tables);
                # SortOrder.checkCompatibility has no such exception.
                continue
            raise ValidationError(f"Cannot find source column for {kind} field: {_show(field)}")
        if not is_primitive(source_type):
            noun = "partition" if kind == "partition" else "sort"
            raise ValidationError(
                f"Cannot {noun} by non-primitive source field: {brief(source_type)}"
            )
        if not _can_transform(transform, source_type):
            raise ValidationError(f"Invalid source type {source_type} for transform: {transform}")
        if sid in parents and transform != "void":
            # Java PartitionSpec.checkCompatibility: only structs may enclose a source
            # (void fields are exempt from its checks).
            raise ValidationError(f"Invalid partition field parent: {brief(parents[sid])}")


def _container_parents(schema: dict[str, Any]) -> dict[int, Any]:
    """Field id -> the nearest list or map type enclosing it, for fields inside one."""
    inside: dict[int, Any] = {}

    def walk(type_: Any, container: Any) -> None:
        if not isinstance(type_, dict):
            return
        kind = type_.get("type")
        if kind == "struct":
            for f in type_["fields"]:
                if container is not None:
                    inside[f["id"]] = container
                walk(f["type"], container)
        elif kind == "list":
            inside[type_["element-id"]] = type_
            walk(type_["element"], type_)
        elif kind == "map":
            inside[type_["key-id"]] = type_
            inside[type_["value-id"]] = type_
            walk(type_["key"], type_)
            walk(type_["value"], type_)

    walk(schema, None)
    return inside


def _show(field: dict[str, Any]) -> str:
    try:
        return json.dumps(field, separators=(",", ":"))
    except (RecursionError, TypeError, ValueError):
        return brief(field)


def check_spec_compatibility(spec: dict[str, Any], schema: dict[str, Any]) -> None:
    """Java `PartitionSpec.checkCompatibility`."""
    for field in spec["fields"]:
        _check_field_types("partition", field, normalize_transform(field.get("transform")), schema)


def check_order_compatibility(order: dict[str, Any], schema: dict[str, Any]) -> None:
    """Java `SortOrder.checkCompatibility`."""
    for field in order["fields"]:
        _check_field_types("sort", field, normalize_transform(field.get("transform")), schema)


def bind_spec(
    spec: Any,
    schema: dict[str, Any],
    *,
    spec_id: int,
    first_new_field_id: int,
    reassign_field_ids: bool,
) -> dict[str, Any]:
    """Validate an unbound spec against `schema` and return the bound JSON.

    Field ids missing from the request (or all of them, with
    `reassign_field_ids`) are numbered from `first_new_field_id`.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("fields", []), list):
        raise IllegalArgumentError(
            "Cannot parse partition spec: expected an object with a fields array"
        )
    names_in_schema = {name: fid for fid, name in id_to_name(schema).items()}
    next_id = first_new_field_id
    used_names: set[str] = set()
    fields: list[dict[str, Any]] = []
    for raw in spec.get("fields", []):
        if not isinstance(raw, dict):
            raise IllegalArgumentError("Cannot parse partition field from non-object")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise IllegalArgumentError("Cannot parse missing string: name in partition field")
        transform = normalize_transform(raw.get("transform"))
        ids = source_ids(raw)
        _check_field_types("partition", raw, transform, schema)
        if name in used_names:
            raise IllegalArgumentError(f"Cannot use partition name more than once: {name}")
        used_names.add(name)
        schema_field = names_in_schema.get(name)
        if schema_field is not None:
            if transform == "identity":
                if schema_field != ids[0]:
                    raise IllegalArgumentError(
                        "Cannot create identity partition sourced from different field "
                        f"in schema: {name}"
                    )
            elif transform != "void":
                raise IllegalArgumentError(
                    f"Cannot create partition from name that exists in schema: {name}"
                )
        field_id = raw.get("field-id")
        if reassign_field_ids or field_id is None:
            field_id = next_id
        elif not _int(field_id):
            raise IllegalArgumentError("Cannot parse field-id: not an integer")
        next_id = max(next_id, field_id + 1)
        bound = {k: v for k, v in raw.items() if k not in ("source-id", "source-ids", "field-id")}
        bound = with_source_ids({**bound, **_source_keys(raw)}, ids)
        bound["transform"] = transform
        bound["field-id"] = field_id
        fields.append(_ordered_partition_field(bound))
    return {"spec-id": spec_id, "fields": fields}


def _source_keys(raw: dict[str, Any]) -> dict[str, Any]:
    if "source-ids" in raw and raw["source-ids"] is not None:
        return {"source-ids": raw["source-ids"]}
    return {"source-id": raw.get("source-id")}


def _ordered_partition_field(field: dict[str, Any]) -> dict[str, Any]:
    # Java's PartitionSpecParser order: name, transform, source-id(s), field-id.
    head = ("name", "transform", "source-id", "source-ids", "field-id")
    out = {k: field[k] for k in head if k in field}
    out.update({k: v for k, v in field.items() if k not in out})
    return out


def spec_last_assigned_id(spec: dict[str, Any]) -> int:
    return max((f["field-id"] for f in spec["fields"]), default=UNPARTITIONED_LAST_ASSIGNED_ID)


def has_sequential_ids(spec: dict[str, Any]) -> bool:
    """v1 requires partition field ids 1000, 1001, ... in order."""
    return all(f["field-id"] == PARTITION_DATA_ID_START + i for i, f in enumerate(spec["fields"]))


def spec_compatible_with(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Java `PartitionSpec.compatibleWith`: same sources, transforms and names, in order."""
    if len(a["fields"]) != len(b["fields"]):
        return False
    for x, y in zip(a["fields"], b["fields"], strict=True):
        if source_ids(x) != source_ids(y) or x["name"] != y["name"]:
            return False
        if normalize_transform(x["transform"]) != normalize_transform(y["transform"]):
            return False
    return True


def bind_sort_order(order: Any, schema: dict[str, Any], *, order_id: int) -> dict[str, Any]:
    """Validate an unbound sort order against `schema`; unsorted gets id 0."""
    if not isinstance(order, dict) or not isinstance(order.get("fields", []), list):
        raise IllegalArgumentError(
            "Cannot parse sort order: expected an object with a fields array"
        )
    fields: list[dict[str, Any]] = []
    for raw in order.get("fields", []):
        if not isinstance(raw, dict):
            raise IllegalArgumentError("Cannot parse sort field from non-object")
        transform = normalize_transform(raw.get("transform"))
        direction = str(raw.get("direction", "")).lower()
        null_order = str(raw.get("null-order", "")).lower()
        if direction not in _DIRECTIONS:
            raise IllegalArgumentError(f"Invalid sort direction: {raw.get('direction')}")
        if null_order not in _NULL_ORDERS:
            raise IllegalArgumentError(f"Invalid null order: {raw.get('null-order')}")
        ids = source_ids(raw)
        _check_field_types("sort", raw, transform, schema)
        bound = with_source_ids(
            {
                "transform": transform,
                **_source_keys(raw),
                "direction": direction,
                "null-order": null_order,
            },
            ids,
        )
        fields.append(bound)
    return {"order-id": order_id if fields else 0, "fields": fields}


def same_order(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Java `SortOrder.sameOrder`: same fields, ignoring the order id."""
    if len(a["fields"]) != len(b["fields"]):
        return False
    for x, y in zip(a["fields"], b["fields"], strict=True):
        if source_ids(x) != source_ids(y):
            return False
        for key in ("transform", "direction", "null-order"):
            if str(x.get(key)).lower() != str(y.get(key)).lower():
                return False
    return True


def remap_source_ids(
    field: dict[str, Any], old_names: dict[int, str], new_ids: dict[str, int], kind: str
) -> dict[str, Any]:
    """Move a field's source ids from one schema to another by column name."""
    mapped: list[int] = []
    for sid in source_ids(field):
        name = old_names.get(sid)
        if name is None or name not in new_ids:
            raise ValidationError(f"Cannot find source column for {kind} field: {_show(field)}")
        mapped.append(new_ids[name])
    return with_source_ids(field, mapped)
