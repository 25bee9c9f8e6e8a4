from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gates', '0027_run_profile_snapshot'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='upload_parameters',
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
    ]
