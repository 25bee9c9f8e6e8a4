"""A Celery app of its own (no Django) on the embedded broker's transport, for the stress test:
one task that appends its number to a file, so the test can count what arrived."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

FOLDER = Path(os.environ["STRESS_BROKER_DIR"])
RESULTS = FOLDER / "results.txt"

app = Celery("stress")
app.conf.update(
    broker_url="filesystem://",
    broker_transport=os.environ.get("STRESS_TRANSPORT", "worker.broker:FilesystemTransport"),
    broker_transport_options={
        "data_folder_in": str(FOLDER / "queue"),
        "data_folder_out": str(FOLDER / "queue"),
        "processed_folder": str(FOLDER / "processed"),
        "control_folder": str(FOLDER / "control"),
        "store_processed": False,
    },
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
)


@app.task(name="stress.record")
def record(number: int) -> None:
    # One short O_APPEND write per task: lines from several processes never interleave.
    with open(RESULTS, "a") as results:
        results.write(f"{number}\n")


def produce(first: int, count: int) -> None:
    for number in range(first, first + count):
        record.delay(number)


if __name__ == "__main__":
    import sys

    produce(int(sys.argv[1]), int(sys.argv[2]))
