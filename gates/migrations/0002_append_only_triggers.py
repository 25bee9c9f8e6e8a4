"""On PostgreSQL, refuse UPDATE and DELETE on the append-only tables even from raw SQL: the
function every append-only trigger calls, and the first two tables' triggers (later migrations
add theirs with `_append_only.append_only`)."""

from django.db import migrations

from gates.migrations._append_only import append_only

TABLES = ("gates_auditevent", "gates_decision")

CREATE_FUNCTION = """
CREATE OR REPLACE FUNCTION tollgate_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""


def _create_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_FUNCTION, params=None)


def _drop_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS tollgate_refuse_change();")


class Migration(migrations.Migration):
    dependencies = [("gates", "0001_initial")]
    # Unapplied in reverse: the triggers go before the function they call.
    operations = [migrations.RunPython(_create_function, _drop_function), append_only(*TABLES)]
