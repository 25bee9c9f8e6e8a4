"""On PostgreSQL, refuse UPDATE and DELETE on the append-only tables even from raw SQL."""

from django.db import migrations

TABLES = ("gates_auditevent", "gates_decision")

CREATE_FUNCTION = """
CREATE OR REPLACE FUNCTION tollgate_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""


def _create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(CREATE_FUNCTION, params=None)
    for table in TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION tollgate_refuse_change();"
        )


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};")
    schema_editor.execute("DROP FUNCTION IF EXISTS tollgate_refuse_change();")


class Migration(migrations.Migration):
    dependencies = [("gates", "0001_initial")]
    operations = [migrations.RunPython(_create, _drop)]
