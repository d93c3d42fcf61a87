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
from datetime import date, time
from typing import Any

from icelog.domain.errors import IllegalArgumentError, ValidationError

# First format version that allows each v3-only type (Java MIN_FORMAT_VERSIONS).
V3_TYPE_PREFIXES = ("timestamp_ns", "timestamptz_ns", "variant", "unknown", "geometry", "geography")
DEFAULT_VALUES_MIN_FORMAT_VERSION = 3

# Java `int` and `long`: ids, counts and positions are parsed with JsonUtil.getInt / getLong,
# which refuse JSON numbers outside these ranges.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# How deeply struct, list and map types may nest: the schema's own struct is level 1, a
# struct/list/map column in it level 2, and so on (primitives add nothing). Java has no
# such limit (Jackson stops at 1,000 JSON levels); PyIceberg 0.12 does, and it fails
# without a clear error, so icelog bounds it. Measured with PyIceberg 0.12.0 /
# pydantic-core 2.50 (REST TableResponse parse + Schema + schema_to_pyarrow, by bisecting
# sys.setrecursionlimit; tests/integration/test_metadata_loads_in_pyiceberg.py keeps it):
# - a struct level costs 3 JSON levels, and pydantic-core's JSON parser stops at 200
#   ("recursion limit exceeded"): a table document loads with at most 66 nested structs,
#   a REST LoadTableResult (one level more) with 65;
# - PyIceberg's validators recurse in Python: ~15 frames per struct level, ~7 per list or
#   map level, so 65 structs or 139 lists already use Python's whole default limit of 1,000
#   frames (RecursionError) even when called from the top of a stack.
# 32 levels stay below half of both (about 100 JSON levels and 500 frames), leaving room for
# the caller's own stack and for the REST envelopes, events and request bodies that wrap a
# schema (orjson writes at most 254 levels). Real schemas rarely pass 15 (BigQuery's limit).
MAX_SCHEMA_DEPTH = 32

MAX_DECIMAL_PRECISION = 38  # Java Types.DecimalType

# Java `Types.TYPES` keys (looked up after lower-casing the whole string).
_SIMPLE_TYPES = frozenset(
    {
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "date",
        "time",
        "timestamp",
        "timestamptz",
        "timestamp_ns",
        "timestamptz_ns",
        "string",
        "uuid",
        "binary",
        "variant",
        "unknown",
        "geometry",
        "geography",
    }
)
# Java's patterns use ASCII `\d`, `\s` and `\w`; Python's would also take other digits.
_WS = r"[ \t\n\x0b\f\r]"
_DECIMAL = re.compile(rf"decimal\({_WS}*([0-9]+){_WS}*,{_WS}*([0-9]+){_WS}*\)")
_FIXED = re.compile(rf"fixed\[{_WS}*([0-9]+){_WS}*\]")
_GEOMETRY = re.compile(rf"geometry{_WS}*(?:\({_WS}*([^)]*?){_WS}*\))?", re.IGNORECASE | re.ASCII)
_GEOGRAPHY = re.compile(
    rf"geography{_WS}*(?:\({_WS}*([^,]*?){_WS}*(?:,{_WS}*(\w*){_WS}*)?\))?",
    re.IGNORECASE | re.ASCII,
)
_DEFAULT_CRS = "OGC:CRS84"
_DEFAULT_EDGE_ALGORITHM = "spherical"
_EDGE_ALGORITHMS = ("spherical", "vincenty", "thomas", "andoyer", "karney")


def _bad(message: str) -> IllegalArgumentError:
    return IllegalArgumentError(message)


def _is_int(value: Any) -> bool:
    # bool is an int subclass in Python, but never a valid id in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def is_int32(value: Any) -> bool:
    """A JSON integer that Java reads as an `int`."""
    return _is_int(value) and INT_MIN <= value <= INT_MAX


def is_int64(value: Any) -> bool:
    """A JSON integer that Java reads as a `long`."""
    return _is_int(value) and LONG_MIN <= value <= LONG_MAX


def brief(value: Any, limit: int = 200) -> str:
    """A value for an error message: JSON, cut short, and never a RecursionError."""
    try:
        shown = json.dumps(value)
    except (RecursionError, TypeError, ValueError):
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def is_primitive(type_: Any) -> bool:
    return isinstance(type_, str)


def primitive_name(type_: str) -> str:
    """The type family, e.g. 'decimal' for 'decimal(9,2)'."""
    return re.split(r"[\[(]", type_.strip().lower(), maxsplit=1)[0].strip()


# ---------------------------------------------------------------------- nesting depth


def _nested_children(node: dict[str, Any]) -> list[Any]:
    kind = node.get("type")
    if kind == "struct":
        fields = node.get("fields")
        if not isinstance(fields, list):
            return []
        return [f.get("type") for f in fields if isinstance(f, dict)]
    if kind == "list":
        return [node.get("element")]
    if kind == "map":
        return [node.get("key"), node.get("value")]
    return []


def type_depth(type_: Any, limit: int = MAX_SCHEMA_DEPTH) -> int:
    """How deeply struct/list/map types nest in `type_` (a primitive is 0), counted
    without recursion and on unvalidated input; stops at `limit + 1`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(type_, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict) or node.get("type") not in ("struct", "list", "map"):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in _nested_children(node))
    return deepest


def check_schema_depth(schema: Any) -> None:
    """400 (IllegalArgumentException) for types nested deeper than MAX_SCHEMA_DEPTH."""
    if type_depth(schema) > MAX_SCHEMA_DEPTH:
        raise _bad(
            f"Invalid schema: struct, list and map types nest deeper than {MAX_SCHEMA_DEPTH} levels"
        )


# ---------------------------------------------------------------------- primitive types


def parse_primitive(text: str) -> str:
    """Java `Types.fromTypeName`: the canonical form of a primitive type string, or 400.

    The canonical form is how Java writes the type back (`decimal(9, 2)`, `fixed[16]`),
    which is also the only spelling PyIceberg 0.12 reads: it matches type names
    case-sensitively and allows no space inside `decimal(`/`fixed[`. A geometry or
    geography with the default CRS (and edge algorithm) is written bare.
    """
    lower = text.lower()
    if lower in _SIMPLE_TYPES:
        return lower
    geometry = _GEOMETRY.fullmatch(text)
    if geometry:
        crs = geometry.group(1)
        if crs == "":
            raise _bad("Invalid CRS: (empty string)")
        if crs is None or crs.lower() == _DEFAULT_CRS.lower():
            return "geometry"
        return f"geometry({crs})"
    geography = _GEOGRAPHY.fullmatch(text)
    if geography:
        crs, algorithm = geography.group(1), geography.group(2)
        if crs == "":
            raise _bad("Invalid CRS: (empty string)")
        if algorithm is not None and algorithm.lower() not in _EDGE_ALGORITHMS:
            raise _bad(f"Invalid edge interpolation algorithm: {algorithm}")
        crs = _DEFAULT_CRS if crs is None or crs.lower() == _DEFAULT_CRS.lower() else crs
        algorithm = (algorithm or _DEFAULT_EDGE_ALGORITHM).lower()
        if crs == _DEFAULT_CRS and algorithm == _DEFAULT_EDGE_ALGORITHM:
            return "geography"
        return f"geography({crs}, {algorithm})"
    fixed = _FIXED.fullmatch(lower)
    if fixed:
        length = int(fixed.group(1))
        if length > INT_MAX:  # Integer.parseInt
            raise _bad(f"Cannot parse type string to primitive: {text}")
        return f"fixed[{length}]"
    decimal = _DECIMAL.fullmatch(lower)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if precision > INT_MAX or scale > INT_MAX:  # Integer.parseInt
            raise _bad(f"Cannot parse type string to primitive: {text}")
        if precision > MAX_DECIMAL_PRECISION:
            raise _bad(f"Decimals with precision larger than 38 are not supported: {precision}")
        if precision < 1:
            # Java accepts decimal(0, s); PyIceberg refuses to load it ("Decimal precision
            # must be between 1 and 38"), and no value fits in it anyway.
            raise _bad(f"Decimals with precision smaller than 1 are not supported: {precision}")
        return f"decimal({precision}, {scale})"
    raise _bad(f"Cannot parse type string to primitive: {text}")


# ---------------------------------------------------------------------- default values

_HEX = re.compile(r"[0-9a-fA-F]*")
_UUID_VALUE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_DECIMAL_VALUE = re.compile(r"[+-]?(?:[0-9]+(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?")
# Java's ISO formats allow more (no seconds, 1-9 fraction digits, `Z`), PyIceberg's fewer
# (timestamps need seconds and an `+HH:MM` offset; Python 3.10's fromisoformat takes 3 or 6
# fraction digits): only what both read is accepted.
_FRACTION = r"(?:\.(?:[0-9]{3}|[0-9]{6}))?"
_DATE_VALUE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME_VALUE = re.compile(rf"([0-9]{{2}}):([0-9]{{2}})(?::([0-9]{{2}}){_FRACTION})?")
_TIMESTAMP_VALUE = re.compile(
    rf"([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})T([0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}{_FRACTION})"
    r"([+-][0-9]{2}:[0-9]{2})?"
)


def _valid_date(text: str) -> bool:
    match = _DATE_VALUE.fullmatch(text)
    if not match:
        return False
    try:
        date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return False
    return True


def _valid_time(text: str) -> bool:
    match = _TIME_VALUE.fullmatch(text)
    if not match:
        return False
    try:
        time(int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    except ValueError:
        return False
    return True


def _valid_decimal(text: str, type_: str) -> bool:
    match = _DECIMAL_VALUE.fullmatch(text)
    if not match:
        return False
    digits_after_point = len(match.group(1) or match.group(2) or "")
    exponent = int(match.group(3) or 0)
    scale = int(type_[type_.index(",") + 1 : -1])
    # BigDecimal's scale; Java refuses a default whose scale differs from the type's.
    return digits_after_point - exponent == scale


def _valid_default(value: Any, type_: str) -> bool:
    family = primitive_name(type_)
    if family == "boolean":
        return isinstance(value, bool)
    if family == "int":
        return is_int32(value)
    if family == "long":
        return is_int64(value)
    if family in ("float", "double"):
        # Jackson's isFloatingPointNumber: 5 is not a float default, 5.0 is.
        return isinstance(value, float)
    if not isinstance(value, str):
        return False
    if family == "string":
        return True
    if family == "decimal":
        return _valid_decimal(value, type_)
    if family == "uuid":
        return _UUID_VALUE.fullmatch(value) is not None
    if family == "date":
        return _valid_date(value)
    if family == "time":
        return _valid_time(value)
    if family in ("timestamp", "timestamptz"):
        match = _TIMESTAMP_VALUE.fullmatch(value)
        if not match or not _valid_date(match.group(1)) or not _valid_time(match.group(2)):
            return False
        offset = match.group(3)
        # Java: a timestamptz default must be in UTC ("offset must be +00:00").
        return offset is None if family == "timestamp" else offset in ("+00:00", "-00:00")
    if family == "fixed":
        length = int(type_[type_.index("[") + 1 : -1])
        return len(value) == 2 * length and _HEX.fullmatch(value) is not None
    if family == "binary":
        return len(value) % 2 == 0 and _HEX.fullmatch(value) is not None
    # timestamp_ns / timestamptz_ns: Java reads them, but PyIceberg 0.12 has no JSON reader
    # for nanosecond defaults and fails to load the schema. unknown, variant, geometry and
    # geography have no single-value form (Java: "Type ... is not supported").
    return False


def _check_default(field: dict[str, Any], key: str, type_: Any) -> None:
    """Java `SingleValueParser.fromJson` and `NestedField.castDefault`."""
    value = field.get(key)
    if value is None:
        return
    if not isinstance(type_, str):
        kind = type_.get("type") if isinstance(type_, dict) else type_
        raise _bad(f"Invalid default value for {kind}: {brief(value)} (must be null)")
    canonical = parse_primitive(type_)
    if not _valid_default(value, canonical):
        raise _bad(
            f"Cannot parse default as a {canonical} value: {brief(value)} "
            f"({key} of field {field.get('name')})"
        )


# ---------------------------------------------------------------------- validation


def _check_id(value: Any, key: str, where: str) -> None:
    if not _is_int(value):
        raise _bad(f"Cannot parse missing int: {key} in {where}")
    if not is_int32(value):
        raise _bad(f"Cannot parse to an integer value: {key}: {value}")
    if value < 0:
        # Java does not check; every writer counts ids up from 1 (last-column-id), and a
        # negative id collides with the -1 Iceberg uses for "no id" in several places.
        raise _bad(f"Invalid {key} in {where}: {value} (must not be negative)")


def _check_required_type(required: bool, type_: Any, name: str) -> None:
    # Java NestedField: an unknown-typed value can only ever be null.
    if required and isinstance(type_, str) and type_.lower() == "unknown":
        raise _bad(f"Cannot create required field with unknown type: {name}")


def validate_type(type_: Any, where: str) -> None:
    """400 unless `type_` is a well-formed Iceberg type (recursively).

    Callers bound the nesting first (`check_schema_depth`): this recursion follows it.
    """
    if isinstance(type_, str):
        parse_primitive(type_)
        return
    if not isinstance(type_, dict):
        raise _bad(f"Cannot parse type from json for {where}: {brief(type_)}")
    kind = type_.get("type")
    if kind == "struct":
        fields = type_.get("fields")
        if not isinstance(fields, list):
            raise _bad(f"Cannot parse struct fields from non-array for {where}")
        for field in fields:
            validate_field(field, where)
    elif kind == "list":
        _check_id(type_.get("element-id"), "element-id", f"list type for {where}")
        if not isinstance(type_.get("element-required"), bool):
            raise _bad(f"Cannot parse missing boolean: element-required for {where}")
        if "element" not in type_:
            raise _bad(f"Cannot parse missing field: element for {where}")
        validate_type(type_["element"], f"{where}.element")
        _check_required_type(type_["element-required"], type_["element"], "element")
    elif kind == "map":
        for key in ("key-id", "value-id"):
            _check_id(type_.get(key), key, f"map type for {where}")
        if not isinstance(type_.get("value-required"), bool):
            raise _bad(f"Cannot parse missing boolean: value-required for {where}")
        for key in ("key", "value"):
            if key not in type_:
                raise _bad(f"Cannot parse missing field: {key} for {where}")
        validate_type(type_["key"], f"{where}.key")
        validate_type(type_["value"], f"{where}.value")
        _check_required_type(True, type_["key"], "key")  # map keys are always required
        _check_required_type(type_["value-required"], type_["value"], "value")
    else:
        raise _bad(f"Cannot parse type from json for {where}: {brief(type_)}")


def validate_field(field: Any, where: str) -> None:
    if not isinstance(field, dict):
        raise _bad(f"Cannot parse struct field from non-object in {where}")
    _check_id(field.get("id"), "id", f"field of {where}")
    if not isinstance(field.get("name"), str):
        raise _bad(f"Cannot parse missing string: name in field {field.get('id')} of {where}")
    if not isinstance(field.get("required"), bool):
        raise _bad(f"Cannot parse missing boolean: required in field {field['name']}")
    if field.get("doc") is not None and not isinstance(field["doc"], str):
        raise _bad(f"Cannot parse to a string value: doc: {brief(field['doc'])}")
    if "type" not in field:
        raise _bad(f"Cannot parse missing field: type in field {field['name']}")
    validate_type(field["type"], field["name"])
    _check_required_type(field["required"], field["type"], field["name"])
    for key in ("initial-default", "write-default"):
        _check_default(field, key, field["type"])


def validate_schema(schema: Any) -> None:
    """400 for a schema Java's `SchemaParser` and `Schema` refuse: shape, id ranges, types,
    defaults, nesting depth, duplicate ids or names, identifier fields."""
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise _bad("Cannot parse schema: expected a struct type")
    check_schema_depth(schema)
    validate_type(schema, "schema")
    if (
        "schema-id" in schema
        and schema["schema-id"] is not None
        and not is_int32(schema["schema-id"])
    ):
        raise _bad("Cannot parse schema-id: not an integer")
    seen: set[int] = set()
    by_name: dict[str, int] = {}
    for field_id, name, _field in iter_fields(schema):
        if field_id in seen:
            raise _bad(f"Invalid schema: multiple fields with id {field_id}")
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
        raise _bad("Cannot parse identifier-field-ids: expected an array of integers")
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
            raise _bad(f"Unsupported type for {name}: variant (PyIceberg cannot load it)")
        if type_.startswith(("geometry(", "geography(")):
            raise _bad(
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
            raise _bad(f"Cannot add fieldId {fid} as an identifier field: field does not exist")
        name = names.get(fid, str(fid))
        if not is_primitive(field["type"]):
            raise _bad(
                f"Cannot add field {name} as an identifier field: not a primitive type field"
            )
        if not field["required"]:
            raise _bad(f"Cannot add field {name} as an identifier field: not a required field")
        if primitive_name(field["type"]) in ("float", "double"):
            raise _bad(
                f"Cannot add field {name} as an identifier field: must not be float or double field"
            )
        parent = parents.get(fid)
        while parent is not None:
            if parent.get("_container") or not parent.get("required", False):
                raise _bad(
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
