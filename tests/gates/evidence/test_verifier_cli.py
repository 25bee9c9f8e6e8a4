"""The verifier as customers run it: `manage.py verify_evidence` and the standalone
bin/tollgate-verify in an isolated Python (no Django settings, no PYTHONPATH), exit codes and
the line that names what failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from gates.evidence import bundle_for_decision, layout
from gates.models import EvidenceKey
from tests.gates.evidence.helpers import g3_upload_decision

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def bundle_files(api, actor, vendor_viewer, engagement, host, tmp_path):
    data, _ = bundle_for_decision(g3_upload_decision(api, actor, vendor_viewer, engagement, host))
    good = tmp_path / "bundle.zip"
    good.write_bytes(data)
    members = layout.read_zip(data)
    members["runs/attempt-1/files/baseline-c8-r1/result.json"] += b" "
    bad = tmp_path / "tampered.zip"
    bad.write_bytes(layout.write_zip(members))
    key = tmp_path / "server.pub"
    key.write_text(EvidenceKey.objects.get().public_key)
    return good, bad, key


def isolated(*args: str) -> subprocess.CompletedProcess:
    """bin/tollgate-verify under `python -I`: no PYTHONPATH, no user site, no Django settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    command = [sys.executable, "-I", str(ROOT / "bin/tollgate-verify"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd="/")


def test_the_standalone_script_verifies_without_django(bundle_files):
    good, bad, key = bundle_files
    result = isolated(str(good), "--public-key", str(key))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("VERIFIED")
    failed = isolated(str(bad), "--public-key", str(key))
    assert failed.returncode == 1
    name = "runs/attempt-1/files/baseline-c8-r1/result.json"
    assert f"FAIL member {name}: SHA-256 differs from the signed statement" in failed.stdout


def test_the_pure_verifier_imports_no_django():
    probe = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import gates.evidence.verify; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    found = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert found.stdout.strip() == "[]"


def test_the_management_command_exits_non_zero_naming_the_member(bundle_files, capsys):
    good, bad, key = bundle_files
    call_command("verify_evidence", str(good), "--public-key", str(key))
    assert "VERIFIED" in capsys.readouterr().out
    with pytest.raises(CommandError) as refused:
        call_command("verify_evidence", str(bad), "--public-key", str(key))
    assert refused.value.returncode == 1
    assert "baseline-c8-r1/result.json: SHA-256 differs" in capsys.readouterr().out
