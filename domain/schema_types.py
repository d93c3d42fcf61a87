"""Iceberg schema types and values: JSON integer ranges, primitive type strings, nesting
depth and default values.

The rules mirror Java's `Types` and `SingleValueParser`, with PyIceberg (0.12) limits
where it reads less than Java (see `domain/schema_ids.py` for why a schema PyIceberg
cannot load is refused). Pure functions; nothing here mutates its inputs.
"""

from __future__ import annotations

import json
import re
from datetime import date, time
from typing import Any

from icelog.domain.errors import IllegalArgumentError

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


def is_int(value: Any) -> bool:
    """A JSON integer; `bool` is an `int` subclass in Python but never an id."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_int32(value: Any) -> bool:
    """A JSON integer that Java reads as an `int`."""
    return is_int(value) and INT_MIN <= value <= INT_MAX


def is_int64(value: Any) -> bool:
    """A JSON integer that Java reads as a `long`."""
    return is_int(value) and LONG_MIN <= value <= LONG_MAX


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
        raise IllegalArgumentError(
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
            raise IllegalArgumentError("Invalid CRS: (empty string)")
        if crs is None or crs.lower() == _DEFAULT_CRS.lower():
            return "geometry"
        return f"geometry({crs})"
    geography = _GEOGRAPHY.fullmatch(text)
    if geography:
        crs, algorithm = geography.group(1), geography.group(2)
        if crs == "":
            raise IllegalArgumentError("Invalid CRS: (empty string)")
        if algorithm is not None and algorithm.lower() not in _EDGE_ALGORITHMS:
            raise IllegalArgumentError(f"Invalid edge interpolation algorithm: {algorithm}")
        crs = _DEFAULT_CRS if crs is None or crs.lower() == _DEFAULT_CRS.lower() else crs
        algorithm = (algorithm or _DEFAULT_EDGE_ALGORITHM).lower()
        if crs == _DEFAULT_CRS and algorithm == _DEFAULT_EDGE_ALGORITHM:
            return "geography"
        return f"geography({crs}, {algorithm})"
    fixed = _FIXED.fullmatch(lower)
    if fixed:
        length = int(fixed.group(1))
        if length > INT_MAX:  # Integer.parseInt
            raise IllegalArgumentError(f"Cannot parse type string to primitive: {text}")
        return f"fixed[{length}]"
    decimal = _DECIMAL.fullmatch(lower)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if precision > INT_MAX or scale > INT_MAX:  # Integer.parseInt
            raise IllegalArgumentError(f"Cannot parse type string to primitive: {text}")
        if precision > MAX_DECIMAL_PRECISION:
            raise IllegalArgumentError(
                f"Decimals with precision larger than 38 are not supported: {precision}"
            )
        if precision < 1:
            # Java accepts decimal(0, s); PyIceberg refuses to load it ("Decimal precision
            # must be between 1 and 38"), and no value fits in it anyway.
            raise IllegalArgumentError(
                f"Decimals with precision smaller than 1 are not supported: {precision}"
            )
        return f"decimal({precision}, {scale})"
    raise IllegalArgumentError(f"Cannot parse type string to primitive: {text}")


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


def check_default(field: dict[str, Any], key: str, type_: Any) -> None:
    """Java `SingleValueParser.fromJson` and `NestedField.castDefault`."""
    value = field.get(key)
    if value is None:
        return
    if not isinstance(type_, str):
        kind = type_.get("type") if isinstance(type_, dict) else type_
        raise IllegalArgumentError(
            f"Invalid default value for {kind}: {brief(value)} (must be null)"
        )
    canonical = parse_primitive(type_)
    if not _valid_default(value, canonical):
        raise IllegalArgumentError(
            f"Cannot parse default as a {canonical} value: {brief(value)} "
            f"({key} of field {field.get('name')})"
        )
