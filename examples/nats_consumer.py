r"""Follow icelog's table changes on NATS JetStream and print one line per change.

icelog publishes every change as a CloudEvent (structured JSON) to one JetStream stream, one
subject per event type (`<prefix>.table.committed.v1`, …; see docs/events.md). This consumer

- reads the stream with a *durable pull consumer* that only asks for table events
  (`<prefix>.table.>`): the server remembers how far it got, so a restart resumes there;
- acknowledges each message explicitly, after it was handled — a message that is not
  acknowledged (the consumer crashed) is delivered again;
- de-duplicates by CloudEvent `id`: delivery is at-least-once, and a re-sent event keeps its id;
- prints created / registered / committed / renamed / dropped / soft-dropped / undropped /
  expired / purged tables as one readable line each.

    .venv/bin/python examples/nats_consumer.py                      # follow until Ctrl-C
    .venv/bin/python examples/nats_consumer.py --once --idle 5      # stop after 5 s of quiet

Settings (flags win over the environment; the defaults are icelog's):
  --url     ICELOG_NATS_URL             nats://127.0.0.1:4222
  --stream  ICELOG_NATS_STREAM          ICELOG
  --prefix  ICELOG_NATS_SUBJECT_PREFIX  icelog
  --durable (consumer name)             icelog-example-tables
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import OrderedDict
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

# The table events this example prints, and the verb it prints for them. Every other table
# event (e.g. protection-changed) is acknowledged and skipped.
TABLE_CHANGES = {
    "io.icelog.table.created.v1": "created",
    "io.icelog.table.registered.v1": "registered",
    "io.icelog.table.committed.v1": "committed",
    "io.icelog.table.renamed.v1": "renamed",
    "io.icelog.table.dropped.v1": "dropped",
    "io.icelog.table.soft-dropped.v1": "soft-dropped",
    "io.icelog.table.undropped.v1": "undropped",
    "io.icelog.table.expired.v1": "expired",
    "io.icelog.table.purged.v1": "purged",
}


class SeenIds:
    """The most recent `size` CloudEvent ids: bounded memory, oldest forgotten first.

    Duplicates arrive close to the original (a relay re-sending its last batch, a message
    redelivered because its ack was lost), so remembering recent ids is enough. The durable
    consumer itself never redelivers what was acknowledged, even after a restart.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, event_id: str) -> bool:
        """Remember the id; False when it was seen already."""
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return False
        self._ids[event_id] = None
        if len(self._ids) > self.size:
            self._ids.popitem(last=False)
        return True


def describe(event: dict[str, Any]) -> str | None:
    """One line for a table change, or None for events this example does not print."""
    verb = TABLE_CHANGES.get(event.get("type", ""))
    if verb is None:
        return None
    data = event.get("data") or {}
    # `subject` is the table's dotted identifier as of the event (after a rename: the new one).
    table = event.get("subject") or event.get("tabularid") or "?"
    line = f"{event.get('time', '-')}  {verb:<12} {table}  by {event.get('actor', '-')}"
    notes = []
    if verb == "committed":
        line += f"  -> {data.get('metadata-location')}"
    if verb == "renamed":
        notes.append(
            "was " + ".".join([*data.get("from-namespace", []), data.get("from-name", "")])
        )
    if verb == "undropped" and data.get("from-name") != data.get("name"):
        notes.append(f"dropped as {data.get('from-name')}")
    if verb == "soft-dropped":
        notes.append(f"kept {data.get('expiration-seconds')} s")
    if verb in ("dropped", "soft-dropped") and data.get("purge-requested"):
        notes.append("purge requested")
    if verb == "expired" and data.get("reason") != "expired":
        notes.append(f"{data.get('reason')}")
    if verb == "purged":
        notes.append(f"{data.get('deleted-files')} file(s) deleted")
    if notes:
        line += f"  ({', '.join(notes)})"
    return line


async def follow(args: argparse.Namespace) -> int:
    nc = await nats.connect(args.url, connect_timeout=5, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        try:
            await js.stream_info(args.stream)
        except NotFoundError:
            print(
                f"no JetStream stream {args.stream!r} at {', '.join(args.url)}: is a relay "
                "publishing there (ICELOG_PUBLISH=nats or `icelog publish nats`)?",
                file=sys.stderr,
            )
            return 2
        # Durable: the consumer (and its position) lives on the server under this name.
        # Explicit acks: a message counts as handled only once we acknowledge it; otherwise
        # JetStream redelivers it after `ack_wait`.
        subscription = await js.pull_subscribe(
            f"{args.prefix}.table.>",
            durable=args.durable,
            stream=args.stream,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,  # a new consumer starts at the beginning
                ack_wait=30,
            ),
        )
        seen = SeenIds(args.dedup_size)
        last_message = time.monotonic()
        while True:
            try:
                messages = await subscription.fetch(args.batch, timeout=1)
            except TimeoutError:  # nats' own TimeoutError, or asyncio's from deeper down
                messages = []
            if not messages:
                if args.once and time.monotonic() - last_message >= args.idle:
                    return 0
                continue
            last_message = time.monotonic()
            for message in messages:
                try:
                    event = json.loads(message.data)
                except json.JSONDecodeError:
                    # Not a CloudEvent: tell JetStream never to deliver it again.
                    await message.term()
                    continue
                if seen.add(str(event.get("id"))):
                    line = describe(event)
                    if line is not None:
                        print(line, flush=True)
                # Acknowledge after handling (duplicates too, so they are not redelivered).
                await message.ack()
    finally:
        # flush() is a round trip to the server: every ack sent before it has arrived.
        if nc.is_connected:
            await nc.flush()
        await nc.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(description="Print icelog table changes from NATS.")
    parser.add_argument(
        "--url",
        default=env.get("ICELOG_NATS_URL", "nats://127.0.0.1:4222"),
        help="NATS server URL(s), comma-separated",
    )
    parser.add_argument("--stream", default=env.get("ICELOG_NATS_STREAM", "ICELOG"))
    parser.add_argument("--prefix", default=env.get("ICELOG_NATS_SUBJECT_PREFIX", "icelog"))
    parser.add_argument("--durable", default="icelog-example-tables", help="durable consumer name")
    parser.add_argument("--batch", type=int, default=100, help="messages per fetch")
    parser.add_argument(
        "--dedup-size", type=int, default=10_000, help="how many recent ids to remember"
    )
    parser.add_argument(
        "--once", action="store_true", help="exit once no message arrived for --idle seconds"
    )
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of quiet for --once")
    args = parser.parse_args(argv)
    args.url = [u.strip() for u in args.url.split(",") if u.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(follow(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
