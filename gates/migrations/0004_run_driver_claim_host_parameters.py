import uuid

from django.db import migrations, models


def _give_every_run_a_key(apps, schema_editor):
    Run = apps.get_model("gates", "Run")
    for run in Run.objects.filter(key__isnull=True).only("pk"):
        Run.objects.filter(pk=run.pk).update(key=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [("gates", "0003_engagement_kv_plan")]

    operations = [
        migrations.AddField(
            model_name="host",
            name="parameters",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="run",
            name="driver_token",
            field=models.CharField(blank=True, max_length=36),
        ),
        migrations.AddField(
            model_name="run",
            name="driver_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="key",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(_give_every_run_a_key, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="key",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
