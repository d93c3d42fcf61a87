"""Drive schemathesis against a running icelog server, one API operation at a time.

Each operation gets ``max_examples`` generated requests per generation mode (positive:
requests valid per the spec; negative: invalid ones), with a fixed seed (``derandomize``), and
every response goes through the same checks. Failures are collected (not raised at the first
one) so a run reports every distinct problem with a reproducing curl command.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import hypothesis.errors
import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CheckFunction = Callable[[CheckContext, schemathesis.Response, Case[Any]], bool | None]


def error_model_shape(ctx: CheckContext, response: schemathesis.Response, case: Case[Any]) -> None:
    """A non-2xx response with a body is ``{"error": {"message", "type", "code"}}``, code ==
    status (the spec's IcebergErrorResponse, which every error response of the spec uses)."""
    if 200 <= response.status_code < 300 or not response.content:
        return
    if case.operation.path == "/v1/oauth/tokens":
        return  # OAuth's own error shape there (the spec's OAuthError, schema-checked)
    try:
        body = response.json()
    except ValueError:
        raise AssertionError(f"error body is not JSON: {response.content[:200]!r}") from None
    assert isinstance(body, dict) and set(body) == {"error"}, f"not an ErrorModel body: {body}"
    error = body["error"]
    assert isinstance(error, dict), f"error is not an object: {body}"
    assert isinstance(error.get("message"), str), f"error.message is not a string: {body}"
    assert isinstance(error.get("type"), str), f"error.type is not a string: {body}"
    code = error.get("code")
    assert isinstance(code, int) and not isinstance(code, bool), f"error.code not int: {body}"
    assert code == response.status_code, f"error.code {code} != HTTP {response.status_code}"


CHECKS: list[CheckFunction] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    error_model_shape,
]


@dataclass
class Finding:
    """One distinct failure: which check, what status, and how to reproduce it."""

    check: str
    status: int
    title: str
    message: str
    curl: str
    response_body: str

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.check, self.status, self.title)

    def describe(self) -> str:
        return (
            f"[{self.check}] HTTP {self.status}: {self.title}\n{self.message.strip()}\n"
            f"    {self.curl}\n    response: {self.response_body}"
        )


@dataclass(frozen=True)
class KnownBug:
    """A server bug kept on purpose (or not fixed yet): the findings it explains are counted
    apart, an operation that shows only known bugs is an xfail, and one whose known bug no
    longer reproduces fails, so the entry goes with the fix."""

    operation: str  # "POST /v1/warehouse", as OperationReport labels it
    check: str
    status: int
    reason: str
    backend: str = "*"
    request: Callable[[Case[Any]], bool] | None = None  # which requests; None: any
    # False for a deviation that only some generated inputs reach (which inputs a run makes
    # varies between processes): excused when seen, not required to show; a hand-written
    # test must pin it instead.
    required: bool = True

    def applies(self, operation: str, backend: str) -> bool:
        return self.operation == operation and self.backend in ("*", backend)

    def explains(self, finding: Finding, case: Case[Any]) -> bool:
        return (
            (finding.check, finding.status) == (self.check, self.status)
            and (self.request is None or self.request(case))
        )  # fmt: skip


def server_bug(reason: str) -> pytest.MarkDecorator:
    """For a hand-written request that shows a known server bug: strict, so the mark goes
    with the fix."""
    return pytest.mark.xfail(strict=True, reason=f"server bug: {reason}")


@dataclass
class OperationReport:
    label: str
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    findings: dict[tuple[str, int, str], Finding] = field(default_factory=dict)
    known: collections.Counter[str] = field(default_factory=collections.Counter)  # by reason
    failed_requests: int = 0
    unsatisfiable: list[str] = field(default_factory=list)
    # The first answer of each (mode, status): what a failure message shows of the run.
    answers: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def summary(self) -> str:
        codes = ", ".join(f"{code} x{n}" for code, n in sorted(self.statuses.items()))
        modes = ", ".join(f"{mode} {n}" for mode, n in sorted(self.requests.items()))
        return (
            f"{self.label}: {self.total} requests ({modes}); statuses {codes}; "
            f"{self.failed_requests} failing requests, {len(self.findings)} distinct findings"
            + (f", {sum(self.known.values())} known-bug findings" if self.known else "")
            + (f" (no {'/'.join(self.unsatisfiable)} case possible)" if self.unsatisfiable else "")
        )

    def describe_findings(self) -> str:
        return "\n\n".join(f.describe() for f in self.findings.values())

    def settle(self, known: Sequence[KnownBug]) -> None:
        """Fail on any unknown finding or on a known bug that no longer shows; xfail when
        known bugs showed (``known``: the bugs that apply to this operation)."""
        assert not self.findings, f"{self.summary()}\n\n{self.describe_findings()}"
        fixed = [bug.reason for bug in known if bug.required and not self.known[bug.reason]]
        seen = "\n".join(
            f"  {mode} {status}: {body}" for (mode, status), body in self.answers.items()
        )
        assert not fixed, (
            f"known bugs no longer reproduce, remove their entries: {fixed}\n"
            f"{self.summary()}\nfirst answers:\n{seen}"
        )
        shown = [bug.reason for bug in known if self.known[bug.reason]]
        if shown:
            pytest.xfail("; ".join(shown))


def _findings(exc: BaseException, curl: str, response: schemathesis.Response) -> list[Finding]:
    failures: Iterable[BaseException] = exc.exceptions if isinstance(exc, FailureGroup) else [exc]
    body = response.text_lossy()[:600]
    found = []
    for failure in failures:
        names = tuple(getattr(failure, "checks", ()) or ())
        found.append(
            Finding(
                check=names[0] if names else type(failure).__name__,
                status=response.status_code,
                title=str(getattr(failure, "title", "") or failure)[:200],
                message=str(getattr(failure, "message", "") or failure),
                curl=curl,
                response_body=body,
            )
        )
    return found


def _fresh_idempotency_key(case: Case[Any]) -> None:
    """A generated `Idempotency-Key` that is a valid key gets a fresh one: hypothesis reuses
    values, and a key sent again with another request is a 422 by the key's contract, not
    a finding. Invalid keys (negative cases) stay as generated."""
    headers = case.headers if case.headers is not None else {}
    for name in list(headers):
        if name.lower() == "idempotency-key":
            try:
                uuid.UUID(str(headers[name]))
            except ValueError:
                continue
            headers[name] = str(uuid.uuid4())


def case_mode(case: Case[Any]) -> str:
    meta = case.meta
    return meta.generation.mode.value if meta is not None else "explicit"


@dataclass
class Conformance:
    """A loaded schema plus the server it is run against."""

    schema: Any  # schemathesis' OpenApiSchema
    base_url: str
    fixed: dict[str, str]
    existing: list[dict[str, str]]
    session: requests.Session = field(default_factory=requests.Session)

    def operation(self, method: str, path: str) -> Any:
        return self.schema[path][method.upper()]

    def strategy(self, operation: Any, mode: GenerationMode) -> st.SearchStrategy[Case[Any]]:
        """Cases with free path parameters, and cases aimed at the objects that exist."""
        names = {p.name for p in operation.path_parameters}
        options = [{k: v for k, v in self.fixed.items() if k in names}]
        for existing in self.existing:
            aimed = {**options[0], **{k: v for k, v in existing.items() if k in names}}
            if aimed not in options:
                options.append(aimed)
        return st.one_of(
            [operation.as_strategy(generation_mode=mode, path_parameters=p) for p in options]
        )

    def run(
        self,
        method: str,
        path: str,
        *,
        max_examples: int,
        modes: Iterable[GenerationMode] = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE),
        checks: list[CheckFunction] = CHECKS,
        prepare: Callable[[Case[Any]], None] | None = None,
        known: Sequence[KnownBug] = (),
    ) -> OperationReport:
        """``known``: the bugs that apply to this operation (`KnownBug.applies`)."""
        operation = self.operation(method, path)
        report = OperationReport(label=f"{method.upper()} {path}")
        for mode in modes:

            @hypothesis.settings(
                max_examples=max_examples,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                suppress_health_check=list(hypothesis.HealthCheck),
                verbosity=hypothesis.Verbosity.quiet,
            )
            @hypothesis.given(case=self.strategy(operation, mode))
            def exercise(case: Case[Any]) -> None:
                if prepare is not None:
                    prepare(case)
                _fresh_idempotency_key(case)
                response = case.call(base_url=self.base_url, session=self.session, timeout=30)
                report.requests[case_mode(case)] += 1
                report.statuses[response.status_code] += 1
                report.answers.setdefault(
                    (case_mode(case), response.status_code),
                    f"{case.method} {case.formatted_path} {case.body!r:.200} -> "
                    f"{response.text_lossy()[:300]}",
                )
                try:
                    case.validate_response(response, checks=checks)
                except (FailureGroup, Failure, AssertionError) as exc:
                    report.failed_requests += 1
                    curl = case.as_curl_command(headers=dict(response.request.headers))
                    for finding in _findings(exc, curl, response):
                        bug = next((b for b in known if b.explains(finding, case)), None)
                        if bug is not None:
                            report.known[bug.reason] += 1
                        else:
                            report.findings.setdefault(finding.key, finding)

            try:
                exercise()
            except hypothesis.errors.Unsatisfiable:
                # Nothing of the operation can be made invalid (its only inputs are free-form
                # strings, or fixed): there is no negative request to send.
                if mode is not GenerationMode.NEGATIVE:
                    raise
                report.unsatisfiable.append(mode.value)
        return report
