"""Which S3 bucket and key a request URI addresses, and the Host a signature must cover.

The remote signer checks the (bucket, key) a request touches and then signs it. S3 itself
takes the bucket from the Host header (virtual-host style, `<bucket>.<endpoint>`) or from
the first path segment (path-style, Host is the endpoint). A signature that covered a
Host other than the URI's authority would let one check pass for `lake` and the request
land in another bucket. So this module decides, from the URI and the warehouse's S3
profile alone, the ONE (bucket, key) and the ONE Host value; the signer signs that Host
and nothing the client names.

Accepted authorities are exactly:
- with a configured endpoint: the endpoint's host (path-style) or `<bucket>.<host>`
  (virtual-host, not for an IP endpoint), with the endpoint's scheme and port;
- without one (AWS): `s3.amazonaws.com`, `s3.<region>.amazonaws.com` and the other
  regional S3 service hosts of the warehouse's region, bare or behind `<bucket>.`, on the
  scheme's default port.
Anything else (userinfo, another port or scheme, a trailing dot, other hosts, access
points) is refused. The path must be plain RFC 3986 text: no encoded `/`, `\\` or `.`
(which a proxy could decode into another key or bucket), no `.` or `..` segments, no
fragment, and path-style the bucket segment is a bucket name, never percent-encoded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

from icelog.domain.errors import BadRequestError, ForbiddenError

_DEFAULT_PORTS = {"http": 80, "https": 443}
# S3 bucket names (the catalog's own rule for a warehouse bucket is the same set).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
# `host` or `host:port` in plain DNS characters, or a bracketed IPv6 literal.
_AUTHORITY = re.compile(r"^(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?$")
_IPV4 = re.compile(r"^[0-9.]+$")
# What RFC 3986 allows in a path (unreserved, sub-delims, ':', '@', '/', '%XX').
_PATH = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$")
_QUERY = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$")
# Encoded characters that re-route a key when some hop decodes them: '/', '\', '.'.
_ROUTING_ESCAPES = re.compile(r"%(?:2[fFeE]|5[cC])")

# Headers that name where a request goes. Host / :authority must equal the URI's
# authority (they are not signed from the client anyway); the others are refused, since
# a proxy in front of S3 may route by them.
_AUTHORITY_HEADERS = frozenset({"host", ":authority"})
_ROUTING_HEADERS = frozenset(
    {
        "forwarded",
        "x-forwarded-host",
        "x-forwarded-server",
        "x-forwarded-prefix",
        "x-original-host",
        "x-original-url",
        "x-rewrite-url",
        "x-host",
    }
)
# RFC 9110 token characters for header names.
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@dataclass(frozen=True)
class Addressed:
    """The one place an S3 request URI addresses.

    `key` is URL-decoded ("" for bucket-level requests); `host` is the Host header value
    the signature covers (lower case, port only when not the scheme's default).
    """

    bucket: str
    key: str
    host: str
    query: str
    virtual_host: bool


@dataclass(frozen=True)
class _Service:
    scheme: str | None  # None: http or https (AWS)
    port: int | None  # None: the scheme's default
    path: str  # the endpoint's base path, "" or "/x" (no trailing slash)
    hosts: frozenset[str]
    virtual_hosts_allowed: bool


def _aws_hosts(region: str) -> frozenset[str]:
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    regional = {
        f"s3.{region}",
        f"s3-{region}",
        f"s3.dualstack.{region}",
        f"s3-fips.{region}",
        f"s3-fips.dualstack.{region}",
    }
    if region == "us-east-1":
        regional |= {"s3", "s3-external-1"}
    regional |= {"s3-accelerate", "s3-accelerate.dualstack"}
    if not region.startswith("cn-"):
        regional.add("s3")  # the global endpoint, which serves (redirects) every region
    return frozenset(name + suffix for name in regional)


def _service(endpoint: str | None, region: str) -> _Service:
    if endpoint is None:
        return _Service(None, None, "", _aws_hosts(region.lower()), True)
    parts = urlsplit(endpoint)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise ForbiddenError("The warehouse's S3 endpoint is not an http(s) URL")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ForbiddenError("The warehouse's S3 endpoint has an invalid port") from None
    is_ip = bool(_IPV4.match(host)) or ":" in host
    if ":" in host:
        # urlsplit drops an IPv6 literal's brackets; a URI's authority keeps them.
        host = f"[{host}]"
    return _Service(scheme, port, parts.path.rstrip("/"), frozenset({host}), not is_ip)


def _split_authority(parts: SplitResult) -> tuple[str, int | None]:
    netloc = parts.netloc
    if "@" in netloc:
        raise ForbiddenError("Sign request URI must not carry user information")
    match = _AUTHORITY.match(netloc)
    if match is None:
        raise ForbiddenError(f"Sign request URI has an invalid authority: {netloc!r}")
    host = match.group("host").lower()
    if host.endswith(".") or host.startswith(".") or ".." in host:
        raise ForbiddenError(f"Sign request URI has an invalid host: {host!r}")
    port = match.group("port")
    return host, None if port is None else int(port)


def address(uri: str, *, endpoint: str | None, region: str) -> Addressed:
    """The bucket, key and Host a request URI addresses under the warehouse's endpoint.

    Raises BadRequestError for URIs that are not absolute http(s) URLs, ForbiddenError for
    URIs that do not address exactly one bucket of the configured S3 service.
    """
    if not uri.isascii() or any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in uri):
        raise BadRequestError("Sign request URI must be plain ASCII without spaces")
    try:
        parts = urlsplit(uri)
        _ = parts.port  # a port that is not a number, or out of range, raises here
    except ValueError:
        raise BadRequestError("Sign request URI is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise BadRequestError("Sign request URI must be an absolute http(s) URL")
    if parts.fragment or "#" in uri:
        raise ForbiddenError("Sign request URI must not carry a fragment")
    host, port = _split_authority(parts)
    service = _service(endpoint, region)
    effective_port = port if port is not None else _DEFAULT_PORTS[scheme]
    expected_port = service.port if service.port is not None else _DEFAULT_PORTS[scheme]
    if (service.scheme is not None and scheme != service.scheme) or effective_port != expected_port:
        raise ForbiddenError(f"Sign request is not for the configured S3 endpoint: {parts.netloc}")

    path = parts.path
    if not _PATH.match(path) or not _QUERY.match(parts.query):
        raise ForbiddenError("Sign request URI holds characters S3 clients always encode")
    if _ROUTING_ESCAPES.search(path):
        raise ForbiddenError("Sign request URI encodes '/', '\\' or '.' in its path")
    if service.path:
        if path != service.path and not path.startswith(service.path + "/"):
            raise ForbiddenError("Sign request is not under the configured S3 endpoint's path")
        path = path[len(service.path) :]
    if any(segment in (".", "..") for segment in path.split("/")):
        raise ForbiddenError("Sign request URI holds '.' or '..' path segments")

    if host in service.hosts:
        virtual = False
        raw_bucket, _, raw_key = path[1:].partition("/") if path.startswith("/") else ("", "", "")
        bucket = raw_bucket
    else:
        bucket = next((host[: -len(h) - 1] for h in service.hosts if host.endswith("." + h)), "")
        if not bucket or not service.virtual_hosts_allowed:
            raise ForbiddenError(
                f"Sign request is not for the configured S3 endpoint: {parts.netloc}"
            )
        virtual = True
        raw_key = path[1:] if path.startswith("/") else path
    if not bucket:
        raise BadRequestError("Sign request URI names no bucket")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise ForbiddenError(f"Sign request URI does not name an S3 bucket: {bucket!r}")

    canonical = host if effective_port == _DEFAULT_PORTS[scheme] else f"{host}:{effective_port}"
    return Addressed(
        bucket=bucket,
        key=unquote(raw_key),
        host=canonical,
        query=parts.query,
        virtual_host=virtual,
    )


def _normal_authority(value: str, default_port: int) -> str | None:
    match = _AUTHORITY.match(value.strip())
    if match is None:
        return None
    host, port = match.group("host").lower(), match.group("port")
    if port is None or int(port) == default_port:
        return host
    return f"{host}:{int(port)}"


def check_addressing_headers(
    headers: Mapping[str, Sequence[str]], addressed: Addressed, *, scheme: str
) -> None:
    """Refuse client headers that could send the signed request somewhere else.

    A Host (or `:authority`) the client sends must be the URI's own authority; headers a
    proxy may route by (Forwarded, X-Forwarded-Host, ...), other pseudo-headers, names
    that are not header tokens and values with line breaks are refused.
    """
    default_port = _DEFAULT_PORTS.get(scheme.lower(), 443)
    for name, values in headers.items():
        lower = name.lower()
        if not _HEADER_NAME.match(name) and lower != ":authority":
            raise BadRequestError(f"Sign request holds an invalid header name: {name[:40]!r}")
        if any("\r" in v or "\n" in v or "\x00" in v for v in values):
            raise BadRequestError(f"Sign request header {name} holds a line break")
        if lower in _ROUTING_HEADERS:
            raise ForbiddenError(f"Header {name} is not allowed for remote signing")
        if lower in _AUTHORITY_HEADERS and (
            len(values) != 1 or _normal_authority(values[0], default_port) != addressed.host
        ):
            raise ForbiddenError(
                f"Header {name} must be the sign request URI's own host {addressed.host}"
            )
