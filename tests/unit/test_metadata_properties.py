"""Property test: random valid commit sequences give metadata PyIceberg accepts.

Each example creates a table (format v1, v2 or v3), then applies a random
series of requests shaped like the ones Java and PyIceberg clients send
(schema evolution, partition and sort evolution, property changes, appends on
main and on branches, tags, rollbacks, snapshot expiry, ref removal, format
upgrades). After every request the result must parse in PyIceberg, survive a
serialise/parse round trip and satisfy the invariants the Java parser checks.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyiceberg.table.metadata import TableMetadataUtil

from icelog.domain.table_metadata import Metadata, apply_updates, new_table_metadata

UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"
LOC = "s3://bucket/db/t"

COLUMN_TYPES = ["int", "long", "string", "double", "date", "timestamp", "boolean"]
TRANSFORMS = {
    "int": ["identity", "bucket[4]", "truncate[10]"],
    "long": ["identity", "bucket[8]"],
    "string": ["identity", "bucket[16]", "truncate[3]"],
    "double": ["identity"],
    "date": ["identity", "year", "month", "day"],
    "timestamp": ["identity", "day", "hour"],
    "boolean": ["identity"],
}
KINDS = [
    "add-column",
    "add-spec",
    "add-sort-order",
    "set-properties",
    "remove-properties",
    "append",
    "double-append",
    "branch-append",
    "tag",
    "rollback",
    "remove-snapshots",
    "remove-ref",
    "upgrade",
]


def initial(version: int) -> Metadata:
    schema = {
        "type": "struct",
        "schema-id": 3,
        "fields": [
            {"id": 7, "name": "id", "required": True, "type": "long"},
            {"id": 8, "name": "name", "required": False, "type": "string"},
            {
                "id": 9,
                "name": "point",
                "required": False,
                "type": {
                    "type": "struct",
                    "fields": [
                        {"id": 10, "name": "x", "required": True, "type": "double"},
                        {"id": 11, "name": "y", "required": True, "type": "double"},
                    ],
                },
            },
            {
                "id": 12,
                "name": "tags",
                "required": False,
                "type": {
                    "type": "map",
                    "key-id": 13,
                    "key": "string",
                    "value-id": 14,
                    "value": {
                        "type": "list",
                        "element-id": 15,
                        "element": "int",
                        "element-required": False,
                    },
                    "value-required": False,
                },
            },
        ],
        "identifier-field-ids": [7],
    }
    spec = {"fields": [{"source-id": 7, "name": "id_bucket", "transform": "bucket[16]"}]}
    return new_table_metadata(
        uuid=UUID,
        location=LOC,
        schema=schema,
        partition_spec=spec,
        sort_order=None,
        properties={"format-version": str(version), "owner": "me"},
        now_ms=1_000,
    )


class Driver:
    """Builds valid requests for the current metadata from hypothesis draws."""

    def __init__(self, data: st.DataObject, meta: Metadata) -> None:
        self.data = data
        self.meta = meta
        self.clock = 1_000
        self.next_snapshot_id = 100

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def current_schema(self) -> dict[str, Any]:
        m = self.meta
        schema: dict[str, Any] = next(
            s for s in m["schemas"] if s["schema-id"] == m["current-schema-id"]
        )
        return schema

    def primitive_columns(self) -> list[dict[str, Any]]:
        return [f for f in self.current_schema()["fields"] if isinstance(f["type"], str)]

    def snapshot_ids(self) -> list[int]:
        return [s["snapshot-id"] for s in self.meta["snapshots"]]

    def new_snapshot(self, parent: int | None) -> dict[str, Any]:
        m = self.meta
        self.next_snapshot_id += 1
        rows = self.draw(st.integers(0, 50))
        snap: dict[str, Any] = {
            "snapshot-id": self.next_snapshot_id,
            "timestamp-ms": self.clock,
            "manifest-list": f"{LOC}/metadata/snap-{self.next_snapshot_id}.avro",
            "summary": {"operation": "append", "added-records": str(rows)},
            "schema-id": m["current-schema-id"],
        }
        if parent is not None:
            snap["parent-snapshot-id"] = parent
        if m["format-version"] >= 2:
            snap["sequence-number"] = m["last-sequence-number"] + 1
        if m["format-version"] >= 3:
            snap["first-row-id"] = m["next-row-id"]
            snap["added-rows"] = rows
        return snap

    def updates(self, kind: str) -> list[dict[str, Any]]:
        m = self.meta
        refs = m.get("refs", {})
        if kind == "add-column":
            schema = dict(self.current_schema())
            new_id = m["last-column-id"] + 1
            column = {
                "id": new_id,
                "name": f"c{new_id}",
                "required": False,
                "type": self.draw(st.sampled_from(COLUMN_TYPES)),
            }
            schema["fields"] = [*schema["fields"], column]
            return [
                {"action": "add-schema", "schema": schema, "last-column-id": new_id},
                {"action": "set-current-schema", "schema-id": -1},
            ]
        if kind == "add-spec":
            columns = self.draw(
                st.lists(
                    st.sampled_from(self.primitive_columns()),
                    max_size=3,
                    unique_by=lambda c: c["id"],
                )
            )
            first = 1000 if m["format-version"] == 1 else m["last-partition-id"] + 1
            fields = []
            for i, col in enumerate(columns):
                transform = self.draw(st.sampled_from(TRANSFORMS[col["type"]]))
                name = (
                    col["name"] if transform == "identity" else f"{col['name']}_{transform[:3]}{i}"
                )
                fields.append(
                    {
                        "source-id": col["id"],
                        "field-id": first + i,
                        "name": name,
                        "transform": transform,
                    }
                )
            ups: list[dict[str, Any]] = [
                {"action": "add-spec", "spec": {"spec-id": 0, "fields": fields}}
            ]
            if self.draw(st.booleans()):
                # Like Java: -1 only for a spec this request adds, else its id.
                key = [(f["source-id"], f["transform"], f["name"]) for f in fields]
                same = [
                    s["spec-id"]
                    for s in m["partition-specs"]
                    if [(f["source-id"], f["transform"], f["name"]) for f in s["fields"]] == key
                ]
                ups.append({"action": "set-default-spec", "spec-id": same[0] if same else -1})
            return ups
        if kind == "add-sort-order":
            columns = self.draw(
                st.lists(
                    st.sampled_from(self.primitive_columns()),
                    max_size=2,
                    unique_by=lambda c: c["id"],
                )
            )
            fields = [
                {
                    "source-id": c["id"],
                    "transform": "identity",
                    "direction": self.draw(st.sampled_from(["asc", "desc"])),
                    "null-order": self.draw(st.sampled_from(["nulls-first", "nulls-last"])),
                }
                for c in columns
            ]
            ups = [{"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": fields}}]
            if self.draw(st.booleans()):
                same = [o["order-id"] for o in m["sort-orders"] if o["fields"] == fields]
                ups.append(
                    {"action": "set-default-sort-order", "sort-order-id": same[0] if same else -1}
                )
            return ups
        if kind == "set-properties":
            key = self.draw(st.sampled_from(["a", "b", "write.metadata.previous-versions-max"]))
            value = self.draw(st.sampled_from(["1", "2", "5"]))
            return [{"action": "set-properties", "updates": {key: value}}]
        if kind == "remove-properties":
            keys = self.draw(st.lists(st.sampled_from(["a", "b", "owner", "missing"]), max_size=2))
            return [{"action": "remove-properties", "removals": keys}]
        if kind in ("append", "double-append"):
            main = refs.get("main")
            first = self.new_snapshot(main["snapshot-id"] if main else None)
            ups = [
                {"action": "add-snapshot", "snapshot": first},
                set_ref("main", "branch", first["snapshot-id"]),
            ]
            if kind == "double-append":
                # A transaction with two appends: the first is an intermediate snapshot.
                self.meta = apply_updates(m, ups, now_ms=self.clock, previous_location=None)
                second = self.new_snapshot(first["snapshot-id"])
                self.meta = m
                ups += [
                    {"action": "add-snapshot", "snapshot": second},
                    set_ref("main", "branch", second["snapshot-id"]),
                ]
            return ups
        if kind == "branch-append":
            name = self.draw(st.sampled_from(["b1", "b2"]))
            existing = refs.get(name)
            if existing is not None and existing["type"] != "branch":
                return []
            snap = self.new_snapshot(existing["snapshot-id"] if existing else None)
            return [
                {"action": "add-snapshot", "snapshot": snap},
                set_ref(name, "branch", snap["snapshot-id"]),
            ]
        if kind == "tag":
            if not self.snapshot_ids() or refs.get("t1", {}).get("type") == "branch":
                return []
            target = self.draw(st.sampled_from(self.snapshot_ids()))
            extra = {"max-ref-age-ms": 86_400_000} if self.draw(st.booleans()) else {}
            return [set_ref("t1", "tag", target, **extra)]
        if kind == "rollback":
            if not self.snapshot_ids():
                return []
            target = self.draw(st.sampled_from(self.snapshot_ids()))
            return [set_ref("main", "branch", target)]
        if kind == "remove-snapshots":
            if not self.snapshot_ids():
                return []
            ids = self.draw(
                st.lists(st.sampled_from(self.snapshot_ids()), min_size=1, max_size=3, unique=True)
            )
            # Java sends one update per id.
            return [{"action": "remove-snapshots", "snapshot-ids": [i]} for i in ids]
        if kind == "remove-ref":
            if not refs:
                return []
            return [
                {
                    "action": "remove-snapshot-ref",
                    "ref-name": self.draw(st.sampled_from(sorted(refs))),
                }
            ]
        # upgrade
        version = self.draw(st.integers(m["format-version"], 3))
        return [{"action": "upgrade-format-version", "format-version": version}]


def set_ref(name: str, type_: str, snapshot_id: int, **extra: Any) -> dict[str, Any]:
    """The update that points ref `name` (a branch or a tag) at a snapshot."""
    return {
        "action": "set-snapshot-ref",
        "ref-name": name,
        "type": type_,
        "snapshot-id": snapshot_id,
        **extra,
    }


def all_field_ids(type_: Any) -> list[int]:
    if not isinstance(type_, dict):
        return []
    ids: list[int] = []
    if type_["type"] == "struct":
        for f in type_["fields"]:
            ids += [f["id"], *all_field_ids(f["type"])]
    elif type_["type"] == "list":
        ids += [type_["element-id"], *all_field_ids(type_["element"])]
    else:
        ids += [
            type_["key-id"],
            type_["value-id"],
            *all_field_ids(type_["key"]),
            *all_field_ids(type_["value"]),
        ]
    return ids


def content(item: dict[str, Any], id_key: str) -> str:
    return json.dumps({k: v for k, v in item.items() if k != id_key}, sort_keys=True)


class Ledger:
    """Remembers what every schema/spec/order id meant, across all commits."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, int], str] = {}

    def record(self, m: Metadata) -> None:
        for kind, key, id_key in (
            ("schema", "schemas", "schema-id"),
            ("spec", "partition-specs", "spec-id"),
            ("order", "sort-orders", "order-id"),
        ):
            ids = [item[id_key] for item in m[key]]
            assert len(ids) == len(set(ids)), f"duplicate {kind} ids {ids}"
            for item in m[key]:
                text = content(item, id_key)
                if kind == "spec":
                    # Spec reuse ignores field ids (Java compatibleWith).
                    text = json.dumps(
                        [(f["source-id"], f["transform"], f["name"]) for f in item["fields"]]
                    )
                previous = self.seen.setdefault((kind, item[id_key]), text)
                assert previous == text, f"{kind} id {item[id_key]} reused for different content"


def check_invariants(m: Metadata) -> None:
    version = m["format-version"]
    refs = m["refs"]
    snapshots = {s["snapshot-id"]: s for s in m["snapshots"]}
    main = refs.get("main")
    if main is None:
        assert m["current-snapshot-id"] == (None if version >= 3 else -1)
    else:
        assert m["current-snapshot-id"] == main["snapshot-id"]
        assert main["type"] == "branch"
        assert m["snapshot-log"], "current snapshot without snapshot-log"
        assert m["snapshot-log"][-1]["snapshot-id"] == main["snapshot-id"]
    for ref in refs.values():
        assert ref["snapshot-id"] in snapshots
    for entry in m["snapshot-log"]:
        assert entry["snapshot-id"] in snapshots
    for schema in m["schemas"]:
        assert all(fid <= m["last-column-id"] for fid in all_field_ids(schema))
    for spec in m["partition-specs"]:
        assert all(f["field-id"] <= m["last-partition-id"] for f in spec["fields"])
    if version == 1:
        assert "last-sequence-number" not in m
        assert all("sequence-number" not in s for s in snapshots.values())
        current = next(s for s in m["schemas"] if s["schema-id"] == m["current-schema-id"])
        assert m["schema"] == current
        default = next(s for s in m["partition-specs"] if s["spec-id"] == m["default-spec-id"])
        assert m["partition-spec"] == default["fields"]
    else:
        assert "schema" not in m and "partition-spec" not in m
        assert all(
            s.get("sequence-number", 0) <= m["last-sequence-number"] for s in snapshots.values()
        )
    if version >= 3:
        assert m["next-row-id"] >= max(
            (
                s["first-row-id"] + s["added-rows"]
                for s in snapshots.values()
                if "first-row-id" in s
            ),
            default=0,
        )
    else:
        assert "next-row-id" not in m
    assert any(s["spec-id"] == m["default-spec-id"] for s in m["partition-specs"])
    assert any(o["order-id"] == m["default-sort-order-id"] for o in m["sort-orders"])
    for log in ("snapshot-log", "metadata-log"):
        if m[log]:
            assert m["last-updated-ms"] >= m[log][-1]["timestamp-ms"]
    max_log = int(m["properties"].get("write.metadata.previous-versions-max", "100"))
    assert len(m["metadata-log"]) <= max(1, max_log)


def check_pyiceberg(m: Metadata) -> None:
    raw = json.dumps(m)
    parsed = TableMetadataUtil.parse_raw(raw)
    assert parsed.format_version == m["format-version"]
    current = m["current-snapshot-id"]
    assert parsed.current_snapshot_id == (None if current in (None, -1) else current)
    assert str(parsed.table_uuid) == m["table-uuid"]
    # PyIceberg refuses to write v3 (model_dump_json raises); pydantic's own
    # serialiser gives the same JSON shape for the round trip.
    dumped = pydantic.BaseModel.model_dump_json(parsed, by_alias=True, exclude_none=True)
    assert TableMetadataUtil.parse_raw(dumped) == parsed
    assert TableMetadataUtil.parse_obj(json.loads(raw)) == parsed


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.sampled_from([1, 2, 3]), data=st.data())
def test_random_commit_sequences_stay_valid(version: int, data: st.DataObject) -> None:
    meta = initial(version)
    check_invariants(meta)
    check_pyiceberg(meta)
    ledger = Ledger()
    ledger.record(meta)
    driver = Driver(data, meta)
    steps = data.draw(st.integers(1, 12))
    for step in range(steps):
        driver.clock += data.draw(st.integers(0, 5_000))
        kind = data.draw(st.sampled_from(KINDS))
        updates = driver.updates(kind)
        previous = f"{LOC}/metadata/{step:05d}-x.metadata.json"
        result = apply_updates(meta, updates, now_ms=driver.clock, previous_location=previous)
        event(f"{kind}: {'no-op' if result is meta else 'changed'}")
        if result is meta:
            continue
        assert result["metadata-log"][-1] == {
            "timestamp-ms": meta["last-updated-ms"],
            "metadata-file": previous,
        }
        check_invariants(result)
        check_pyiceberg(result)
        ledger.record(result)
        meta = result
        driver.meta = meta
