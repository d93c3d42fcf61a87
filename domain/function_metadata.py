"""Iceberg UDF metadata (apache/iceberg `format/udf-spec.md`, format version 1): the checks
a function metadata document must pass, and the pure changes the catalog makes to one.

A function is one self-contained document: its definitions (one per signature), each with
versioned implementations, and a log of which version of each definition was current when.
icelog writes every document as an immutable file; the log holds the first document and,
per replace, the submitted changes and the time they were applied. Folding the changes with
`apply_function_changes` reproduces every later document exactly, so the fold must stay
deterministic for a given (document, changes, time): a behaviour change is a new event
version (ADR 0017).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from icelog.domain.errors import BadRequestError
from icelog.domain.json_limits import check_json_depth

FORMAT_VERSION = 1
FUNCTION_TYPES = ("udf", "udtf")
ON_NULL_INPUT = ("return-null", "call")
# Bounds on one document (a request is bounded by the body size as well): its definitions,
# the versions kept per definition, the log entries kept, the parameters of a signature.
MAX_DEFINITIONS = 100
MAX_VERSIONS = 50
MAX_LOG_ENTRIES = 100
MAX_PARAMETERS = 256
# Characters a type string must not contain: the spec forbids spaces and quotes; `<`, `>`
# and `:` would make a definition id (`list<int>`, `struct<a:int>`) ambiguous.
_FORBIDDEN_IN_TYPES = frozenset(" \t\r\n\"'`<>:")


def _bad(message: str) -> BadRequestError:
    return BadRequestError(f"Invalid function metadata: {message}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(item: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = item.get(key)
    if value is None and not required and key not in item:
        return None
    if not isinstance(value, str):
        raise _bad(f"{where}.{key} must be a string")
    return value


def _bool(item: dict[str, Any], key: str, where: str) -> None:
    if key in item and not isinstance(item[key], bool):
        raise _bad(f"{where}.{key} must be a boolean")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(f"{where} must be an object")
    return value


def _list(value: Any, where: str, *, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(f"{where} must be a list")
    if non_empty and not value:
        raise _bad(f"{where} must not be empty")
    return value


# -- types and signatures -----------------------------------------------------------------------
def canonical_type(value: Any, where: str = "type") -> str:
    """A function data type as the spec's definition-id writes it: primitives by name,
    `list<e>`, `map<k,v>`, `struct<name:type,...>`; 400 for anything that is not a type."""
    if isinstance(value, str):
        if not value or len(value) > 200 or any(c in _FORBIDDEN_IN_TYPES for c in value):
            raise _bad(f"{where}: {value[:200]!r} is not a type string")
        return value
    item = _object(value, where)
    kind = item.get("type")
    if kind == "list":
        if "element" not in item:
            raise _bad(f"{where}: a list type needs `element`")
        return f"list<{canonical_type(item['element'], where + '.element')}>"
    if kind == "map":
        if "key" not in item or "value" not in item:
            raise _bad(f"{where}: a map type needs `key` and `value`")
        key = canonical_type(item["key"], where + ".key")
        val = canonical_type(item["value"], where + ".value")
        return f"map<{key},{val}>"
    if kind == "struct":
        fields = _list(item.get("fields"), where + ".fields")
        parts = []
        names: set[str] = set()
        for n, raw in enumerate(fields):
            field = _object(raw, f"{where}.fields[{n}]")
            name = _text(field, "name", f"{where}.fields[{n}]")
            assert name is not None
            if not name or any(c in _FORBIDDEN_IN_TYPES or c == "," for c in name):
                raise _bad(f"{where}.fields[{n}].name {name[:200]!r} is not a field name")
            if name in names:
                raise _bad(f"{where}: field {name!r} appears twice")
            names.add(name)
            if "type" not in field:
                raise _bad(f"{where}.fields[{n}] needs `type`")
            parts.append(f"{name}:{canonical_type(field['type'], f'{where}.fields[{n}].type')}")
        return f"struct<{','.join(parts)}>"
    raise _bad(f"{where}: a type object's `type` must be list, map or struct")


def _is_struct(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "struct"


def check_parameters(parameters: Any, where: str) -> str:
    """The parameters of a signature; returns the definition id they derive."""
    params = _list(parameters, where)
    if len(params) > MAX_PARAMETERS:
        raise _bad(f"{where} has more than {MAX_PARAMETERS} parameters")
    names: set[str] = set()
    types = []
    for n, raw in enumerate(params):
        param = _object(raw, f"{where}[{n}]")
        name = _text(param, "name", f"{where}[{n}]")
        assert name is not None
        if not name:
            raise _bad(f"{where}[{n}].name must not be empty")
        if name in names:
            raise _bad(f"parameter {name!r} appears twice in {where}")
        names.add(name)
        _text(param, "doc", f"{where}[{n}]", required=False)
        if "type" not in param:
            raise _bad(f"{where}[{n}] needs `type`")
        types.append(canonical_type(param["type"], f"{where}[{n}].type"))
    return ",".join(types)


def _check_signature(definition: dict[str, Any], where: str) -> str:
    """The definition-level fields; returns the definition id its parameters derive."""
    derived = check_parameters(definition.get("parameters"), where + ".parameters")
    if "return-type" not in definition:
        raise _bad(f"{where} needs `return-type`")
    canonical_type(definition["return-type"], where + ".return-type")
    kind = definition.get("function-type")
    if kind not in FUNCTION_TYPES:
        raise _bad(f"{where}.function-type must be one of {', '.join(FUNCTION_TYPES)}")
    if kind == "udtf" and not _is_struct(definition["return-type"]):
        raise _bad(f"{where}: a udtf's return-type must be a struct")
    _bool(definition, "return-nullable", where)
    _text(definition, "doc", where, required=False)
    specific = _text(definition, "specific-name", where, required=False)
    if specific is not None and not specific:
        raise _bad(f"{where}.specific-name must not be empty")
    return derived


def _check_body(version: dict[str, Any], where: str) -> None:
    """What a version implements: representations (one per dialect) and its hints."""
    representations = _list(version.get("representations"), where + ".representations")
    if not representations:
        raise _bad(f"{where}.representations must not be empty")
    dialects: set[str] = set()
    for n, raw in enumerate(representations):
        rep = _object(raw, f"{where}.representations[{n}]")
        if rep.get("type") != "sql":
            raise _bad(f"{where}.representations[{n}].type must be 'sql'")
        dialect = _text(rep, "dialect", f"{where}.representations[{n}]")
        _text(rep, "sql", f"{where}.representations[{n}]")
        assert dialect is not None
        if not dialect:
            raise _bad(f"{where}.representations[{n}].dialect must not be empty")
        if dialect.lower() in dialects:
            raise _bad(f"{where}: more than one representation for dialect {dialect!r}")
        dialects.add(dialect.lower())
    _bool(version, "deterministic", where)
    if "on-null-input" in version and version["on-null-input"] not in ON_NULL_INPUT:
        raise _bad(f"{where}.on-null-input must be one of {', '.join(ON_NULL_INPUT)}")


# -- whole documents ------------------------------------------------------------------------------
def check_function_metadata(document: Any) -> None:
    """400 unless `document` is UDF metadata of format version 1 whose parts agree: each
    definition-id is the one its parameters derive, ids and specific names are unique, each
    definition's current version is one of its versions, version ids are unique."""
    doc = _object(document, "the document")
    check_json_depth(doc, "Function metadata")
    version = doc.get("format-version")
    if not _is_int(version) or version != FORMAT_VERSION:
        raise _bad(f"format-version must be {FORMAT_VERSION}")
    raw_uuid = doc.get("function-uuid")
    try:
        uuid.UUID(raw_uuid if isinstance(raw_uuid, str) else "")
    except ValueError:
        raise _bad("function-uuid must be a UUID") from None
    definitions = _list(doc.get("definitions"), "definitions", non_empty=True)
    if len(definitions) > MAX_DEFINITIONS:
        raise _bad(f"more than {MAX_DEFINITIONS} definitions")
    ids: set[str] = set()
    specific_names: set[str] = set()
    for n, raw in enumerate(definitions):
        where = f"definitions[{n}]"
        definition = _object(raw, where)
        derived = _check_signature(definition, where)
        given = _text(definition, "definition-id", where)
        if given != derived:
            raise _bad(f"{where}.definition-id {given!r} is not {derived!r} (its parameters)")
        if given in ids:
            raise _bad(f"definition {given!r} appears twice")
        ids.add(derived)
        specific = definition.get("specific-name")
        if specific is not None:
            if specific in specific_names:
                raise _bad(f"specific-name {specific!r} appears twice")
            specific_names.add(specific)
        versions = _list(definition.get("versions"), where + ".versions", non_empty=True)
        version_ids: set[int] = set()
        for m, raw_version in enumerate(versions):
            at = f"{where}.versions[{m}]"
            ver = _object(raw_version, at)
            vid = ver.get("version-id")
            if not isinstance(vid, int) or isinstance(vid, bool):
                raise _bad(f"{at}.version-id must be an integer")
            if vid in version_ids:
                raise _bad(f"{where}: version-id {vid} appears twice")
            version_ids.add(vid)
            if not _is_int(ver.get("timestamp-ms")):
                raise _bad(f"{at}.timestamp-ms must be an integer")
            _check_body(ver, at)
        current = definition.get("current-version-id")
        if not _is_int(current) or current not in version_ids:
            raise _bad(f"{where}.current-version-id must be the id of one of its versions")
    for n, raw in enumerate(_list(doc.get("definition-log"), "definition-log")):
        entry = _object(raw, f"definition-log[{n}]")
        if not _is_int(entry.get("timestamp-ms")):
            raise _bad(f"definition-log[{n}].timestamp-ms must be an integer")
        refs = _list(entry.get("definition-versions"), f"definition-log[{n}].definition-versions")
        for m, ref_raw in enumerate(refs):
            ref = _object(ref_raw, f"definition-log[{n}].definition-versions[{m}]")
            _text(ref, "definition-id", f"definition-log[{n}].definition-versions[{m}]")
            if not _is_int(ref.get("version-id")):
                raise _bad(f"definition-log[{n}].definition-versions[{m}].version-id")
    if "location" in doc and not isinstance(doc["location"], str):
        raise _bad("location must be a string")
    properties = doc.get("properties", {})
    if not isinstance(properties, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
    ):
        raise _bad("properties must map strings to strings")
    _bool(doc, "secure", "the document")
    _text(doc, "doc", "the document", required=False)


# -- what the catalog builds ---------------------------------------------------------------------
_SIGNATURE_FIELDS = (
    "specific-name",
    "parameters",
    "return-type",
    "return-nullable",
    "function-type",
    "doc",
)
_BODY_FIELDS = ("representations", "deterministic", "on-null-input")


def _definition_input(raw: Any, where: str) -> tuple[str, dict[str, Any]]:
    """A submitted definition (a signature and the body of its new current version):
    (its definition id, the submission)."""
    submitted = _object(raw, where)
    derived = _check_signature(submitted, where)
    given = submitted.get("definition-id")
    if given is not None and given != derived:
        raise _bad(f"{where}.definition-id {given!r} is not {derived!r} (its parameters)")
    _check_body(submitted, where)
    return derived, submitted


def _new_version(submitted: dict[str, Any], version_id: int, now_ms: int) -> dict[str, Any]:
    version: dict[str, Any] = {"version-id": version_id}
    for key in _BODY_FIELDS:
        if key in submitted:
            version[key] = copy.deepcopy(submitted[key])
    version["timestamp-ms"] = now_ms
    return version


def _body_of(version: dict[str, Any]) -> dict[str, Any]:
    return {key: version[key] for key in _BODY_FIELDS if key in version}


def _new_definition(definition_id: str, submitted: dict[str, Any], now_ms: int) -> dict[str, Any]:
    definition: dict[str, Any] = {"definition-id": definition_id}
    for key in _SIGNATURE_FIELDS:
        if key in submitted:
            definition[key] = copy.deepcopy(submitted[key])
    definition["versions"] = [_new_version(submitted, 1, now_ms)]
    definition["current-version-id"] = 1
    return definition


def _current_map(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"definition-id": d["definition-id"], "version-id": d["current-version-id"]}
        for d in definitions
    ]


def new_function_metadata(
    *,
    function_uuid: str,
    location: str,
    definitions: list[dict[str, Any]],
    doc: str | None,
    properties: dict[str, str],
    secure: bool | None,
    now_ms: int,
) -> dict[str, Any]:
    """The first document of a function made from submitted definitions: every definition
    at version 1, one definition-log entry."""
    if not definitions:
        raise _bad("a function needs at least one definition")
    if len(definitions) > MAX_DEFINITIONS:
        raise _bad(f"more than {MAX_DEFINITIONS} definitions")
    built: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, raw in enumerate(definitions):
        definition_id, submitted = _definition_input(raw, f"definitions[{n}]")
        if definition_id in seen:
            raise _bad(f"definition {definition_id!r} (the same signature) appears twice")
        seen.add(definition_id)
        built.append(_new_definition(definition_id, submitted, now_ms))
    _check_specific_names(built)
    metadata: dict[str, Any] = {
        "function-uuid": function_uuid,
        "format-version": FORMAT_VERSION,
        "definitions": built,
        "definition-log": [{"timestamp-ms": now_ms, "definition-versions": _current_map(built)}],
        "location": location,
        "properties": dict(properties),
        "secure": bool(secure),
    }
    if doc is not None:
        metadata["doc"] = doc
    check_function_metadata(metadata)
    return metadata


def adopt_function_metadata(document: Any, location: str) -> dict[str, Any]:
    """A complete document a client brings (moving a function between catalogs): checked,
    and placed at the catalog's `location` (the only field the catalog sets)."""
    check_function_metadata(document)
    adopted = copy.deepcopy(document)
    adopted["location"] = location
    return dict(adopted)


def _check_specific_names(definitions: list[dict[str, Any]]) -> None:
    names = [d["specific-name"] for d in definitions if "specific-name" in d]
    for name in names:
        if names.count(name) > 1:
            raise _bad(f"specific-name {name!r} is used by more than one definition")


def _trim(definition: dict[str, Any]) -> None:
    """Keep the newest MAX_VERSIONS versions of a definition, and always its current one."""
    versions = definition["versions"]
    if len(versions) <= MAX_VERSIONS:
        return
    current = definition["current-version-id"]
    newest = sorted(versions, key=lambda v: v["version-id"])[-MAX_VERSIONS:]
    keep = {v["version-id"] for v in newest} | {current}
    definition["versions"] = [v for v in versions if v["version-id"] in keep]


def check_function_changes(changes: Any) -> None:
    """The shape of a replace's changes (what `apply_function_changes` takes): 400 if not."""
    item = _object(changes, "the changes")
    check_json_depth(item, "Function changes")
    allowed = {"definitions", "remove-definitions", "set-current-versions", "doc", "properties",
               "secure"}  # fmt: skip
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise _bad(f"unknown change {unknown[0]!r}")
    for n, raw in enumerate(_list(item.get("definitions", []), "definitions")):
        _definition_input(raw, f"definitions[{n}]")
    for n, raw in enumerate(_list(item.get("remove-definitions", []), "remove-definitions")):
        if not isinstance(raw, str):
            raise _bad(f"remove-definitions[{n}] must be a string")
    for n, raw in enumerate(_list(item.get("set-current-versions", []), "set-current-versions")):
        ref = _object(raw, f"set-current-versions[{n}]")
        _text(ref, "definition-id", f"set-current-versions[{n}]")
        if not _is_int(ref.get("version-id")):
            raise _bad(f"set-current-versions[{n}].version-id must be an integer")
    if "doc" in item and item["doc"] is not None and not isinstance(item["doc"], str):
        raise _bad("doc must be a string")
    if "properties" in item:
        properties = item["properties"]
        if not isinstance(properties, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
        ):
            raise _bad("properties must map strings to strings")
    _bool(item, "secure", "the changes")


def apply_function_changes(
    base: dict[str, Any], changes: dict[str, Any], *, now_ms: int
) -> dict[str, Any]:
    """The document after a replace; `base` itself when nothing changes.

    - `definitions`: each submission becomes the current version of its signature: a new
      definition at version 1, or a new version (the highest id + 1) of an existing one
      unless its body equals the current version's. An existing definition keeps its
      return-type and function-type (drop it and add it again to change them); its
      parameter names and docs, nullability, specific name and doc are the submission's.
    - `remove-definitions`: definition ids to remove.
    - `set-current-versions`: roll definitions back (or forward) to versions they keep.
    - `doc` (null removes it), `properties` (the whole map), `secure`.
    A definition-log entry records the current versions whenever they change."""
    check_function_changes(changes)
    metadata = copy.deepcopy(base)
    definitions: list[dict[str, Any]] = metadata["definitions"]
    by_id = {d["definition-id"]: d for d in definitions}
    submitted = [
        _definition_input(raw, f"definitions[{n}]")
        for n, raw in enumerate(changes.get("definitions", []))
    ]
    submitted_ids = [definition_id for definition_id, _ in submitted]
    removed = list(changes.get("remove-definitions", []))
    rollbacks = list(changes.get("set-current-versions", []))
    touched = submitted_ids + removed + [r["definition-id"] for r in rollbacks]
    for definition_id in touched:
        if touched.count(definition_id) > 1:
            raise _bad(f"definition {definition_id!r} is changed more than once")
    for definition_id in removed:
        if definition_id not in by_id:
            raise _bad(f"cannot remove definition {definition_id!r}: there is none")
        definitions.remove(by_id.pop(definition_id))
    for definition_id, submission in submitted:
        existing = by_id.get(definition_id)
        if existing is None:
            created = _new_definition(definition_id, submission, now_ms)
            definitions.append(created)
            by_id[definition_id] = created
            continue
        for key in ("return-type", "function-type"):
            if existing.get(key) != submission.get(key):
                raise _bad(
                    f"definition {definition_id!r} cannot change its {key}: "
                    "remove it and add it again"
                )
        for key in _SIGNATURE_FIELDS:
            if key in submission:
                existing[key] = copy.deepcopy(submission[key])
            else:
                existing.pop(key, None)
        versions = existing["versions"]
        current = next(v for v in versions if v["version-id"] == existing["current-version-id"])
        if _body_of(current) != _body_of(submission):
            version_id = max(v["version-id"] for v in versions) + 1
            versions.append(_new_version(submission, version_id, now_ms))
            existing["current-version-id"] = version_id
            _trim(existing)
    for ref in rollbacks:
        target = by_id.get(ref["definition-id"])
        if target is None:
            raise _bad(f"there is no definition {ref['definition-id']!r}")
        if all(v["version-id"] != ref["version-id"] for v in target["versions"]):
            raise _bad(f"definition {ref['definition-id']!r} has no version {ref['version-id']}")
        target["current-version-id"] = ref["version-id"]
    if not definitions:
        raise _bad("a function needs at least one definition (drop the function instead)")
    if len(definitions) > MAX_DEFINITIONS:
        raise _bad(f"more than {MAX_DEFINITIONS} definitions")
    _check_specific_names(definitions)
    if "doc" in changes:
        if changes["doc"] is None:
            metadata.pop("doc", None)
        else:
            metadata["doc"] = changes["doc"]
    if "properties" in changes:
        metadata["properties"] = dict(changes["properties"])
    if "secure" in changes:
        metadata["secure"] = bool(changes["secure"])
    if _current_map(definitions) != _current_map(base["definitions"]):
        log = metadata["definition-log"]
        log.append({"timestamp-ms": now_ms, "definition-versions": _current_map(definitions)})
        del log[:-MAX_LOG_ENTRIES]
    if metadata == base:
        return base
    check_function_metadata(metadata)
    return metadata


def function_metadata_file_name(version: int, file_uuid: str) -> str:
    """`%05d-<uuid>.metadata.json`, as tables and views name theirs."""
    return f"{version:05d}-{file_uuid}.metadata.json"
