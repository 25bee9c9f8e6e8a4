"""A soak's stored windows as one numeric table, for its page: one row per window (seq, start
as epoch seconds, crashed as 0/1, then the metrics the page draws), read from SoakSample's
number columns (written with each window from its metrics: gates.models.runs) in one query,
never decoded from the JSON row by row, and kept in the cache per run.

Stored windows never change (one row per run and seq, never updated), so the cached table is
extended with what was stored since, never rebuilt: a live soak polled every few seconds reads
only its newest windows. Without a cache (Redis down) the table is read whole; slower, right.
"""

from __future__ import annotations

import numpy as np
from django.db import connection
from django.db.models import FloatField, Func, QuerySet

from gates.cache import cache_get, cache_set
from gates.models import Run, SoakSample
from gates.models.soak import SOAK_SAMPLE_NUMBERS

NUMBERS = SOAK_SAMPLE_NUMBERS
COLUMNS = ("seq", "epoch", "crashed", *NUMBERS)
# How the packed read names each column in SQL (a boolean has no float8 cast of its own).
_SQL_VALUES = ("seq", "epoch", "crashed::int", *NUMBERS)
CACHE_S = 6 * 3600


class Epoch(Func):
    """Seconds since 1970 of a timestamp, computed by the database: loading 26,000 datetimes
    into Python objects costs more than the rest of the page."""

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)")

    def as_sqlite(self, compiler, connection, **extra):
        template = "((julianday(%(expressions)s) - 2440587.5) * 86400.0)"
        return self.as_sql(compiler, connection, template=template)


def stored_columns(run: Run, last_seq: int) -> np.ndarray:
    """Rows for seq <= last_seq (what the collector recorded as stored), in seq order. Keyed
    by the run's UUID: a database rebuilt from scratch reuses ids, never keys."""
    key = f"tollgate:soak-columns:v1:{run.key}"
    cached = cache_get(key)
    since, table = cached if cached and cached[0] <= last_seq else (-1, _empty())
    if since < last_seq:
        fresh = _read(SoakSample.objects.filter(run_id=run.pk, seq__gt=since, seq__lte=last_seq))
        table = np.vstack([table, fresh]) if len(table) else fresh
        cache_set(key, (last_seq, table), timeout=CACHE_S)
    return table


def column(table: np.ndarray, name: str) -> np.ndarray:
    return table[:, COLUMNS.index(name)]


def _read(samples: QuerySet) -> np.ndarray:
    """The windows' table; a NULL column (a metric the window lacked) becomes NaN, a hole in
    its series. PostgreSQL packs it into one binary value, other databases send rows."""
    query = samples.annotate(epoch=Epoch("window_start")).values_list("seq", "epoch", *COLUMNS[2:])
    if connection.vendor == "postgresql":
        return _read_packed(query.order_by())
    return _read_rows(query.order_by("seq"))


def _read_rows(query: QuerySet) -> np.ndarray:
    """Fetched through a plain cursor: Django's per-value converters cost more than the query."""
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return np.array(rows, dtype=float).reshape(len(rows), len(COLUMNS))


def _read_packed(query: QuerySet) -> np.ndarray:
    """The whole table as one bytea of big-endian doubles (float8send), row after row in seq
    order: 26,000 rows as 340,000 Python floats cost twice what the query does, one buffer
    is read by numpy in a single copy. The column names are this module's constants."""
    sql, params = query.query.sql_with_params()
    doubles = " || ".join(f"float8send(COALESCE({name}::float8, 'NaN'))" for name in _SQL_VALUES)
    aggregate = f"string_agg({doubles}, ''::bytea ORDER BY seq)"
    packed = f"SELECT {aggregate} FROM ({sql}) AS windows"  # noqa: S608 (constants, see above)
    with connection.cursor() as cursor:
        cursor.execute(packed, params)
        (buffer,) = cursor.fetchone()
    if buffer is None:  # no rows
        return _empty()
    return np.frombuffer(buffer, dtype=">f8").astype(float).reshape(-1, len(COLUMNS))


def _empty() -> np.ndarray:
    return np.empty((0, len(COLUMNS)), dtype=float)
