"""Append-only tables for migrations: a trigger that refuses UPDATE and DELETE even from raw
SQL, calling migration 0002's `tollgate_refuse_change()` (0002 uses it too). PostgreSQL only (other databases
keep the rule in the models). The leading underscore keeps Django from taking this module
for a migration."""

from django.db import migrations


def append_only(*tables: str) -> migrations.RunPython:
    def create(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for table in tables:
            schema_editor.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION tollgate_refuse_change();"
            )

    def drop(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for table in tables:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};")

    return migrations.RunPython(create, drop)
