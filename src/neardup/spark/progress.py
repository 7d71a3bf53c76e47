"""Progress of the Spark job, stage by stage (fingerprints, buckets, pairs, clusters, output).

Each stage runs its Spark jobs in a job group of its own, so its tasks can be told from any
other work of the session; while a caller asks for progress, a thread polls the status
tracker and reports the tasks done and known so far with the records handled, and each
stage's end is reported once more with its final counts. Only counts reach the driver.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from pyspark import SparkContext

#: Seconds between two looks at the status tracker.
POLL_SECONDS = 0.5
#: The longest wait for Spark's events at the end of a stage.
DRAIN_MILLIS = 10_000
_GROUP = "spark.jobGroup.id"


@dataclass(frozen=True)
class StageProgress:
    """A stage so far: its Spark tasks (of the jobs started yet: more may follow), the
    records handled (counted while fingerprinting; later, the collection's share by tasks
    done) and the seconds since it began; ``finished`` on its last report."""

    stage: str
    done: int
    tasks: int
    records: int
    seconds: float
    finished: bool = False

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds if self.seconds > 0 else 0.0


Report = Callable[[StageProgress], None]


class Stages:
    """Times the job's stages (``seconds`` by stage name) and, given ``report``, reports their
    progress. ``begin`` ends the stage running and starts the next; ``end`` ends the last.
    ``records`` is read for the records handled: a counter's value while fingerprinting,
    then the collection size."""

    def __init__(
        self, context: SparkContext, seconds: dict[str, float], report: Report | None = None
    ) -> None:
        self.context = context
        self.seconds = seconds
        self.report = report
        self.records: Callable[[], int] = lambda: 0
        self.stage: str | None = None
        self.group = ""
        self.started = time.perf_counter()
        self._previous = context.getLocalProperty(_GROUP)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def begin(self, stage: str) -> None:
        self.end()
        group = f"neardup-{stage}-{uuid.uuid4().hex[:8]}"
        self.context.setJobGroup(group, f"neardup spark dedup: {stage}")
        with self._lock:  # the poller reads the three together
            self.stage, self.started, self.group = stage, time.perf_counter(), group
        if self.report is not None and self._poller is None:
            self._poller = threading.Thread(target=self._poll, name="neardup-progress", daemon=True)
            self._poller.start()

    def end(self) -> None:
        """End the running stage (if any): its time, its last report."""
        with self._lock:
            if self.stage is None:
                return
            self.seconds[self.stage] = self.seconds.get(self.stage, 0.0) + time.perf_counter() - self.started
            if self.report is not None:
                self._drain()
                self.report(self._status(finished=True))
            self.stage = None

    def _drain(self) -> None:
        """Let Spark deliver the stage's last events: the status tracker is fed from its
        listener bus, asynchronously, and would otherwise miss the tasks that just ended."""
        with suppress(Exception):  # an internal call: at worst the last report falls short
            self.context._jsc.sc().listenerBus().waitUntilEmpty(DRAIN_MILLIS)

    def close(self) -> None:
        """End the last stage, stop polling and give the thread its previous job group back."""
        self.end()
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
        self.context.setLocalProperty(_GROUP, self._previous)  # type: ignore[arg-type]

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            with self._lock:
                if self.stage is not None and self.report is not None:
                    self.report(self._status())

    def _status(self, finished: bool = False) -> StageProgress:
        assert self.stage is not None
        done, tasks = self._tasks()
        records = self.records()
        if self.stage != "fingerprints":
            records = records * done // tasks if tasks else (records if finished else 0)
        return StageProgress(self.stage, done, tasks, records, time.perf_counter() - self.started, finished)

    def _tasks(self) -> tuple[int, int]:
        """(done, known) tasks of the stage's jobs. A finished job's stages that ran no task
        were skipped (an earlier job made their output) and are left out; a running job's
        may be pending or skipped, and count until the job ends."""
        tracker = self.context.statusTracker()
        done = tasks = 0
        for job in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job)
            if info is None:
                continue
            for stage in filter(None, map(tracker.getStageInfo, info.stageIds)):
                if info.status != "SUCCEEDED" or stage.numCompletedTasks:
                    done += stage.numCompletedTasks
                    tasks += stage.numTasks
        return done, tasks
