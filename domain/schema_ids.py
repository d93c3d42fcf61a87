"""Iceberg schema JSON: validation, field indexes and fresh id assignment.

Schemas are the dicts of the spec's JSON form (`{"type": "struct", "fields":
[...]}`). Everything here is pure and never mutates its inputs. The rules
mirror Java's `SchemaParser`, `Types`, `SingleValueParser`, `Schema`,
`TypeUtil.assignFreshIds` and `Schema.checkCompatibility`, because clients
compare our answers with what the Java reference server would return. Where
PyIceberg (0.12) cannot load something Java accepts, the schema is refused as
well, and the rule says so: a table its clients cannot load is worse than a 400.

Entry point for anything that stores a schema: `prepare_schema`, which
validates, checks the format version, refuses what PyIceberg cannot read and
returns the schema with its primitive types written as Java writes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from icelog.domain.errors import IllegalArgumentError, ValidationError
from icelog.domain.schema_types import (
    DEFAULT_VALUES_MIN_FORMAT_VERSION,
    V3_TYPE_PREFIXES,
    brief,
    check_default,
    check_schema_depth,
    is_int,
    is_int32,
    is_primitive,
    parse_primitive,
    primitive_name,
)

# ---------------------------------------------------------------------- validation


def _check_id(value: Any, key: str, where: str) -> None:
    if not is_int(value):
        raise IllegalArgumentError(f"Cannot parse missing int: {key} in {where}")
    if not is_int32(value):
        raise IllegalArgumentError(f"Cannot parse to an integer value: {key}: {value}")
    if value < 0:
        # Java does not check; every writer counts ids up from 1 (last-column-id), and a
        # negative id collides with the -1 Iceberg uses for "no id" in several places.
        raise IllegalArgumentError(f"Invalid {key} in {where}: {value} (must not be negative)")


def _check_required_type(required: bool, type_: Any, name: str) -> None:
    # Java NestedField: an unknown-typed value can only ever be null.
    if required and isinstance(type_, str) and type_.lower() == "unknown":
        raise IllegalArgumentError(f"Cannot create required field with unknown type: {name}")


def validate_type(type_: Any, where: str) -> None:
    """400 unless `type_` is a well-formed Iceberg type (recursively).

    Callers bound the nesting first (`check_schema_depth`): this recursion follows it.
    """
    if isinstance(type_, str):
        parse_primitive(type_)
        return
    if not isinstance(type_, dict):
        raise IllegalArgumentError(f"Cannot parse type from json for {where}: {brief(type_)}")
    kind = type_.get("type")
    if kind == "struct":
        fields = type_.get("fields")
        if not isinstance(fields, list):
            raise IllegalArgumentError(f"Cannot parse struct fields from non-array for {where}")
        for field in fields:
            validate_field(field, where)
    elif kind == "list":
        _check_id(type_.get("element-id"), "element-id", f"list type for {where}")
        if not isinstance(type_.get("element-required"), bool):
            raise IllegalArgumentError(
                f"Cannot parse missing boolean: element-required for {where}"
            )
        if "element" not in type_:
            raise IllegalArgumentError(f"Cannot parse missing field: element for {where}")
        validate_type(type_["element"], f"{where}.element")
        _check_required_type(type_["element-required"], type_["element"], "element")
    elif kind == "map":
        for key in ("key-id", "value-id"):
            _check_id(type_.get(key), key, f"map type for {where}")
        if not isinstance(type_.get("value-required"), bool):
            raise IllegalArgumentError(f"Cannot parse missing boolean: value-required for {where}")
        for key in ("key", "value"):
            if key not in type_:
                raise IllegalArgumentError(f"Cannot parse missing field: {key} for {where}")
        validate_type(type_["key"], f"{where}.key")
        validate_type(type_["value"], f"{where}.value")
        _check_required_type(True, type_["key"], "key")  # map keys are always required
        _check_required_type(type_["value-required"], type_["value"], "value")
    else:
        raise IllegalArgumentError(f"Cannot parse type from json for {where}: {brief(type_)}")


def validate_field(field: Any, where: str) -> None:
    if not isinstance(field, dict):
        raise IllegalArgumentError(f"Cannot parse struct field from non-object in {where}")
    _check_id(field.get("id"), "id", f"field of {where}")
    if not isinstance(field.get("name"), str):
        raise IllegalArgumentError(
            f"Cannot parse missing string: name in field {field.get('id')} of {where}"
        )
    if not isinstance(field.get("required"), bool):
        raise IllegalArgumentError(
            f"Cannot parse missing boolean: required in field {field['name']}"
        )
    if field.get("doc") is not None and not isinstance(field["doc"], str):
        raise IllegalArgumentError(f"Cannot parse to a string value: doc: {brief(field['doc'])}")
    if "type" not in field:
        raise IllegalArgumentError(f"Cannot parse missing field: type in field {field['name']}")
    validate_type(field["type"], field["name"])
    _check_required_type(field["required"], field["type"], field["name"])
    for key in ("initial-default", "write-default"):
        check_default(field, key, field["type"])


def validate_schema(schema: Any) -> None:
    """400 for a schema Java's `SchemaParser` and `Schema` refuse: shape, id ranges, types,
    defaults, nesting depth, duplicate ids or names, identifier fields."""
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise IllegalArgumentError("Cannot parse schema: expected a struct type")
    check_schema_depth(schema)
    validate_type(schema, "schema")
    if (
        "schema-id" in schema
        and schema["schema-id"] is not None
        and not is_int32(schema["schema-id"])
    ):
        raise IllegalArgumentError("Cannot parse schema-id: not an integer")
    seen: set[int] = set()
    by_name: dict[str, int] = {}
    for field_id, name, _field in iter_fields(schema):
        if field_id in seen:
            raise IllegalArgumentError(f"Invalid schema: multiple fields with id {field_id}")
        seen.add(field_id)
        if name in by_name:
            # Java IndexByName (and PyIceberg): full names must be unique, so a column
            # named "a.b" collides with field b of struct a.
            raise ValidationError(
                f"Invalid schema: multiple fields for name {name}: {by_name[name]} and {field_id}"
            )
        by_name[name] = field_id
    ident = schema.get("identifier-field-ids") or []
    if not isinstance(ident, list) or not all(is_int32(i) for i in ident):
        raise IllegalArgumentError(
            "Cannot parse identifier-field-ids: expected an array of integers"
        )
    _validate_identifier_fields(schema, ident)


# ---------------------------------------------------------------------- what PyIceberg reads


def check_pyiceberg_support(schema: dict[str, Any]) -> None:
    """400 for valid (normalised) types PyIceberg 0.12 cannot load.

    Java accepts them, but PyIceberg's type parser knows no `variant`, and reads a
    geometry/geography CRS only in quotes while Java writes it bare (`geometry(srid:4326)`),
    so no non-default CRS or edge algorithm loads in both.
    """
    for _fid, name, type_ in iter_fields(schema):
        if not isinstance(type_, str):
            continue
        if type_ == "variant":
            raise IllegalArgumentError(
                f"Unsupported type for {name}: variant (PyIceberg cannot load it)"
            )
        if type_.startswith(("geometry(", "geography(")):
            raise IllegalArgumentError(
                f"Unsupported type for {name}: {type_} (PyIceberg reads geometry and "
                "geography only with the default CRS and edge algorithm)"
            )


def _normalize_type(type_: Any) -> Any:
    if isinstance(type_, str):
        return parse_primitive(type_)
    kind = type_["type"]
    if kind == "struct":
        return {
            **type_,
            "fields": [{**f, "type": _normalize_type(f["type"])} for f in type_["fields"]],
        }
    if kind == "list":
        return {**type_, "element": _normalize_type(type_["element"])}
    return {**type_, "key": _normalize_type(type_["key"]), "value": _normalize_type(type_["value"])}


def normalize_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A validated schema with every primitive type in Java's canonical spelling."""
    out: dict[str, Any] = _normalize_type(schema)
    return out


def prepare_schema(schema: Any, format_version: int | None) -> dict[str, Any]:
    """Everything a schema goes through before it is stored: Java's parser rules, the format
    version's rules (`Schema.checkCompatibility`; views have none), what PyIceberg can load;
    returns a normalised copy (canonical type strings, containers not shared with `schema`
    along the type tree)."""
    validate_schema(schema)
    if format_version is not None:
        check_compatibility(schema, format_version)
    normalized = normalize_schema(schema)
    check_pyiceberg_support(normalized)
    return normalized


def _validate_identifier_fields(schema: dict[str, Any], ids: list[int]) -> None:
    # Java Schema.validateIdentifierField: required primitive, not float/double,
    # and reachable only through required structs.
    parents: dict[int, dict[str, Any] | None] = {}
    fields: dict[int, dict[str, Any]] = {}

    def walk(type_: Any, parent: dict[str, Any] | None) -> None:
        for child_id, child, child_type in _children(type_):
            parents[child_id] = parent
            if child is not None:
                fields[child_id] = child
            walk(child_type, child if child is not None else {"_container": True})

    walk(schema, None)
    names = id_to_name(schema)
    for fid in ids:
        field = fields.get(fid)
        if field is None:
            raise IllegalArgumentError(
                f"Cannot add fieldId {fid} as an identifier field: field does not exist"
            )
        name = names.get(fid, str(fid))
        if not is_primitive(field["type"]):
            raise IllegalArgumentError(
                f"Cannot add field {name} as an identifier field: not a primitive type field"
            )
        if not field["required"]:
            raise IllegalArgumentError(
                f"Cannot add field {name} as an identifier field: not a required field"
            )
        if primitive_name(field["type"]) in ("float", "double"):
            raise IllegalArgumentError(
                f"Cannot add field {name} as an identifier field: must not be float or double field"
            )
        parent = parents.get(fid)
        while parent is not None:
            if parent.get("_container") or not parent.get("required", False):
                raise IllegalArgumentError(
                    f"Cannot add field {name} as an identifier field: "
                    "must not be nested in an optional "
                    "field or in a list or map"
                )
            parent = parents.get(parent["id"])


def _children(type_: Any) -> Iterator[tuple[int, dict[str, Any] | None, Any]]:
    """(id, struct field or None, type) for the direct children of a type."""
    if not isinstance(type_, dict):
        return
    kind = type_.get("type")
    if kind == "struct":
        for field in type_["fields"]:
            yield field["id"], field, field["type"]
    elif kind == "list":
        yield type_["element-id"], None, type_["element"]
    elif kind == "map":
        yield type_["key-id"], None, type_["key"]
        yield type_["value-id"], None, type_["value"]


def iter_fields(schema: dict[str, Any]) -> Iterator[tuple[int, str, Any]]:
    """(id, full dotted name, type) for every field, list element and map key/value."""

    def walk(type_: Any, prefix: str) -> Iterator[tuple[int, str, Any]]:
        kind = type_.get("type") if isinstance(type_, dict) else None
        for child_id, child, child_type in _children(type_):
            if child is not None:
                local = child["name"]
            elif kind == "list":
                local = "element"
            else:
                local = "key" if child_id == type_["key-id"] else "value"
            name = f"{prefix}.{local}" if prefix else local
            yield child_id, name, child_type
            yield from walk(child_type, name)

    yield from walk(schema, "")


def id_to_name(schema: dict[str, Any]) -> dict[int, str]:
    return {fid: name for fid, name, _ in iter_fields(schema)}


def id_to_type(schema: dict[str, Any]) -> dict[int, Any]:
    return {fid: type_ for fid, _, type_ in iter_fields(schema)}


def highest_field_id(schema: dict[str, Any]) -> int:
    return max((fid for fid, _, _ in iter_fields(schema)), default=0)


def check_compatibility(schema: dict[str, Any], format_version: int) -> None:
    """Java `Schema.checkCompatibility`: v3-only types and initial defaults.

    Java gates only non-null `initial-default` (not `write-default`): a write
    default changes nothing for readers of older formats.
    """
    problems: dict[int, str] = {}
    for fid, name, type_ in iter_fields(schema):
        if (
            isinstance(type_, str)
            and format_version < 3
            and primitive_name(type_) in V3_TYPE_PREFIXES
        ):
            problems[fid] = f"Invalid type for {name}: {type_} is not supported until v3"
    if format_version < DEFAULT_VALUES_MIN_FORMAT_VERSION:
        for fid, name, field in _struct_fields(schema):
            default = field.get("initial-default")
            if default is not None and fid not in problems:
                shown = default if isinstance(default, str) else json.dumps(default)
                problems[fid] = (
                    f"Invalid initial default for {name}: non-null default ({shown}) "
                    f"is not supported until v{DEFAULT_VALUES_MIN_FORMAT_VERSION}"
                )
    if problems:
        details = "\n- ".join(problems[k] for k in sorted(problems))
        raise ValidationError(f"Invalid schema for v{format_version}:\n- {details}")


def _struct_fields(schema: dict[str, Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    names = id_to_name(schema)

    def walk(type_: Any) -> Iterator[tuple[int, str, dict[str, Any]]]:
        for child_id, child, child_type in _children(type_):
            if child is not None:
                yield child_id, names[child_id], child
            yield from walk(child_type)

    yield from walk(schema)


def _canonical_type(type_: Any) -> Any:
    if isinstance(type_, str):
        return re.sub(r"\s+", "", type_.lower())
    kind = type_["type"]
    if kind == "struct":
        return ("struct", tuple(_canonical_field(f) for f in type_["fields"]))
    if kind == "list":
        return (
            "list",
            type_["element-id"],
            type_["element-required"],
            _canonical_type(type_["element"]),
        )
    return (
        "map",
        type_["key-id"],
        _canonical_type(type_["key"]),
        type_["value-id"],
        type_["value-required"],
        _canonical_type(type_["value"]),
    )


def _canonical_field(field: dict[str, Any]) -> Any:
    return (
        field["id"],
        field["name"],
        field["required"],
        field.get("doc"),
        _canonical_type(field["type"]),
        json.dumps(field.get("initial-default"), sort_keys=True),
        json.dumps(field.get("write-default"), sort_keys=True),
    )


def same_schema(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Java `Schema.sameSchema`: same struct and same identifier fields."""
    return _canonical_type(a) == _canonical_type(b) and set(
        a.get("identifier-field-ids") or []
    ) == set(b.get("identifier-field-ids") or [])


def assign_fresh_ids(schema: dict[str, Any], schema_id: int) -> dict[str, Any]:
    """Java `TypeUtil.assignFreshIds`: renumber every field from 1.

    The order is Java's (and PyIceberg's): all fields of a struct get their
    ids first, then each field's nested type is numbered in turn; a list
    element or a map key/value id is taken before its type is visited.
    Identifier fields are remapped by name.
    """
    counter = iter(range(1, 1 << 31))

    def next_id() -> int:
        return next(counter)

    fresh = _fresh_type(schema, next_id)
    old_names = id_to_name(schema)
    new_ids = {name: fid for fid, name in id_to_name(fresh).items()}
    result: dict[str, Any] = {"type": "struct", "schema-id": schema_id}
    ident = [new_ids[old_names[i]] for i in schema.get("identifier-field-ids") or []]
    if ident:
        result["identifier-field-ids"] = ident
    result["fields"] = fresh["fields"]
    return result


def _fresh_type(type_: Any, next_id: Callable[[], int]) -> Any:
    if not isinstance(type_, dict):
        return type_
    kind = type_["type"]
    if kind == "struct":
        ids = [next_id() for _ in type_["fields"]]
        fields = []
        for new_id, field in zip(ids, type_["fields"], strict=True):
            fields.append({**field, "id": new_id, "type": _fresh_type(field["type"], next_id)})
        return {"type": "struct", "fields": fields}
    if kind == "list":
        element_id = next_id()
        return {
            **type_,
            "element-id": element_id,
            "element": _fresh_type(type_["element"], next_id),
        }
    key_id = next_id()
    value_id = next_id()
    return {
        **type_,
        "key-id": key_id,
        "key": _fresh_type(type_["key"], next_id),
        "value-id": value_id,
        "value": _fresh_type(type_["value"], next_id),
    }
