#!/usr/bin/env python3
"""Verify an icelog JSON Lines audit export offline — Python standard library only.

    python3 verify_export.py export.jsonl [--expect POSITION:LINK]

The first line is a header: {"format": "icelog-audit-export/1", "previous-link": <hex>, ...};
every other line is one stored event: {"position", "aggregate-id", "version", "topic",
"state" (base64 of the stored bytes), "link"}. Each link is recomputed from the previous one
(docs/adr/0009-audit-hash-chain.md) and must equal the exported one; positions must increase.
The last link is printed: compare it with a head held elsewhere (a published
`icelog.audit.head-recorded.v1`), or pass it with --expect.
Exit status 0 when everything matches, 1 otherwise, 2 for a malformed argument.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys


def field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def link(
    previous: bytes, position: int, aggregate_id: str, version: int, topic: str, state: bytes
) -> bytes:
    digest = hashlib.sha256()
    digest.update(previous)
    digest.update(position.to_bytes(8, "big"))
    digest.update(field(aggregate_id.encode()))
    digest.update(version.to_bytes(8, "big", signed=True))
    digest.update(field(topic.encode()))
    digest.update(field(state))
    return digest.digest()


def verify(lines: list[str], expect: str | None) -> tuple[bool, str]:
    header = json.loads(lines[0])
    if header.get("format") != "icelog-audit-export/1":
        return False, "not an icelog audit export (bad header)"
    previous = bytes.fromhex(header["previous-link"])
    last_position = int(header["after-position"])
    count = 0
    for number, line in enumerate(lines[1:], start=2):
        event = json.loads(line)
        position = int(event["position"])
        if position <= last_position:
            return False, f"line {number}: position {position} does not increase"
        previous = link(
            previous,
            position,
            event["aggregate-id"],
            int(event["version"]),
            event["topic"],
            base64.b64decode(event["state"]),
        )
        if previous.hex() != event["link"]:
            return False, f"line {number}: link at position {position} does not match"
        last_position = position
        count += 1
    head = f"{last_position}:{previous.hex()}"
    if expect is not None and expect != head:
        return False, f"head {head} is not the expected {expect}"
    return True, f"{count} event(s) verified; head {head}"


def expected_head(text: str) -> str:
    """POSITION:LINK as `icelog audit chain` prints it; a typo is a usage error (exit 2)."""
    position, colon, link = text.partition(":")
    digits = position.isascii() and position.isdigit()
    # A log position is a BIGINT (icelog refuses a larger one the same way).
    if not (colon and digits and int(position) < 2**63 and len(link) == 64) or any(
        c not in "0123456789abcdefABCDEF" for c in link
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not POSITION:LINK (a log position, a colon, then the 64 hex digits "
            "of the chain's link there)"
        )
    return f"{int(position)}:{link.lower()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export")
    parser.add_argument("--expect", type=expected_head, default=None, metavar="POSITION:LINK")
    args = parser.parse_args()
    with open(args.export, encoding="utf-8") as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    if not lines:
        print("empty export", file=sys.stderr)
        return 1
    ok, message = verify(lines, args.expect)
    print(("OK: " if ok else "FAILED: ") + message)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
