"""Request counts and latencies kept as plain numbers expose exactly what prometheus_client's
own Counter and Histogram would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from icelog.api.metrics import LATENCY_BUCKETS, RequestFigures

KEYS = st.tuples(
    st.sampled_from(["GET", "POST", "other"]),
    st.sampled_from(["/catalog/v1/{prefix}/namespaces", "unmatched"]),
    st.sampled_from([200, 404, 409]),
)
# Bucket bounds themselves, next to them, and beyond the last one.
SECONDS = st.one_of(
    st.sampled_from([*LATENCY_BUCKETS, 0.0, 31.0]),
    st.floats(min_value=0, max_value=40, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(KEYS, SECONDS), max_size=30))
def test_the_same_exposition_as_a_counter_and_a_histogram(
    observed: list[tuple[tuple[str, str, int], float]],
) -> None:
    ours = CollectorRegistry()
    figures = RequestFigures()
    ours.register(figures)
    theirs = CollectorRegistry()
    labels = ["method", "route", "status"]
    count = Counter(
        "icelog_http_requests",
        "HTTP requests answered, by route template, method and status",
        labels,
        registry=theirs,
    )
    latency = Histogram(
        "icelog_http_request_duration_seconds",
        "Time from the request to the last byte of the response",
        labels,
        buckets=LATENCY_BUCKETS,
        registry=theirs,
    )
    for (method, route, status), seconds in observed:
        figures.observe((method, route, status), seconds)
        count.labels(method, route, str(status)).inc()
        latency.labels(method, route, str(status)).observe(seconds)
    assert generate_latest(ours) == generate_latest(theirs)
