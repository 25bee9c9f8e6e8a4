"""The `vllm` profile, run for real against vLLM's CPU build serving a tiny random-weight Llama,
on this machine registered as a host behind a loopback sshd (`make test-vllm`).

G1 goes through the services and tasks as in production. G2's and G3's programs run step by
step through runners.program.perform with the profile's own commands, and their evidence through the
decision engine; the offload arm cannot run on a CPU (vLLM: native offload is "only supported on
CUDA-alike and XPU GPUs"), so its sessions are left out, said so, and its clauses not evaluated.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gates import services
from gates.decisions import decide_g2, decide_g3
from gates.models import Host, Profile
from gates.services import pokes
from gates.services.profiles import builtin_profile_documents
from runners.program.perform import StepContext, perform, wait_for_exit
from runners.program.sequence import plan_g3_repetitions
from runners.results import Artifact
from runners.transport import open_transport
from runners.workloads import spec_context_tokens
from tests.simhosts import free_port
from worker import tasks

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
VLLM = next(d for d in builtin_profile_documents() if d["name"] == "vllm")
NEEDS_A_GPU = "needs a GPU: vLLM's native offload runs only on CUDA-alike and XPU GPUs"
PROMPTS = [
    "Tollgate runs the joint test of a KV cache offloading tier",
    "The decision engine reads every measurement",
    "Each repetition runs one server session per arm",
]
# cold_recovery at one tier: 8 sessions of 480 + 32 tokens, 16 output tokens each, two
# repetitions (the pairs the engine's interval needs). Each bench is three `vllm bench serve`
# runs (seed, flush, timed) and each repetition two server starts: one tier keeps the test at a
# few minutes (several tiers on one server are the simhost G3 tests' work).
WORKLOAD = {
    "dataset": "cold_recovery",
    "prefix_len": 480,
    "suffix_len": 32,
    "output_len": 16,
    "num_prompts": 8,
    "seed": 7,
}
TIERS = [4]


def host_values(model: Path, tmp_path: Path) -> dict:
    return {
        "python": sys.executable,
        "model_path": str(model),
        "tensor_parallel_size": 1,
        "port": free_port(),
        "run_root": str(tmp_path / "runs"),
    }


@pytest.fixture
def vllm_host(customer_org, vllm_sshd, tiny_model, tmp_path) -> Host:
    host = Host.objects.create(
        organization=customer_org,
        name="cpu-vllm",
        transport=Host.Transport.SSH,
        address=vllm_sshd.address,
        port=vllm_sshd.port,
        username=vllm_sshd.username,
        host_key=vllm_sshd.host_key_line,
        host_key_fingerprint=services.host_key_fingerprint(vllm_sshd.host_key_line),
        profile=Profile.objects.get(name="vllm"),
        parameters=host_values(tiny_model, tmp_path),
    )
    services.host_set_credential(host=host, private_key=vllm_sshd.user_key_text)
    return host


@pytest.fixture
def step_context(vllm_sshd, tiny_model, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    values = {**VLLM["parameters"], "model": "tiny-llama", **host_values(tiny_model, tmp_path)}
    with open_transport(vllm_sshd.target()) as transport:
        yield lambda context_tokens: StepContext(
            transport=transport,
            commands=VLLM["commands"],
            values=values,
            run_dir=f"{values['run_root']}/run-real",
            token="run-real",
            scratch=scratch,
            serve_timeout_s=600,
            prompts=PROMPTS,
            max_tokens=16,
            context_tokens=context_tokens,
        )


def run_step(step: dict, ctx: StepContext, deadline_s: float = 900) -> dict:
    """Perform a step until done, as the driver does: merge details, wait on the host."""
    detail: dict = {}
    artifacts: list[Artifact] = []
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        progress = perform(step, detail, ctx)
        detail.update(progress.detail)
        artifacts += progress.artifacts
        if progress.done:
            return {**detail, "measurement": progress.measurement, "facts": progress.facts}
        if progress.waiting_on:
            wait_for_exit(ctx, progress.waiting_on, 5)
        else:
            time.sleep(1)  # a server starting: poll its health once a second, as the driver does
    raise AssertionError(f"{step['name']} did not finish within {deadline_s} s")


def test_g1_reads_the_real_vllm_version_through_the_services(
    actor, vendor_viewer, engagement, vllm_host, monkeypatch, settings
):
    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    gate = engagement.gates.get(kind="G1")
    document = {**gate.current_spec.document}
    document["expect"] = {**document["expect"], "vllm_min": "0.32.0"}
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=vllm_host)
    for _ in range(100):
        tasks.advance_run(run.pk)
        run.refresh_from_db()
        if run.is_ended:
            break
    assert run.outcome == "completed", run.log
    rows = {row["check"]: row for row in gate.decisions.first().clauses}
    vllm_row = next(row for name, row in rows.items() if "vllm" in name)
    assert vllm_row["ok"] is True and str(vllm_row["observed"]).startswith("0.32.0"), vllm_row


def test_g2_health_and_greedy_equivalence_resident_against_recompute(step_context):
    """Greedy decoding on the same weights: caching on or off must not change one token."""
    ctx = step_context(64 + 16)
    run_step({"name": "prepare host", "kind": "prepare"}, ctx)
    answers, health = {}, {}
    for arm in ("resident", "recompute"):
        session = {"arm": arm, "arm_kind": arm, "session": f"g2-{arm}"}
        serve = run_step({**session, "name": f"{arm}: start", "kind": "serve"}, ctx)
        health[arm] = serve["healthy_after_s"]
        try:
            done = run_step({**session, "name": f"{arm}: answers", "kind": "complete"}, ctx)
            answers[arm] = done["answers"]
        finally:
            run_step({**session, "name": f"{arm}: stop", "kind": "stop"}, ctx)
    observed = {
        "health": {"healthy": True, "seconds": health["resident"]},
        # The engine's compared side is named `offload`; on a CPU host it is the recompute arm.
        "equivalence": [
            {"prompt": i, "reference": answers["resident"][i], "offload": answers["recompute"][i]}
            for i in range(len(PROMPTS))
        ],
    }
    spec = {
        "gate": "G2",
        "version": 1,
        "health": {"timeout_s": 600},
        "equivalence": {"prompts": PROMPTS, "max_tokens": 16, "max_mismatch_pct": 0.0},
        "offload_hit": {"min_external_hit_rate": 0.2},
        "noise_floor": {"repetitions": 1, "metric": "ttft_p50", "max_noise_pct": 10.0},
    }
    rows = {row["check"]: row for row in decide_g2(spec, observed)["clauses"]}
    assert rows["health"]["verdict"] == "pass", rows["health"]
    assert rows["equivalence"]["verdict"] == "pass", rows["equivalence"]
    assert all(len(text) > 0 for text in answers["resident"])


def g3_spec() -> dict:
    return {
        "gate": "G3",
        "version": 1,
        "workload": dict(WORKLOAD),
        "arms": {"baseline": "resident", "offload": "offload", "recompute": "recompute"},
        "tiers": TIERS,
        "repetitions": {"min": 2, "max": 2},
        "confidence": 0.9,
        "clauses": [
            {
                "metric": "ttft_p50",
                "compare": "offload/baseline",
                "change": "reduction",
                "at_least_pct": 25,
                "tiers": "all",
            },
            {
                "metric": "ttft_p50",
                "compare": "recompute/baseline",
                "change": "ratio",
                "at_least": 1.0,
                "tiers": "all",
            },
        ],
        "validity": {
            "max_failed_pct": 1.0,
            "min_external_hit_rate": 0.2,
            "require_kv_exceeds_vram": False,
        },
        "stop_loss": {"max_attempts": 2},
    }


def test_g3_resident_and_recompute_cold_recovery_through_adapters_and_engine(step_context):
    spec = g3_spec()
    ctx = step_context(spec_context_tokens(spec))
    run_step({"name": "prepare host", "kind": "prepare"}, ctx)
    plan = plan_g3_repetitions(spec, first=1, count=2)
    skipped = [step for step in plan if step["arm"] == "offload"]
    measurements = []
    for step in plan:
        if step["arm"] == "offload":
            continue
        try:
            done = run_step(step, ctx)
        except BaseException:
            stop = {**step, "kind": "stop", "name": "stop after failure"}
            run_step(stop, ctx)
            raise
        if done.get("measurement"):
            measurements.append(done["measurement"])
    assert skipped and {step["kind"] for step in skipped} >= {"serve", "bench"}
    assert len(measurements) == 2 * len(TIERS) * 2  # arms x tiers x repetitions
    for item in measurements:
        metrics = item["metrics"]
        assert metrics["completed"] == WORKLOAD["num_prompts"] and metrics["failed"] == 0
        # Only the timed turns are in the result: the seed and flush phases are not.
        assert metrics["num_prompts"] == WORKLOAD["num_prompts"]
        tokens = metrics["total_input_tokens"] / metrics["completed"]
        assert abs(tokens - 512) <= 4, tokens
        assert item["server"]["prefix_caching"] is (item["arm"] == "baseline")
    result = decide_g3(spec, measurements, {"unavailable_arms": {"offload": NEEDS_A_GPU}})
    cells = {(cell["compare"], cell["tier"]): cell for cell in result["clauses"]}
    for tier in TIERS:
        offload = cells[("offload/baseline", tier)]
        assert offload["not_evaluated"] and NEEDS_A_GPU in offload["cause"]
        recompute = cells[("recompute/baseline", tier)]
        assert len(recompute["pairs"]) == 2 and recompute["verdict"] in (
            "pass",
            "fail",
            "inconclusive",
        )
    assert result["verdict"] != "pass"
    # A recompute cell that fails on real timings makes the gate fail, and the reasons list the
    # failures; undecided, the reasons name the arm that needs a GPU.
    if result["verdict"] == "inconclusive":
        assert any(NEEDS_A_GPU in reason for reason in result["reasons"])


def test_the_offload_arms_commands_pass_vllms_own_argument_parser(venv, tiny_model):
    """Both offload backends' `vllm serve` lines parse with vLLM 0.32's parser into engine args
    that turn the connector on (the engine itself needs a GPU to start)."""
    script = Path(__file__).with_name("vllm_args_check.py")
    for backend in ("native", "lmcache"):
        values = {
            **VLLM["parameters"],
            "model": "tiny-llama",
            "model_path": str(tiny_model),
            "tensor_parallel_size": 1,
            "max_model_len": 1024,
            "offload_backend": backend,
        }
        from runners.commands import fill

        argv = fill(VLLM["commands"]["serve"]["offload"], values)
        result = subprocess.run(
            [str(venv / "bin" / "python"), str(script), *argv[2:]],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"kv_offloading_backend={backend}" in result.stdout, result.stdout


# The vLLM-engine profiles whose offload tier is another vendor's connector: what each offload
# line must make vLLM read (its connector, and whether vLLM ships it or imports it from a path).
CONNECTOR_PROFILES = {
    "vllm-mooncake": ("MooncakeStoreConnector", True, None),
    "vllm-kvbm": ("DynamoConnector", False, "kvbm.vllm_integration.connector"),
}


def vllm_serve_words(argv: list[str]) -> list[str]:
    """The words after `vllm serve` of a profile's line (an `env VAR=value ...` prefix skipped)."""
    start = argv.index("vllm")
    assert argv[start + 1] == "serve", argv
    return argv[start + 2 :]


def parsed_by_vllm(venv: Path, argv: list[str]) -> dict[str, str]:
    script = Path(__file__).with_name("vllm_args_check.py")
    result = subprocess.run(
        [str(venv / "bin" / "python"), str(script), *vllm_serve_words(argv)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


@pytest.mark.parametrize("name", sorted(CONNECTOR_PROFILES))
def test_the_connector_profiles_lines_pass_vllms_parser_naming_a_connector_it_can_load(
    venv, tiny_model, name
):
    """vllm-mooncake's and vllm-kvbm's three arms parse with vLLM's own parser; the offload arm's
    --kv-transfer-config names a connector vLLM registers (Mooncake's store) or the module it
    loads one from (KVBM ships its own), and the baselines carry no connector at all."""
    from runners.commands import fill

    profile = next(d for d in builtin_profile_documents() if d["name"] == name)
    values = {
        **profile["parameters"],
        "model": "tiny-llama",
        "model_path": str(tiny_model),
        "tensor_parallel_size": 1,
        "max_model_len": 1024,
        "mooncake_config_path": "/etc/mooncake/store.json",
    }
    connector, shipped, module_path = CONNECTOR_PROFILES[name]
    offload = parsed_by_vllm(venv, fill(profile["commands"]["serve"]["offload"], values))
    assert offload["kv_connector"] == connector, offload
    assert offload["kv_connector_registered"] == str(shipped), offload
    assert offload["kv_connector_module_path"] == str(module_path), offload
    assert offload["kv_role"] == "kv_both" and offload["prefix_caching"] == "True"
    for arm, caching in (("resident", "True"), ("recompute", "False")):
        baseline = parsed_by_vllm(venv, fill(profile["commands"]["serve"][arm], values))
        assert baseline["kv_connector"] == "None", (arm, baseline)
        assert baseline["prefix_caching"] == caching, (arm, baseline)
