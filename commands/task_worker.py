"""Task workers: threads that claim due tasks and run them.

They run inside `icelog serve` (ICELOG_TASK_WORKERS threads per process) or alone
(`icelog tasks run`). Any number of processes may run workers on one database: a
task is leased to one worker at a time (see projections/task_leases.py), and the
attempt it starts is an event the event store lets only one worker append.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from uuid import UUID, uuid4

from icelog.commands.application import now_ms
from icelog.commands.tasks import TaskCommands
from icelog.domain.ports import TaskLeaseStore

log = logging.getLogger("icelog.tasks")


class TaskWorkers:
    def __init__(
        self,
        catalog: TaskCommands,
        leases: TaskLeaseStore,
        *,
        threads: int = 1,
        poll_interval_s: float = 2.0,
        lease_s: float = 30.0,
    ) -> None:
        self.catalog = catalog
        self.leases = leases
        self.threads = threads
        self.poll_interval_s = poll_interval_s
        self.lease_ms = int(lease_s * 1000)
        self._prefix = f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._running: list[threading.Thread] = []

    def worker_name(self, index: int) -> str:
        return f"{self._prefix}:{index}"

    # -- one step --------------------------------------------------------------------------
    def run_once(self, worker: str) -> bool:
        """Claim one due task and run it; False when nothing was due."""
        claimed = self.leases.claim(worker, now_ms=now_ms(), lease_ms=self.lease_ms, limit=1)
        if not claimed:
            return False
        task_id = claimed[0]
        try:
            task = self.catalog.start_task(UUID(task_id), worker)
            if task is None:
                return True
            log.info("task %s (%s) attempt %d by %s", task.id, task.queue, task.attempt, worker)

            def heartbeat() -> bool:
                return self.leases.renew(task_id, worker, until_ms=now_ms() + self.lease_ms)

            outcome = self.catalog.run_task(task.id, worker, heartbeat)
            log.info("task %s (%s): %s", task.id, task.queue, outcome or "taken over")
        finally:
            self.leases.release(task_id, worker)
        return True

    def run_until_idle(self, worker: str | None = None, limit: int = 10_000) -> int:
        """Run due tasks until none is left (for tests and one-shot runs)."""
        name = worker or self.worker_name(0)
        done = 0
        while done < limit and self.run_once(name):
            done += 1
        return done

    # -- threads ---------------------------------------------------------------------------
    def start(self) -> None:
        for index in range(self.threads):
            thread = threading.Thread(
                target=self._loop, args=(self.worker_name(index),), name=f"icelog-task-{index}"
            )
            thread.daemon = True
            thread.start()
            self._running.append(thread)

    def wake(self, due_at_ms: int) -> None:
        """A task was scheduled here: look sooner if it is due before the next poll."""
        if due_at_ms <= now_ms() + self.poll_interval_s * 1000:
            with self._wake:
                self._wake.notify_all()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the tasks in hand, then stop."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        deadline = time.monotonic() + timeout_s
        for thread in self._running:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._running.clear()

    def _loop(self, worker: str) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once(worker)
            except Exception:  # a database hiccup must not kill the worker
                log.exception("task worker %s: claim failed; retrying", worker)
                busy = False
            if busy:
                continue
            with self._wake:
                if not self._stop.is_set():
                    self._wake.wait(self._idle_wait())

    def _idle_wait(self) -> float:
        try:
            due = self.leases.next_due_ms()
        except Exception:
            due = None
        wait_s = (due - now_ms()) / 1000 if due is not None else self.poll_interval_s
        if wait_s <= 0:
            # Due but not claimable: another worker holds it. Poll as usual.
            return self.poll_interval_s
        return max(0.05, min(self.poll_interval_s, wait_s))
