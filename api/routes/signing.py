"""S3 remote signing: the client describes an S3 request, the catalog checks it stays in a
table's location and answers with SigV4 headers made with the warehouse's credential.

Two forms: table-scoped (`.../namespaces/{ns}/tables/{table}/sign`, the form our load-table
config hands out) and warehouse-wide (`/v1/{prefix}/v1/aws/s3/sign`, the S3 signer spec's
default path), where the table is the live one whose location holds the object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import json_response, namespace_param, path_param
from icelog.api.models.catalog import S3SignRequest
from icelog.api.routes import prefix, services
from icelog.commands.storage import access_for
from icelog.commands.storage.s3.signing import S3Target, check_allowed, parse_target, sign
from icelog.domain.errors import ForbiddenError, NoSuchTableError


def _signing_profile(request: Request, warehouse_id: UUID) -> dict[str, Any]:
    profile = services(request).catalog.app.storage_profile(warehouse_id)
    if profile.get("type") != "s3" or not profile.get("remote-signing-enabled"):
        raise ForbiddenError("Remote signing is not enabled for this warehouse")
    return profile


def _answer(
    request: Request,
    profile: dict[str, Any],
    table_location: Callable[[S3Target], str],
    body: S3SignRequest,
) -> Response:
    region, method, uri, payload = body.region, body.method, body.uri, body.body
    headers = dict(body.headers)
    if region != profile["region"]:
        raise ForbiddenError(f"This warehouse's bucket is in {profile['region']}, not {region}")
    access = access_for(profile, services(request).catalog.app.secrets)
    # The same endpoint and region `sign` addresses the URI with: what is signed is what
    # was checked.
    target = parse_target(uri, endpoint=access.endpoint, region=access.region)
    check_allowed(target, method, allowed=[table_location(target)], write=True, body=payload)
    signed = sign(access, region=region, method=method, uri=uri, headers=headers, body=payload)
    # Java caches answers marked `private` by method and URI alone; signatures carry a
    # date and other headers, so nothing here may be reused.
    return json_response(signed, headers={"Cache-Control": "no-cache"})


def sign_table_request(request: Request, body: S3SignRequest) -> Response:
    svc = services(request)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    ns, name = namespace_param(request), path_param(request, "table")
    row = svc.queries.load_tabular(str(warehouse_id), ns, name, "table")
    location = None if row is None else svc.queries.tabular_location(row.id)
    if row is None or location is None:
        raise NoSuchTableError(f"Table does not exist: {ns.dotted}.{name}")
    profile = _signing_profile(request, warehouse_id)
    return _answer(request, profile, lambda _target: location, body)


def sign_warehouse_request(request: Request, body: S3SignRequest) -> Response:
    svc = services(request)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    profile = _signing_profile(request, warehouse_id)

    def table_of(target: S3Target) -> str:
        where = f"s3://{target.bucket}/{target.param('prefix') or target.key}".rstrip("/")
        found = svc.queries.table_containing(str(warehouse_id), where)
        if found is None:
            raise ForbiddenError(f"{where} is not inside a table of this warehouse")
        return found[1]

    return _answer(request, profile, table_of, body)
