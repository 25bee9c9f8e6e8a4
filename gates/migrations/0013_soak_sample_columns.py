"""The soak page's numbers as real columns on SoakSample (a float per metric the page draws,
and `crashed`), filled for the rows stored before them by one UPDATE from their `metrics` JSON.

The metric names are frozen here, as they were when the columns were added: a migration must
not follow later changes to gates.models.runs.SOAK_SAMPLE_NUMBERS (a column added later gets
its own migration). Only JSON numbers are copied; anything else (missing, null, a string)
leaves NULL, as SoakSample.of_window does for new rows. Reversing drops the columns.
"""

from django.db import migrations, models

NUMBERS = (
    "output_throughput",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "completed",
    "failed",
    "kv_cache_usage",
    "external_hit_rate",
    "memory_bytes",
    "host_available_bytes",
    "gpu_memory_used_mib",
)
TABLE = "gates_soaksample"


def _postgresql_update() -> str:
    numbers = ", ".join(
        f"{name} = CASE WHEN jsonb_typeof(metrics -> '{name}') = 'number' "
        f"THEN (metrics ->> '{name}')::double precision END"
        for name in NUMBERS
    )
    crashed = "crashed = COALESCE(metrics -> 'crashed' = 'true'::jsonb, false)"
    return f"UPDATE {TABLE} SET {crashed}, {numbers}"


def _sqlite_update() -> str:
    numbers = ", ".join(
        f"{name} = CASE WHEN json_type(metrics, '$.{name}') IN ('integer', 'real') "
        f"THEN CAST(json_extract(metrics, '$.{name}') AS REAL) END"
        for name in NUMBERS
    )
    crashed = "crashed = COALESCE(json_type(metrics, '$.crashed') = 'true', 0)"
    return f"UPDATE {TABLE} SET {crashed}, {numbers}"


def backfill_columns(apps, schema_editor) -> None:
    """Every stored window's columns from its JSON, in one statement."""
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": _postgresql_update, "sqlite": _sqlite_update}
    if vendor not in statements:
        raise RuntimeError(f"no soak column backfill for the {vendor} database")
    schema_editor.execute(statements[vendor](), params=None)


def _number_field(name: str) -> migrations.AddField:
    return migrations.AddField(
        model_name="soaksample", name=name, field=models.FloatField(blank=True, null=True)
    )


class Migration(migrations.Migration):
    dependencies = [("gates", "0012_merge_session_work")]

    operations = [
        migrations.AddField(
            model_name="soaksample", name="crashed", field=models.BooleanField(default=False)
        ),
        *(_number_field(name) for name in NUMBERS),
        migrations.RunPython(backfill_columns, migrations.RunPython.noop),
    ]
