"""Kombu transports the worker uses, each fixing one way the stock one broke (issue 27).

RedisTransport: after a broker outage Celery closes the consumer's connection while tasks of
it still run; when one ends, its late ack reaches a channel whose connection is gone and kombu
rebuilt a pool from it, raising AttributeError ('NoneType' object has no attribute
'hostname'), which Celery does not count as a connection error: "Unrecoverable error", the
worker exited. Here that ack raises a connection error instead, which Celery logs and
survives; the message stays in Redis's unacked set and is delivered again after the
visibility timeout (a task is safe to run twice; the beat re-pokes runs long before).

FilesystemTransport (the embedded default broker): the stock one creates a message file and
only then writes it, so a consumer listing the folder in between read an empty file
(JSONDecodeError, the worker exited); exchange tables were truncated in place while read. Here
every file appears whole (written aside, then renamed into place), and a message is claimed
by renaming it into a folder on the same file system, so exactly one consumer gets it.
"""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import redis as redis_client
from kombu.transport import filesystem, redis
from kombu.transport.virtual import Empty
from kombu.utils.json import dumps, loads


class RedisChannel(redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:  # the connection was closed after an outage
            raise redis_client.ConnectionError(
                "the broker connection was closed after an outage; the message stays "
                "unacknowledged and is delivered again"
            )
        return super()._connparams(asynchronous=asynchronous)


class RedisTransport(redis.Transport):
    Channel = RedisChannel


class FilesystemChannel(filesystem.Channel):
    """Same folders and file names as kombu's, so a queue left by the stock one still drains."""

    @property
    def _scratch_folder(self) -> Path:
        # Beside the queue: a rename within one file system is atomic.
        folder = Path(self.data_folder_out).parent / "incoming"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def _claimed_folder(self) -> Path:
        folder = Path(self.data_folder_in).parent / "claimed"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _write_whole(self, target: Path, data: bytes) -> None:
        """`target` holds all of `data` or is not there (or is as it was)."""
        scratch = self._scratch_folder / f"{uuid.uuid4()}.part"
        with open(scratch, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(scratch, target)

    def _put(self, queue, message, **kwargs):
        # Zero-padded so names sort in send order; CLOCK_MONOTONIC is one clock per machine.
        name = f"{time.monotonic_ns() // 1_000_000:015d}_{uuid.uuid4()}.{queue}.msg"
        try:
            self._write_whole(Path(self.data_folder_out) / name, dumps(message).encode())
        except OSError as error:
            raise filesystem.ChannelError(f"cannot add {name!r} to the queue") from error

    def _get(self, queue, timeout=None):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            claimed = self._claimed_folder / name
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:  # another consumer claimed it first
                continue
            try:
                payload = claimed.read_bytes()
            finally:
                claimed.unlink(missing_ok=True)
            return loads(payload)
        raise Empty()

    @contextmanager
    def _table_lock(self, exchange: str):
        """One writer of an exchange's table at a time; readers need no lock (whole files)."""
        lock_path = self._exchange_file(exchange).with_suffix(".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def get_table(self, exchange: str) -> list:
        try:
            table = loads(self._exchange_file(exchange).read_bytes())
        except FileNotFoundError:
            return []
        return [filesystem.exchange_queue_t(*row) for row in table]

    def _queue_bind(self, exchange, routing_key, pattern, queue) -> None:
        row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with self._table_lock(exchange):
            table = self.get_table(exchange)
            if row not in table:
                self._write_whole(self._exchange_file(exchange), dumps([row, *table]).encode())

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs) -> None:
        # The virtual channel's own bookkeeping, skipping the stock file rewrite.
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange):
            table = self.get_table(exchange)
            if row in table:
                table.remove(row)
                self._write_whole(self._exchange_file(exchange), dumps(table).encode())


class FilesystemTransport(filesystem.Transport):
    Channel = FilesystemChannel
