"""The typed API edge: every route is an `Operation` whose request and response bodies (and
query parameters) are pydantic models.

- `Body` models read and write the JSON bodies: kebab-case names, unknown fields refused
  (as Lakekeeper's management API does; Iceberg envelopes that must tolerate newer clients
  derive from `OpenBody`). They check *shape*; meaning (update semantics, locations, names)
  stays in `domain/`.
- `Query` models read query parameters the same way.
- `serve(operation)` turns an operation into a Starlette endpoint: it validates the body and
  the query, calls the handler with `body=` / `query=`, and writes what the handler returns
  (a model, raw bytes already rendered, a Response, or None for 204). Every validation error,
  on every route, becomes one answer here: 400 `BadRequestException` naming the field path
  and what was wrong.
- `openapi_paths` / `openapi_components` build an OpenAPI document from the operations and
  their models, so that the document is what the handlers accept and answer.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.auth.authorizer import (
    Authorizer,
    WouldRead,
    from_cache_only,
    watching_staleness,
)
from icelog.api.threads import run_in_thread
from icelog.domain.errors import BadRequestError
from icelog.domain.json_limits import check_json_depth

__all__ = [
    "Body",
    "OpenBody",
    "Operation",
    "Query",
    "kebab",
    "openapi_components",
    "openapi_paths",
    "serve",
]


def kebab(name: str) -> str:
    """`warehouse_name` → `warehouse-name`: the JSON names of Iceberg and Lakekeeper."""
    return name.replace("_", "-")


class Body(BaseModel):
    """A JSON body: kebab-case names, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True
    )
    # What an answer leaves out: fields that are None (Iceberg's Java parsers and Lakekeeper
    # omit unset optional fields), or only fields never set (the management answers, whose
    # clients read the explicit nulls icelog has always sent).
    leave_out: ClassVar[Literal["none", "unset"]] = "none"


class OpenBody(Body):
    """A JSON body whose unknown fields are ignored (newer clients add optional ones)."""

    model_config = ConfigDict(extra="ignore")


class Query(BaseModel):
    """Query parameters, by their names in the URL."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


# What a handler may return: a model (rendered with its aliases), bytes already rendered
# (the hot paths keep their pre-rendered documents), a Response, or None (204).
Result = BaseModel | bytes | Response | None


@dataclass(frozen=True)
class Operation:
    """One route: method, path template (below the API's base), handler and its models.

    `response` is the 200 body's model (None: 204 or a handler-made Response); `errors`
    are the documented error statuses. Catalog operations are documented by the official
    spec; management ones by `openapi_paths`."""

    method: str
    path: str
    handler: Callable[..., Result | Awaitable[Result]]
    summary: str = ""
    tag: str = ""
    body: type[BaseModel] | None = None
    query: type[Query] | None = None
    response: Any = None
    status: int = 200
    errors: tuple[int, ...] = (400,)
    headers: tuple[dict[str, Any], ...] = ()
    description: str = ""
    body_required: bool = True
    also_head: bool = False
    operation_id: str = field(default="")
    deprecated: bool = False
    # The right the route needs (api/auth/guards.py): (request, body, query) -> None, raising
    # 403/404. None: the handler checks itself, or the route is open to every caller.
    guard: Callable[[Request, Any, Any], None] | None = None

    @property
    def methods(self) -> list[str]:
        return [self.method, "HEAD"] if self.also_head else [self.method]

    @property
    def name(self) -> str:
        """The operationId: given, or the handler's name in camelCase."""
        if self.operation_id:
            return self.operation_id
        head, *rest = self.handler.__name__.strip("_").split("_")
        return head + "".join(word.capitalize() for word in rest)


# -- validation -------------------------------------------------------------------------------


def _where(location: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in location) or "(body)"


def bad_request(model: type[BaseModel], error: ValidationError) -> BadRequestError:
    """The Iceberg 400 for a body or query that does not fit its model: which fields, and
    what was wrong with each (never the values: they may be secrets)."""
    problems = [f"{_where(e['loc'])}: {e['msg']}" for e in error.errors(include_input=False)]
    more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
    shown = "; ".join(problems[:5]) + more
    return BadRequestError(f"Invalid {model.__name__}: {shown}")


def parse_body(model: type[BaseModel], raw: bytes, *, required: bool = True) -> BaseModel | None:
    if not raw.strip():
        if not required:
            return None
        raise BadRequestError(f"Invalid {model.__name__}: a JSON body is required")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequestError(f"Malformed JSON body: {exc}") from None
    check_json_depth(data, "The request body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise bad_request(model, exc) from None


def parse_query(model: type[Query], request: Request) -> Query:
    params = request.query_params
    data: dict[str, Any] = {}
    for key in params:
        values = params.getlist(key)
        data[key] = values if len(values) > 1 else values[0]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise bad_request(model, exc) from None


# -- serving ------------------------------------------------------------------------------------


def render(result: Result, status: int) -> Response:
    if isinstance(result, Response):
        return result
    if result is None:
        return Response(status_code=204)
    if isinstance(result, bytes):
        return Response(result, status_code=status, media_type="application/json")
    # Absent, not null: Iceberg's Java parsers and Lakekeeper omit unset optional fields.
    unset_only = getattr(result, "leave_out", "none") == "unset"
    body = result.__pydantic_serializer__.to_json(
        result, by_alias=True, exclude_none=not unset_only, exclude_unset=unset_only
    )
    return Response(body, status_code=status, media_type="application/json")


# Operations after which a name may stand for another object than the cache remembers: a
# drop or a rename (DELETE, .../rename). Creates need not clear it: a name nobody held was a
# refusal, and refusals are never answered from the cache.
_RENAMING_PATHS = ("/rename",)


async def _guarded(
    guard: Callable[[Request, Any, Any], None],
    authorizer: Authorizer,
    route: tuple[str, str],
    request: Request,
    body: Any,
    query: Any,
) -> None:
    """Run the route's guard — or, for a guard that decides on the path alone, recall its
    answer for this caller and path: the hot path of an engine loading the same table again
    and again is then one dictionary lookup (it was ~10 µs of guard code)."""
    if not getattr(guard, "path_only", False):
        await _check(guard, request, body, query)
        return
    scope = request.scope
    state = scope.setdefault("state", {})
    principal = state.get("principal")
    user = getattr(principal, "user_id", "anonymous")
    # The route's parameters, not the URL: the console calls operations in-process on
    # requests that keep the page's own path (api/console/calls.py).
    key = ("route", user, route, tuple(scope.get("path_params", {}).values()))
    # Capabilities belong to one call: a page's several calls share one state.
    state.pop("caps", None)
    kept = authorizer.recall(key)
    if kept is not None:
        if kept[0] is not None:
            state["caps"] = kept[0]  # what the guard found: what vended credentials may do
        return
    with watching_staleness():
        await _check(guard, request, body, query)  # a refusal raises: never kept
        # Kept no longer than the oldest cached answer the check used lives.
        authorizer.remember(key, (state.get("caps"),))


async def _check(
    guard: Callable[[Request, Any, Any], None], request: Request, body: Any, query: Any
) -> None:
    """Run the guard: on the loop when its answer is cached (most requests), else in a
    thread, since it reads the grants read model."""
    if getattr(guard, "cache_first", False):
        try:
            from_cache_only(lambda: guard(request, body, query))
            return
        except WouldRead:
            pass  # something was not cached: ask again where reading may block
    await run_in_thread(guard, request, body, query)


async def guard_request(
    operation: Operation, request: Request, kwargs: dict[str, Any]
) -> Authorizer | None:
    """Check the operation's guard for this request (its parsed `body` / `query` in
    kwargs); the app's authorizer, for what else the caller does with it."""
    authorizer: Authorizer | None = getattr(request.app.state, "authorizer", None)
    guard = operation.guard
    if guard is not None and authorizer is not None and authorizer.enabled:
        # Without a provider (AllowAll) nothing is checked and nothing is read.
        route = (operation.method, operation.path)
        await _guarded(guard, authorizer, route, request, kwargs.get("body"), kwargs.get("query"))
    return authorizer


def serve(operation: Operation) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint of an operation."""
    handler = operation.handler
    is_async = inspect.iscoroutinefunction(handler)
    body_model, query_model = operation.body, operation.query
    forgets = operation.method == "DELETE" or (
        operation.method == "POST" and operation.path.endswith(_RENAMING_PATHS)
    )

    async def endpoint(request: Request) -> Response:
        kwargs: dict[str, Any] = {}
        if body_model is not None:
            kwargs["body"] = parse_body(
                body_model, await request.body(), required=operation.body_required
            )
        if query_model is not None:
            kwargs["query"] = parse_query(query_model, request)
        authorizer = await guard_request(operation, request, kwargs)
        if forgets and authorizer is not None and authorizer.enabled:
            # A name may change its object here: checks must not go on with what the cache
            # says it was. After the handler, and also when it fails.
            try:
                return await _call(request, kwargs)
            finally:
                authorizer.forget()
        return await _call(request, kwargs)

    async def _call(request: Request, kwargs: dict[str, Any]) -> Response:
        result: Result
        if is_async:
            result = await cast(Callable[..., Awaitable[Result]], handler)(request, **kwargs)
        else:
            result = await run_in_thread(cast(Callable[..., Result], handler), request, **kwargs)
        return render(result, operation.status)

    endpoint.__name__ = handler.__name__
    return endpoint


# -- the OpenAPI document ------------------------------------------------------------------------

_PATH_PARAM = re.compile(r"{(\w+)}")
REF = "#/components/schemas/{model}"


def _param_schema(name: str) -> dict[str, Any]:
    if name.endswith("_id"):
        return {"type": "string", "format": "uuid"}
    return {"type": "string"}


class _Schemas(GenerateJsonSchema):
    """JSON schemas without a title per field (its name says it; models keep theirs)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


_NULL = {"type": "null"}


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without the `null` of an optional field: a URL holds no null."""
    options = prop.get("anyOf", [])
    if _NULL in options:
        rest = [option for option in options if option != _NULL]
        prop = {k: v for k, v in prop.items() if k != "anyOf"}
        prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
    if "default" in prop and prop["default"] is None:
        del prop["default"]
    return prop


def _query_parameters(model: type[Query]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF, schema_generator=_Schemas)
    required = set(schema.get("required", []))
    found = []
    for name, raw in schema.get("properties", {}).items():
        prop = _not_null(raw)
        description = prop.pop("description", None)
        parameter: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": name in required,
            "schema": prop,
        }
        if description:
            parameter["description"] = description
        found.append(parameter)
    return found


def _error(status: int) -> dict[str, Any]:
    return {
        "description": _ERROR_TEXT.get(status, "Error"),
        "content": {"application/json": {"schema": _ref("ErrorResponse")}},
    }


_ERROR_TEXT = {
    400: "Bad request: the body or a parameter does not fit",
    401: "Not authenticated",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict with the current state",
    413: "Request body too large",
    500: "Unexpected server error",
    503: "Unavailable: retry later",
}


def _ref(model: Any) -> dict[str, str]:
    return {"$ref": REF.format(model=getattr(model, "__name__", model))}


def openapi_paths(operations: Iterable[Operation], base: str) -> dict[str, Any]:
    """`paths` of a document whose server URL ends before `base` (e.g. `/v1`)."""
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        item = paths.setdefault(base + op.path, {})
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": _param_schema(name)}
            for name in _PATH_PARAM.findall(op.path)
        ]
        parameters += list(op.headers)
        if op.query is not None:
            parameters += _query_parameters(op.query)
        responses: dict[str, Any] = {}
        if op.response is not None:
            responses[str(op.status)] = {
                "description": op.summary or "OK",
                "content": {"application/json": {"schema": _ref(op.response)}},
            }
        else:
            responses["204"] = {"description": "Done; no content"}
        # 401, 403: with an identity provider (api/auth) every route needs a token and a right.
        for status in sorted({*op.errors, 401, 403, 500}):
            responses[str(status)] = _error(status)
        operation: dict[str, Any] = {
            "operationId": op.name,
            "tags": [op.tag] if op.tag else [],
            "summary": op.summary,
            "responses": responses,
        }
        if op.description:
            operation["description"] = op.description
        if op.deprecated:
            operation["deprecated"] = True
        if parameters:
            operation["parameters"] = parameters
        if op.body is not None:
            operation["requestBody"] = {
                "required": op.body_required,
                "content": {"application/json": {"schema": _ref(op.body)}},
            }
        item[op.method.lower()] = operation
        if op.also_head:
            errors = {k: v for k, v in responses.items() if k != str(op.status)}
            item["head"] = {
                **operation,
                "operationId": f"{op.name}Exists",
                "responses": {"204": {"description": "It exists"}, **errors},
            }
    return paths


def openapi_components(
    operations: Iterable[Operation], extra: Iterable[type[BaseModel]] = ()
) -> dict[str, Any]:
    """`components.schemas` of every model the operations name (requests in their
    validation form, responses in their serialisation form)."""
    seen: dict[tuple[type[BaseModel], Literal["validation", "serialization"]], None] = {}
    for op in operations:
        if op.body is not None:
            seen[(op.body, "validation")] = None
        if isinstance(op.response, type) and issubclass(op.response, BaseModel):
            seen[(op.response, "serialization")] = None
    for model in extra:
        seen[(model, "serialization")] = None
    _, definitions = models_json_schema(
        list(seen), ref_template=REF, by_alias=True, schema_generator=_Schemas
    )
    schemas: dict[str, Any] = definitions.get("$defs", {})
    return schemas
