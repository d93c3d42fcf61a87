"""A private Kafka "cluster" per test: librdkafka's mock cluster in its own process.

There is no Kafka broker on the test machines (no registry they can reach offers one).
librdkafka (bundled with confluent-kafka) carries a mock cluster speaking the Kafka
protocol; there is no Python API for it, so this module drives it through ctypes in a child
process (``python -m tests.support.kafka_mock``) that other processes — relays, servers and
the test's own consumer — connect to while it lives.

The child pre-creates the topic (the mock has no CreateTopics API), prints the bootstrap
servers on its first stdout line, then reads commands on stdin, one a line, answering each
with one line once done:

- ``down``: every broker drops its connections and stops serving new ones (an outage);
- ``up``: every broker serves again;
- ``rtt <ms>``: every broker delays each response by that long (0: no delay). The request
  itself is handled at once, so a produce is in the log while its acknowledgement is still
  on its way — the window in which a crashing producer leaves sent-but-unacknowledged events;
- ``produce-error <code>``: the next Produce request (to any broker) fails with that Kafka
  error code (e.g. 45, OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to an idempotent producer).

End of stdin ends it, so it also ends when the test process dies. Everything lives in
memory: it is gone with the process. Known limits of the mock: no CreateTopics admin API,
`read_committed` not enforced, no persistence.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_READY_TIMEOUT = 30.0
_PRODUCE_API_KEY = 0
_REPO_ROOT = Path(__file__).resolve().parents[2]


def _librdkafka() -> ctypes.CDLL:
    import confluent_kafka

    libs = os.path.join(
        os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs"
    )
    found = sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))
    if not found:
        raise RuntimeError(f"no bundled librdkafka under {os.path.abspath(libs)}")
    lib = ctypes.CDLL(found[0])
    vp, c_int = ctypes.c_void_p, ctypes.c_int
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_new.argtypes = []
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [c_int, vp, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.restype = c_int
    lib.rd_kafka_mock_topic_create.argtypes = [vp, ctypes.c_char_p, c_int, c_int]
    for name in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_broker_set_up"):
        fn = getattr(lib, name)
        fn.restype = c_int
        fn.argtypes = [vp, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_rtt.restype = c_int
    lib.rd_kafka_mock_broker_set_rtt.argtypes = [vp, ctypes.c_int32, c_int]
    lib.rd_kafka_mock_push_request_errors_array.restype = None
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [
        vp,
        ctypes.c_int16,
        ctypes.c_size_t,
        ctypes.POINTER(c_int),
    ]
    return lib


def _serve(topic: str, partitions: int, brokers: int) -> int:
    """The child process: own a mock cluster until stdin closes."""
    lib = _librdkafka()
    err = ctypes.create_string_buffer(512)
    rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), err, len(err))  # 0: a producer handle
    if not rk:
        print(f"error: rd_kafka_new: {err.value.decode()}", flush=True)
        return 1
    cluster = lib.rd_kafka_mock_cluster_new(rk, brokers)
    if not cluster:
        print("error: rd_kafka_mock_cluster_new failed", flush=True)
        return 1
    code = lib.rd_kafka_mock_topic_create(cluster, topic.encode(), partitions, min(3, brokers))
    if code != 0:
        print(f"error: rd_kafka_mock_topic_create: {code}", flush=True)
        return 1
    print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command in ("down", "up"):
            setter = (
                lib.rd_kafka_mock_broker_set_down
                if command == "down"
                else lib.rd_kafka_mock_broker_set_up
            )
            codes = [setter(cluster, broker) for broker in range(1, brokers + 1)]
            print(f"{command} {' '.join(map(str, codes))}", flush=True)
        elif command.startswith("rtt ") and command[4:].isdigit():
            rtt = int(command[4:])
            codes = [
                lib.rd_kafka_mock_broker_set_rtt(cluster, broker, rtt)
                for broker in range(1, brokers + 1)
            ]
            print(f"rtt {' '.join(map(str, codes))}", flush=True)
        elif command.startswith("produce-error ") and command[14:].isdigit():
            errors = (ctypes.c_int * 1)(int(command[14:]))
            lib.rd_kafka_mock_push_request_errors_array(cluster, _PRODUCE_API_KEY, 1, errors)
            print("produce-error", flush=True)
        else:
            print(f"error: unknown command {command!r}", flush=True)
    return 0  # the cluster dies with the process


@dataclass
class KafkaMock:
    """A running mock cluster process."""

    topic: str
    partitions: int
    bootstrap_servers: str
    process: subprocess.Popen[str]

    def _command(self, command: str, timeout: float = 10.0) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = _read_line(self.process.stdout, timeout)
        verb, *codes = answer.split() or [""]
        if verb != command.partition(" ")[0] or any(code != "0" for code in codes):
            raise RuntimeError(f"mock cluster: {command!r} answered {answer!r}")

    def brokers_down(self) -> None:
        """Every broker closes its connections and refuses to serve until brokers_up()."""
        self._command("down")

    def brokers_up(self) -> None:
        self._command("up")

    def set_rtt(self, milliseconds: int) -> None:
        """Delay every broker's responses by `milliseconds` (0: none)."""
        self._command(f"rtt {int(milliseconds)}")

    def fail_next_produce(self, error_code: int) -> None:
        """The next Produce request fails with the Kafka error `error_code`."""
        self._command(f"produce-error {int(error_code)}")

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _read_line(stream: IO[str], timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise RuntimeError(f"mock cluster did not answer within {timeout:.0f}s")
    return stream.readline().strip()


def start_kafka_mock(
    topic: str, *, partitions: int = 4, brokers: int = 3, log: Path | None = None
) -> KafkaMock:
    """Start a mock cluster with `topic` pre-created; returns once it accepts clients.
    librdkafka's own log lines (stderr) go to `log` when given."""
    with contextlib.ExitStack() as stack:
        stderr = stack.enter_context(log.open("ab")) if log is not None else None
        process = _spawn(topic, partitions, brokers, stderr)
    assert process.stdout is not None
    deadline = time.monotonic() + _READY_TIMEOUT
    try:
        first = _read_line(process.stdout, max(0.1, deadline - time.monotonic()))
    except RuntimeError:
        process.kill()
        process.wait()
        raise
    if not first or first.startswith("error"):
        process.kill()
        process.wait()
        raise RuntimeError(f"mock Kafka cluster did not start: {first!r}")
    return KafkaMock(topic=topic, partitions=partitions, bootstrap_servers=first, process=process)


def _spawn(
    topic: str, partitions: int, brokers: int, stderr: IO[bytes] | None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.kafka_mock",
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--brokers",
            str(brokers),
        ],
        cwd=_REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        bufsize=1,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--brokers", type=int, default=3)
    args = parser.parse_args(argv)
    return _serve(args.topic, args.partitions, args.brokers)


if __name__ == "__main__":
    sys.exit(main())
