"""The agreed bar (issue 14): signatures become append-only rows bound to a digest, party keys,
stop-loss resets, and the rehearsal mark on runs and decisions. Signatures already recorded on
gate specs are carried over before their columns go."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def _carry_signatures(apps, schema_editor):
    GateSpec = apps.get_model("gates", "GateSpec")
    SpecSignature = apps.get_model("gates", "SpecSignature")
    for spec in GateSpec.objects.all():
        for party in ("vendor", "customer"):
            at = getattr(spec, f"{party}_signed_at")
            if at is not None:
                SpecSignature.objects.create(
                    spec=spec,
                    party=party,
                    digest=spec.digest,
                    signed_by_id=getattr(spec, f"{party}_signed_by_id"),
                    signed_at=at,
                )


def _append_only(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "CREATE TRIGGER gates_specsignature_append_only BEFORE UPDATE OR DELETE ON "
        "gates_specsignature FOR EACH ROW EXECUTE FUNCTION tollgate_refuse_change();"
    )


def _drop_append_only(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "DROP TRIGGER IF EXISTS gates_specsignature_append_only ON gates_specsignature;"
    )



class Migration(migrations.Migration):

    dependencies = [
        ('gates', '0005_drop_run_program_state_and_step_failed'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='decision',
            name='rehearsal',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='run',
            name='rehearsal',
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name='PartyKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_key', models.TextField()),
                ('fingerprint', models.CharField(max_length=80, unique=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('organization', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='party_keys', to='gates.organization')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['organization', '-created_at'],
            },
        ),
        migrations.CreateModel(
            name='StopLossReset',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.TextField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ('vendor_signed_at', models.DateTimeField(blank=True, null=True)),
                ('customer_signed_at', models.DateTimeField(blank=True, null=True)),
                ('effective_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('customer_signed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('gate', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='resets', to='gates.gate')),
                ('vendor_signed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['gate', '-created_at'],
            },
        ),
        migrations.CreateModel(
            name='SpecSignature',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('party', models.CharField(choices=[('vendor', 'Vendor'), ('customer', 'Customer')], max_length=16)),
                ('digest', models.CharField(max_length=64)),
                ('signed_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ('ssh_signature', models.TextField(blank=True)),
                ('key', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='gates.partykey')),
                ('signed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('spec', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='signatures', to='gates.gatespec')),
            ],
            options={
                'ordering': ['spec', 'signed_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('spec', 'party'), name='one_signature_per_party'), models.CheckConstraint(condition=models.Q(('party__in', ['vendor', 'customer'])), name='signature_party_known')],
            },
        ),
        migrations.RunPython(_carry_signatures, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='gatespec',
            name='customer_signed_at',
        ),
        migrations.RemoveField(
            model_name='gatespec',
            name='customer_signed_by',
        ),
        migrations.RemoveField(
            model_name='gatespec',
            name='vendor_signed_at',
        ),
        migrations.RemoveField(
            model_name='gatespec',
            name='vendor_signed_by',
        ),
        migrations.RunPython(_append_only, _drop_append_only),
    ]
