"""Evidence bundles of decided gates: built twice to the same bytes, verified offline, and every
kind of tampering refused with a line that names what broke."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from gates.evidence import bundle_for_decision, envelope_digest, layout, statement
from gates.evidence.store import seal_create
from gates.evidence.verify import verify_bundle
from gates.evidence.versions import software_versions
from gates.models import EvidenceKey, EvidenceSeal
from tests.gates.evidence.helpers import (
    edited_json,
    g1_upload_decision,
    g3_carrying_decision,
    g3_upload_decision,
    resealed,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def g3_bundle(api, actor, vendor_viewer, engagement, host):
    decision = g3_upload_decision(api, actor, vendor_viewer, engagement, host)
    data, _ = bundle_for_decision(decision)
    return data


def server_key():
    return statement.load_public_key(EvidenceKey.objects.get().public_pem)


def problems_of(data: bytes, **options) -> list[str]:
    report = verify_bundle(data, public_key=server_key(), **options)
    return report.problems


def rezipped(data: bytes, change) -> bytes:
    members = layout.read_zip(data)
    change(members)
    return layout.write_zip(members)


def test_a_g3_upload_bundle_verifies_and_recomputes_to_its_verdict(g3_bundle):
    report = verify_bundle(g3_bundle, public_key=server_key())
    assert report.ok, report.problems
    assert any("recomputed from its raw files to pass" in note for note in report.notes)
    names = set(layout.read_zip(g3_bundle))
    assert {layout.SPEC, layout.DECISION, layout.OPERATING_CHARACTERISTIC} <= names
    assert "runs/attempt-1/files/offload-c8-r4/metrics-after.txt" in names


def test_an_underpowered_spec_signed_knowingly_is_named_by_the_offline_verifier(
    api, actor, vendor_viewer, engagement, host
):
    decision = g3_upload_decision(
        api, actor, vendor_viewer, engagement, host, acknowledged_underpowered=True
    )
    report = verify_bundle(bundle_for_decision(decision)[0], public_key=server_key())
    assert report.ok, report.problems
    named = [note for note in report.notes if "acknowledging the spec is underpowered" in note]
    assert len(named) == 2 and all("under the 80%" in note for note in named)


def test_building_twice_gives_identical_bytes_and_one_seal(
    api, actor, vendor_viewer, engagement, host
):
    decision = g3_upload_decision(api, actor, vendor_viewer, engagement, host)
    first, digest = bundle_for_decision(decision)
    again, same = bundle_for_decision(decision)
    assert first == again and digest == same == layout.sha256_hex(first)
    assert EvidenceSeal.objects.count() == 1
    assert envelope_digest(decision) == layout.sha256_hex(layout.read_zip(first)[layout.ENVELOPE])


def test_a_g1_decision_bundle_recomputes_from_the_probe_files(api, actor, engagement):
    decision = g1_upload_decision(api, actor, engagement)
    data, _ = bundle_for_decision(decision)
    assert verify_bundle(data, public_key=server_key()).ok
    members = layout.read_zip(data)
    inventory = json.loads(members[layout.INVENTORY])
    assert inventory["gpu_count"] == 1 and inventory["vllm_version"] == "0.25.1"

    def other_version(m):
        m["runs/attempt-1/files/probes/vllm_version.txt"] = b"0.19.0\n"

    problems = problems_of(resealed(data, other_version))
    assert any("steps.json[3].facts.vllm_version" in p and "0.19.0" in p for p in problems)
    assert any("verdict: recorded 'pass', recomputed 'fail'" in p for p in problems)


def test_the_envelope_verifies_with_securesystemslib_s_own_dsse_verifier(g3_bundle):
    members = layout.read_zip(g3_bundle)
    key = EvidenceKey.objects.get()
    public = SSlibKey.from_crypto(server_key(), keyid=key.fingerprint)
    envelope = Envelope.from_dict(json.loads(members[layout.ENVELOPE]))
    assert set(envelope.verify([public], 1)) == {key.fingerprint}
    other = SSlibKey.from_crypto(Ed25519PrivateKey.generate().public_key(), keyid=key.fingerprint)
    with pytest.raises(VerificationError, match="threshold"):
        Envelope.from_dict(json.loads(members[layout.ENVELOPE])).verify([other], 1)
    subject = json.loads(envelope.payload)["subject"]
    assert {s["name"] for s in subject} == set(members) - set(layout.UNSIGNED)


@pytest.mark.parametrize(
    "member",
    [layout.DECISION, layout.SPEC, "runs/attempt-1/files/baseline-c8-r2/result.json"],
)
def test_flipping_one_byte_of_a_member_names_it(g3_bundle, member):
    def flip(members):
        content = bytearray(members[member])
        content[len(content) // 2] ^= 0x01
        members[member] = bytes(content)

    assert f"member {member}: SHA-256 differs from the signed statement" in problems_of(
        rezipped(g3_bundle, flip)
    )


def test_a_byte_flipped_in_the_zip_itself_is_refused(g3_bundle):
    damaged = bytearray(g3_bundle)
    damaged[len(damaged) // 3] ^= 0xFF
    assert problems_of(bytes(damaged))


def test_a_dropped_and_an_added_member_are_named(g3_bundle):
    name = "runs/attempt-1/files/offload-c8-r3/result.json"
    dropped = problems_of(rezipped(g3_bundle, lambda m: m.pop(name)))
    assert f"member {name}: missing (the signed statement lists it)" in dropped
    added = problems_of(rezipped(g3_bundle, lambda m: m.update({"extra.txt": b"x"})))
    assert added == ["member extra.txt: not in the signed statement (added)"]


def test_a_swapped_signature_or_another_key_fails_the_server_signature(g3_bundle):
    def swap(members):
        edited_json(
            members,
            layout.ENVELOPE,
            lambda e: e["signatures"][0].update(
                sig=statement.envelope(b"", [("k", bytes(64))])["signatures"][0]["sig"]
            ),
        )

    assert any("does not verify" in p for p in problems_of(rezipped(g3_bundle, swap)))
    stranger = Ed25519PrivateKey.generate().public_key()
    problems = verify_bundle(g3_bundle, public_key=stranger).problems
    assert any(f"none by key {statement.key_fingerprint(stranger)}" in p for p in problems)


def test_an_edited_verdict_or_number_signed_again_fails_recomputation(g3_bundle):
    def verdict(members):
        edited_json(members, layout.DECISION, lambda d: d.update(verdict="fail"))

    problems = problems_of(resealed(g3_bundle, verdict))
    assert "decision/decision.json verdict: recorded 'fail', recomputed 'pass'" in problems

    def number(members):
        edited_json(
            members, layout.DECISION, lambda d: d["result"]["clauses"][0].update(estimate=50.0)
        )

    problems = problems_of(resealed(g3_bundle, number))
    assert any(
        p.startswith("decision/decision.json result.clauses[0].estimate: recorded 50.0")
        for p in problems
    )

    def measured(members):
        name = "runs/attempt-1/measurements.json"
        edited_json(members, name, lambda rows: rows[0]["metrics"].update(completed=1))

    problems = problems_of(resealed(g3_bundle, measured))
    assert any("measurements.json[0].metrics.completed: recorded 1" in p for p in problems)


def test_a_raw_file_edited_and_signed_again_changes_the_recomputed_numbers(g3_bundle):
    name = "runs/attempt-1/files/offload-c8-r1/result.json"

    def faster(members):
        document = json.loads(members[name])
        document["median_ttft_ms"] = 1.0
        members[name] = json.dumps(document).encode()

    problems = problems_of(resealed(g3_bundle, faster))
    assert any("measurements.json" in p and "raw_sha256" in p for p in problems)
    assert any("metrics.ttft_ms.median: recorded 612.0, recomputed 1.0" in p for p in problems)


def test_a_member_of_the_wrong_shape_is_a_named_failure_not_a_crash(g3_bundle):
    def shapeless(members):
        members[layout.DECISION] = b"[1, 2]"

    problems = problems_of(resealed(g3_bundle, shapeless))
    assert problems and all(isinstance(p, str) for p in problems)


def test_a_carrying_decision_holds_the_carried_files_and_a_changed_carried_number_is_named(
    api, actor, vendor_viewer, engagement, host
):
    decision = g3_carrying_decision(api, actor, vendor_viewer, engagement, host)
    assert decision.verdict == "pass"
    data, _ = bundle_for_decision(decision)
    report = verify_bundle(data, public_key=server_key())
    assert report.ok, report.problems
    assert (
        "run attempt 2: recomputed from its raw files and the 4 repetitions it carries to pass, "
        "every number as recorded" in report.notes
    )
    members = layout.read_zip(data)
    carried = "runs/attempt-2/carried/attempt-1/"
    records = layout.load_json_member(members, carried + "measurements.json")
    assert sorted({row["repetition"] for row in records}) == [1, 2, 3, 4]
    result = carried + "files/offload-c8-r3/result.json"
    assert layout.sha256_hex(members[result]) == next(
        row["raw_sha256"] for row in records if (row["arm"], row["repetition"]) == ("offload", 3)
    )
    assert layout.load_json_member(members, carried + "run.json")["decision"]["verdict"] == (
        "inconclusive"
    )

    def slower_carried_offload(m):  # the carried repetition 3 made to look worse
        raw = json.loads(m[result])
        raw["median_ttft_ms"] = 1020.0
        m[result] = json.dumps(raw).encode()

    problems = problems_of(resealed(data, slower_carried_offload))
    where = carried + "measurements.json[5]"
    assert f"{where}.raw_sha256: is not the SHA-256 of files/offload-c8-r3/result.json" in problems
    assert f"{where}.metrics.ttft_ms.median: recorded 751.9, recomputed 1020.0" in problems
    assert (
        "decision/decision.json result.clauses[0].pairs[2].a: recorded 751.9, recomputed 1020.0"
        in problems
    )

    def one_carried_repetition_dropped(m):
        edited_json(m, carried + "measurements.json", lambda rows: [rows.pop(), rows.pop()])

    problems = problems_of(resealed(data, one_carried_repetition_dropped))
    assert (
        "decision/context.json carried_repetitions: 4, the bundle carries 3 repetition(s) under "
        "runs/attempt-2/carried/" in problems
    )


def test_a_carrying_decision_sealed_before_bundles_held_carried_files_is_named_not_recomputed(
    api, actor, vendor_viewer, engagement, host
):
    decision = g3_carrying_decision(api, actor, vendor_viewer, engagement, host)
    snapshot = {"versions": {**software_versions(), "host_tools": {}}, "soak_windows": True}
    seal_create(decision, snapshot)  # as an older server sealed it: no "carried" in its snapshot
    data, _ = bundle_for_decision(decision)
    assert not any("/carried/" in name for name in layout.read_zip(data))
    report = verify_bundle(data, public_key=server_key())
    assert report.ok, report.problems
    assert any(
        note.startswith("run attempt 2: carries 4 repetitions from an earlier attempt")
        and "NOT recomputed" in note
        for note in report.notes
    )


# The carried set proven from one bundle: the source attempt's records by digest, its set-aside
# repetitions and every carried attempt's profile digest.

CARRIED = "runs/attempt-2/carried/attempt-1/"


@pytest.fixture
def carried_bundle(api, actor, vendor_viewer, engagement, host) -> bytes:
    decision = g3_carrying_decision(api, actor, vendor_viewer, engagement, host, on_host=True)
    assert decision.verdict == "pass"
    return bundle_for_decision(decision)[0]


def test_a_carrying_bundle_proves_its_carried_set_and_its_profile(carried_bundle, host):
    report = verify_bundle(carried_bundle, public_key=server_key())
    assert report.ok, report.problems
    run = host.runs.filter(gate__kind="G3").get(attempt=2)
    digest = run.profile_digest
    assert (
        digest == host.runs.filter(gate__kind="G3").get(attempt=1).profile_digest
        and len(digest) == 64
    )
    assert (
        "run attempt 2: carries exactly attempt 1's complete repetitions, each record as it "
        f"recorded, all on profile vllm ({digest[:12]})" in report.notes
    )
    members = layout.read_zip(carried_bundle)
    profile = layout.load_json_member(members, "runs/attempt-2/run.json")["profile"]
    assert profile == {"name": "vllm", "digest": digest, "snapshot": run.profile_snapshot}
    source = layout.load_json_member(members, "runs/attempt-2/" + layout.CARRIED_SOURCE)
    assert source["attempt"] == 1 and source["decision"]["set_aside"] == []
    assert sorted({row["repetition"] for row in source["records"]}) == [1, 2, 3, 4]


def test_a_carried_repetition_left_out_is_named_even_with_the_count_made_to_match(
    carried_bundle,
):
    def fourth_dropped(members):
        edited_json(
            members,
            CARRIED + "measurements.json",
            lambda rows: rows.__setitem__(slice(None), [r for r in rows if r["repetition"] != 4]),
        )
        for name in [n for n in members if n.startswith(CARRIED + "files/") and "-r4/" in n]:
            del members[name]
        edited_json(members, layout.CONTEXT, lambda c: c.update(carried_repetitions=3))

    problems = problems_of(resealed(carried_bundle, fourth_dropped))
    assert (
        "carried-source.json (attempt 1): repetition(s) [4] are complete (every cell measured, "
        "none set aside) but not carried" in problems
    )


def test_a_carried_record_changed_with_its_raw_file_is_not_the_source_attempts_record(
    carried_bundle,
):
    result = CARRIED + "files/offload-c8-r3/result.json"

    def slower(members):  # the record, its raw file and the file's digest changed together
        raw = json.loads(members[result])
        raw["median_ttft_ms"] = 1020.0
        members[result] = json.dumps(raw).encode()

        def edit(rows):
            row = next(r for r in rows if (r["arm"], r["repetition"]) == ("offload", 3))
            row["metrics"]["ttft_ms"]["median"] = 1020.0
            row["raw_sha256"] = layout.sha256_hex(members[result])

        edited_json(members, CARRIED + "measurements.json", edit)

    problems = problems_of(resealed(carried_bundle, slower))
    assert any(
        p.startswith(
            f"{CARRIED}measurements.json[5]: not the record attempt 1 holds for "
            "repetition 3, offload at c=8"
        )
        for p in problems
    ), problems
    assert not any("raw_sha256: is not the SHA-256" in p for p in problems)


def test_a_carried_attempt_on_another_profile_digest_is_named(carried_bundle):
    def other_profile(members):
        edited_json(members, CARRIED + "run.json", lambda r: r["profile"].update(digest="ab" * 32))

    problems = problems_of(resealed(carried_bundle, other_profile))
    assert any(
        p.startswith(f"{CARRIED}run.json profile digest: abababababab, the carrying run's is ")
        for p in problems
    ), problems


def test_a_carrying_bundle_sealed_before_runs_kept_profiles_is_named_not_proven(
    api, actor, vendor_viewer, engagement, host
):
    decision = g3_carrying_decision(api, actor, vendor_viewer, engagement, host, on_host=True)
    versions = {**software_versions(), "host_tools": {}}
    seal_create(decision, {"versions": versions, "soak_windows": True, "carried": True})
    report = verify_bundle(bundle_for_decision(decision)[0], public_key=server_key())
    assert report.ok, report.problems
    assert (
        "run attempt 2: sealed before bundles held the carried attempt's records and the runs' "
        "profiles: the carried set is NOT proven complete" in report.notes
    )
