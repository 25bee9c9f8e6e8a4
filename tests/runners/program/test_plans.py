from __future__ import annotations

from gates.specs import validation as specs
from runners.program import sequence
from tests.simhosts import g2_spec, g3_spec


def benches(steps):
    return [s for s in steps if s["kind"] == "bench"]


def test_g1_prepares_the_host_then_runs_every_probe_of_the_profile():
    steps = sequence.plan_run(specs.default_spec("G1"), ["gpu_nvidia", "meminfo", "kernel"])
    assert [s["kind"] for s in steps] == ["prepare", "probe", "probe", "probe"]
    assert [s.get("probe") for s in steps[1:]] == ["gpu_nvidia", "meminfo", "kernel"]


def test_every_step_name_is_unique():
    for document in (specs.default_spec("G2"), specs.default_spec("G3"), g2_spec(), g3_spec()):
        steps = sequence.plan_run(document, [])
        assert len({s["name"] for s in steps}) == len(steps)


def test_g3_interleaves_the_arms_and_reverses_every_other_repetition():
    document = specs.default_spec("G3")
    order = [s["arm"] for s in sequence.plan_run(document, []) if s["kind"] == "serve"]
    first_look = document["repetitions"]["min"]  # the run plans up to its first look
    pair = ["baseline", "offload", "recompute", "recompute", "offload", "baseline"]
    assert first_look % 2 == 0 and order == pair * (first_look // 2)


def test_each_session_runs_every_tier_once_after_a_warm_up():
    document = specs.default_spec("G3")
    steps = sequence.plan_g3_repetitions(document, first=1, count=1)
    session = steps[: steps.index(next(s for s in steps if s["kind"] == "stop")) + 1]
    assert [s["kind"] for s in session] == ["serve", "warmup", "bench", "bench", "bench", "stop"]
    assert sorted(s["tier"] for s in benches(session)) == document["tiers"]


def test_the_tier_order_is_shuffled_reproducibly_from_the_seed():
    document = specs.default_spec("G3")
    orders = {
        tuple(sequence.shuffled_tiers(document, r, arm))
        for r in range(1, 6)
        for arm in ("baseline", "offload")
    }
    assert len(orders) > 1
    assert sequence.shuffled_tiers(document, 3, "offload") == sequence.shuffled_tiers(
        document, 3, "offload"
    )
    document["workload"]["seed"] += 1
    changed = {tuple(sequence.shuffled_tiers(document, r, "baseline")) for r in range(1, 6)}
    assert changed != {
        tuple(sequence.shuffled_tiers(specs.default_spec("G3"), r, "baseline")) for r in range(1, 6)
    }


def test_arms_of_one_cell_get_the_same_prompts_and_cells_differ():
    steps = benches(sequence.plan_run(specs.default_spec("G3"), []))
    seeds = {}
    for step in steps:
        seeds.setdefault((step["tier"], step["repetition"]), set()).add(step["seed"])
    assert all(len(found) == 1 for found in seeds.values())
    assert len({next(iter(found)) for found in seeds.values()}) == len(seeds)


def test_more_repetitions_continue_the_numbering():
    document = specs.default_spec("G3")
    first_look = document["repetitions"]["min"]
    extra = sequence.plan_g3_repetitions(document, first=first_look + 1, count=2)
    assert {s["repetition"] for s in benches(extra)} == {first_look + 1, first_look + 2}
    planned = benches(sequence.plan_run(document, []) + extra)
    assert {s["repetition"] for s in planned} == set(range(1, first_look + 3))


def test_every_gate_kind_has_a_program_and_g4_hands_its_run_to_the_soak_agent():
    assert all(sequence.has_program(kind) for kind in ("G1", "G2", "G3", "G4"))
    assert not sequence.has_program("G5")
    document = specs.default_spec("G4")
    steps = sequence.plan_run(document, [])
    assert [step["kind"] for step in steps] == ["prepare", "soak"]
    assert steps[1]["spec"] == document


def test_g2_runs_each_aa_side_in_its_own_session_with_the_same_prompts():
    document = g2_spec()
    steps = sequence.plan_run(document, [])
    aa = [s for s in benches(steps) if s["purpose"] == "aa"]
    assert len(aa) == 2 * document["noise_floor"]["repetitions"]
    for repetition in range(1, document["noise_floor"]["repetitions"] + 1):
        sides = [s for s in aa if s["repetition"] == repetition]
        assert {s["arm"] for s in sides} == {"aa_a", "aa_b"}
        assert len({s["seed"] for s in sides}) == 1
    serve = [s for s in steps if s["kind"] == "serve"]
    assert len(serve) == 2 + len(aa)
    assert [s["kind"] for s in steps].count("complete") == 2
