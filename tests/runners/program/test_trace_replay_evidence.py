"""A G3 on the customer's trace, its cells read by the run's own replay code from the real CPU
vLLM's captured timed-trace replay (tests/fixtures/vllm-bench-trace/, no server started here;
each cell's TTFTs scaled, so that no two cells are one duplicated file) and decided by the
engine: its bundle verifies with every replayed cell's fidelity recomputed
from the records and the replay's plan; a stored fidelity edited, or records edited so the
replay misses its arrival bar, fail naming the cell. The bundle's own tests are in
tests/gates/evidence/; this one sits beside the replay's (that folder is full)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates import services
from gates.evidence import bundle_for_decision, layout
from gates.evidence.verify import verify_bundle
from gates.models import Decision
from gates.specs.validation import default_spec
from gates.tenancy import viewer_for_user
from runners import results
from runners.adapters.vllm_trace_records import parse_vllm_trace_records, records_lines
from runners.program.replay import replay_cell, replay_step
from runners.stepcontext import StepContext
from runners.transport import LocalTransport
from tests.contract import sign_as_both
from tests.gates.evidence.helpers import edited_json, resealed
from tests.gates.evidence.test_bundles import server_key
from tests.gates.services.test_uploads import METRICS, OFFLOAD_ON, api, pass_gate, upload_run
from tests.runners.program.test_vllm_trace_replay import FIXTURES, TIER, TRACE, WORKLOAD, profile

pytestmark = pytest.mark.django_db
__all__ = ["api"]
CAPTURE = (FIXTURES / "mooncake-slice_v0.32.0_cpu.json").read_bytes()
ARMS = ("baseline", "offload")
REPETITIONS = (1, 2, 3, 4)
PREFIX = "runs/attempt-1/"


def replay_gate(actor, viewer, engagement, host):
    for kind in ("G1", "G2"):
        pass_gate(actor, viewer, engagement, kind, host)
    services.trace_upload(
        actor=actor,
        viewer=viewer_for_user(actor.user),
        engagement=engagement,
        name="mooncake-slice.jsonl",
        content=TRACE,
        trace_format="mooncake",
        block_tokens=16,
    )
    gate = engagement.gates.get(kind="G3")
    document = default_spec("G3")
    document.update(tiers=[TIER], repetitions={"min": 4, "max": 4}, workload=dict(WORKLOAD))
    document["arms"] = {"baseline": "resident", "offload": "offload"}
    document["clauses"] = [
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 25,
            "tiers": "all",
        }
    ]
    document["validity"].update(require_kv_exceeds_vram=False, min_external_hit_rate=0)
    document["statistics"]["require_power"] = False
    for rule in ("sd_floor_fraction", "spread_level"):
        document["statistics"].pop(rule, None)
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    return gate


def step_context(tmp_path: Path) -> StepContext:
    (tmp_path / "scratch").mkdir()
    (tmp_path / "host").mkdir()
    vllm = profile("vllm")
    return StepContext(
        transport=LocalTransport(),
        commands=vllm["commands"],
        values={**vllm["parameters"], "model": "tiny-llama", "model_path": "/m"},
        run_dir=str(tmp_path / "host"),
        token="run-1",
        scratch=tmp_path / "scratch",
        trace_source={WORKLOAD["trace"]["sha256"]: TRACE}.__getitem__,
    )


def scaled_capture(arm: str, repetition: int) -> bytes:
    """The capture with its TTFTs scaled (offload faster, a little drift per repetition), the
    send times and token counts untouched: the replay stays as faithful as captured."""
    factor = (0.6 if arm == "offload" else 1.0) * (1 + 0.02 * repetition)
    document = json.loads(CAPTURE)
    for i, ttft in enumerate(document["ttfts"]):
        if ttft:
            document["latencies"][i] += ttft * (factor - 1)
            document["ttfts"][i] = ttft * factor
    return json.dumps(document).encode()


def replayed_cell(ctx: StepContext, arm: str, repetition: int) -> results.Proof:
    """One cell as the run's bench step reads it: the captured detailed result, the plan the
    replay step uploaded, and real /metrics scrapes around it (the server facts)."""
    cell = results.Cell(arm, TIER, repetition)
    label = "on" if arm == "offload" else "None"
    texts = {
        moment: METRICS[name].replace(b'kv_offloading_size="None"', OFFLOAD_ON)
        if label == "on"
        else METRICS[name]
        for moment, name in (("before", "idle"), ("after", "loaded_128conc"))
    }
    scraped = {
        moment: results.metrics_scrape(text, cell=cell, moment=moment, source=moment)
        for moment, text in texts.items()
    }
    server = results.server_facts(scraped["before"][0], scraped["after"][0])
    run_dir = Path(ctx.run_dir, cell.label)
    run_dir.mkdir()
    (run_dir / "result.json").write_bytes(scaled_capture(arm, repetition))
    step = {"name": f"r{repetition}-{arm}: bench", "kind": "bench", "arm": arm, "tier": TIER}
    step.update(repetition=repetition, workload=WORKLOAD)
    measurement, artifacts = replay_cell(ctx, step, str(run_dir), server)
    kept = [scraped["before"][1], scraped["after"][1]]
    return results.Proof([*artifacts, *kept], measurement=measurement)


@pytest.fixture
def replay_decision(actor, vendor_viewer, engagement, host, api, tmp_path) -> Decision:
    gate = replay_gate(actor, vendor_viewer, engagement, host)
    run = gate.runs.get(pk=upload_run(api, gate)["id"])
    ctx = step_context(tmp_path)
    step = {"name": "replay", "kind": "replay", "replays": [{"workload": WORKLOAD, "tier": TIER}]}
    plan = replay_step(step, {}, ctx)
    record = {"actor": actor, "viewer": vendor_viewer, "run": run}
    services.run_upload_record(**record, name="replay plan", proof=results.Proof(plan.artifacts))
    for repetition in REPETITIONS:
        for arm in ARMS:
            proof = replayed_cell(ctx, arm, repetition)
            services.run_upload_record(**record, name=f"{arm} r{repetition}", proof=proof)
    services.run_upload_decide(actor=actor, viewer=vendor_viewer, run=run)
    return gate.decisions.get()


@pytest.fixture
def replay_bundle(replay_decision) -> bytes:
    return bundle_for_decision(replay_decision)[0]


def problems_of(data: bytes) -> list[str]:
    return verify_bundle(data, public_key=server_key()).problems


def test_a_replayed_g3s_bundle_verifies_with_each_cells_fidelity_recomputed(
    replay_decision, replay_bundle
):
    fidelity = replay_decision.result["replay_fidelity"]
    assert len(fidelity["cells"]) == 8 and fidelity["reasons"] == []
    assert all(cell["valid"] for cell in fidelity["cells"])
    assert replay_decision.verdict != "invalid", replay_decision.result["reasons"]
    report = verify_bundle(replay_bundle, public_key=server_key())
    assert report.ok, report.problems
    assert any("recomputed from its raw files" in note for note in report.notes)


def test_a_stored_fidelity_edited_fails_naming_the_cell_and_the_field(replay_bundle):
    def hid_a_late_arrival(members):
        def edit(rows):
            fidelity = rows[1]["metrics"]["replay"]["fidelity"]
            fidelity["arrival_error_ms"]["p99"] = 1.0

        edited_json(members, PREFIX + "measurements.json", edit)

    problems = problems_of(resealed(replay_bundle, hid_a_late_arrival))
    cell = "replay cell offload c=1 r1 (runs/attempt-1/measurements.json[1].metrics.replay)"
    assert any(
        p.startswith(f"{cell}.fidelity.arrival_error_ms.p99: recorded 1.0") for p in problems
    )


RECORDS = PREFIX + "files/baseline-c1-r2/records.jsonl"
RESULT = PREFIX + "files/baseline-c1-r2/result.json"


def test_records_edited_apart_from_vllms_result_they_came_from_are_named(replay_bundle):
    def one_record_sooner(members):
        rows = [json.loads(line) for line in members[RECORDS].splitlines()]
        rows[-1]["sent_s"] -= 0.001
        members[RECORDS] = b"".join(json.dumps(row).encode() + b"\n" for row in rows)

    problems = problems_of(resealed(replay_bundle, one_record_sooner))
    assert any(
        "records.jsonl: is not the records files/baseline-c1-r2/result.json" in p for p in problems
    ), problems


def test_records_edited_past_the_arrival_bar_fail_and_the_run_is_recomputed_invalid(
    replay_bundle,
):
    def late_by_a_second(members):
        """vLLM's start times and the records read from them, every request after the first a
        second late, with the measurement's hash to match: only recomputing can tell."""
        document = json.loads(members[RESULT])
        document["start_times"][1:] = [at + 1.0 for at in document["start_times"][1:]]
        members[RESULT] = json.dumps(document).encode()
        measured = [json.loads(line)["measured"] for line in members[RECORDS].splitlines()]
        records = parse_vllm_trace_records(members[RESULT])
        for record, flag in zip(records, measured, strict=True):
            record["measured"] = flag
        members[RECORDS] = records_lines(records)

        def edit(rows):
            rows[2]["raw_sha256"] = layout.sha256_hex(members[RECORDS])

        edited_json(members, PREFIX + "measurements.json", edit)

    problems = problems_of(resealed(replay_bundle, late_by_a_second))
    cell = "replay cell baseline c=1 r2 (runs/attempt-1/measurements.json[2].metrics.replay)"
    assert f"{cell}.fidelity.valid: recorded True, recomputed False" in problems, problems
    verdict = [p for p in problems if p.startswith("decision/decision.json verdict")]
    assert verdict and verdict[0].endswith("recomputed 'invalid'"), problems
