"""Remote signing (the REST spec's S3 signer protocol): the client describes a storage
request, the warehouse's signer (its storage kind's, `RemoteSigner`) checks it stays in a
table's location and answers with the signature made with the warehouse's credential.

Two forms: table-scoped (`.../namespaces/{ns}/tables/{table}/sign`, the form our load-table
config hands out) and warehouse-wide (`/v1/{prefix}/v1/aws/s3/sign`, the S3 signer spec's
default path), where the table is the live one whose location holds the object.
"""

from __future__ import annotations

from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import json_response, namespace_param, path_param
from icelog.api.models.catalog import S3SignRequest
from icelog.api.routes import prefix, services
from icelog.commands.storage import RemoteSigner, SignRequest, credential_of, kind_for
from icelog.domain.errors import ForbiddenError, NoSuchTableError


def _signer(request: Request, warehouse_id: UUID) -> RemoteSigner:
    """The warehouse's signer; 403 when its storage does not offer remote signing."""
    app = services(request).catalog.app
    profile = app.storage_profile(warehouse_id)
    kind = kind_for(profile)
    if not kind.signs(profile):
        raise ForbiddenError("Remote signing is not enabled for this warehouse")
    return kind.signer(profile, credential_of(profile, app.secrets))


def _described(body: S3SignRequest) -> SignRequest:
    return SignRequest(
        region=body.region,
        method=body.method,
        uri=body.uri,
        headers=dict(body.headers),
        body=body.body,
    )


def _answer(signer: RemoteSigner, allowed: str, described: SignRequest) -> Response:
    """Signed when the request stays inside `allowed` (a table's location)."""
    signed = signer.sign(described, allowed=[allowed], write=True)
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
    return _answer(_signer(request, warehouse_id), location, _described(body))


def sign_warehouse_request(request: Request, body: S3SignRequest) -> Response:
    svc = services(request)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    signer = _signer(request, warehouse_id)
    described = _described(body)
    where = signer.addressed(described)
    found = svc.queries.table_containing(str(warehouse_id), where)
    if found is None:
        raise ForbiddenError(f"{where} is not inside a table of this warehouse")
    return _answer(signer, found[1], described)
