"""Spec changes in the clause's own terms (pure): each kind's fields by name and unit, the arrow
from before to after, sections and clauses added or removed, the dotted path kept."""

from __future__ import annotations

import copy
import re

import pytest

from gates import figures
from gates.specs.diff import spec_changes
from gates.specs.fields import DESCRIPTIONS
from gates.specs.validation import default_spec
from gates.specs.words import NAMES, changes_lines, metric_name, spec_change_words


def changed(kind: str, edit) -> list[str]:
    before = default_spec(kind)
    after = copy.deepcopy(before)
    edit(after)
    return [str(words) for words in spec_change_words(before, after)]


def test_every_field_fields_py_describes_has_a_short_name():
    assert sorted(set(DESCRIPTIONS) - set(NAMES)) == []
    assert sorted(set(NAMES) - set(DESCRIPTIONS)) == []


def test_g1_expectations_read_with_their_units_and_null_as_not_checked():
    def edit(spec):
        spec["expect"]["gpu_count"] = 4
        spec["expect"]["gpu_memory_min_gib"] = None
        spec["expect"]["free_disk_min_gib"] = 2048

    before = default_spec("G1")["expect"]
    assert changed("G1", edit) == [
        f"Free disk, at least: {figures.gib(before['free_disk_min_gib'])} → 2 TiB",
        f"GPUs on the host, exactly: {before['gpu_count']} GPUs → 4 GPUs",
        "Memory of the smallest GPU, at least: "
        f"{figures.gib(before['gpu_memory_min_gib'])} → not checked",
    ]


def test_g2_checks_read_as_shares_percents_metrics_and_workload_fields():
    def edit(spec):
        spec["noise_floor"]["max_noise_pct"] = 8
        spec["noise_floor"]["metric"] = "ttft_p99"
        spec["offload_hit"]["min_external_hit_rate"] = 0.25
        spec["offload_hit"]["workload"]["num_prompts"] = 1

    lines = changed("G2", edit)
    assert "A/A noise, at most: 10 % → 8 %" in lines
    assert any(re.fullmatch(r"A/A metric: TTFT p\d+ → TTFT p99", line) for line in lines)
    assert any(
        re.fullmatch(r"Offload tier hit rate, at least: \S+ % → 25 %", line) for line in lines
    )
    assert any(
        re.fullmatch(r"Hit check workload, requests per bench: \S+ requests → 1 request", line)
        for line in lines
    )


def test_a_g3_clause_reads_in_its_own_metric_change_and_tiers():
    def edit(spec):
        spec["clauses"][1]["at_least_pct"] = 25  # output throughput gain at c=8, was 29
        spec["clauses"][0]["tiers"] = [8, 16]  # TTFT p50 reduction, was every tier
        spec["clauses"][3]["at_least"] = 9  # TTFT p50 ratio recompute vs offload, was 8.6

    lines = changed("G3", edit)
    assert lines == [
        "TTFT p50 reduction at every tier, tiers: every tier → c=8, 16",
        "output throughput gain at c=8, at least: 29 % → 25 %",
        "TTFT p50 ratio, recompute vs offload, at every tier, at least: 8.6x → 9x",
    ]


def test_a_clause_whose_own_terms_change_is_named_as_the_older_version_has_it():
    lines = changed("G3", lambda spec: spec["clauses"][0].update(metric="ttft_p99"))
    assert lines == ["TTFT p50 reduction at every tier, metric: TTFT p50 → TTFT p99"]


def test_the_arrow_runs_from_the_older_version_to_the_newer():
    before, after = default_spec("G4"), default_spec("G4")
    after["duration_h"] = before["duration_h"] + 24
    forward = spec_change_words(before, after)[0]
    backward = spec_change_words(after, before)[0]
    assert forward.before == backward.after and forward.after == backward.before
    assert str(forward).endswith(f"{forward.before} → {forward.after}")
    assert forward.name == "Soak duration" and forward.after.endswith(" h")


def test_g4_limits_and_lengths_read_in_hours_minutes_and_mib_per_hour():
    def edit(spec):
        spec["duration_h"] = 96
        spec["window_min"] = 5
        spec["limits"]["max_memory_growth_mib_per_h"] = 32
        spec["limits"]["max_crashes"] = 1

    lines = changed("G4", edit)
    assert any(re.fullmatch(r"Soak duration: \S+ h → 96 h", line) for line in lines)
    assert any(re.fullmatch(r"Window length: \S+ min → 5 min", line) for line in lines)
    assert any(
        re.fullmatch(r"Memory growth, at most: \S+ MiB/h → 32 MiB/h", line) for line in lines
    )
    assert any(
        re.fullmatch(r"Crashed windows, at most: \d+ crash(es)? → 1 crash", line) for line in lines
    )


def test_a_section_added_or_removed_reads_field_by_field_and_a_clause_as_a_whole():
    before = default_spec("G3")
    after = copy.deepcopy(before)
    del after["statistics"]["outliers"]
    after["server"] = {"tensor_parallel_size": 4}
    after["clauses"].append(
        {
            "metric": "tpot_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 10,
            "tiers": [16],
        }
    )
    words = {w.field: w for w in spec_change_words(before, after)}
    assert str(words["server.tensor_parallel_size"]) == (
        "GPUs per server (tensor parallel): added, 4 GPUs"
    )
    assert str(words["clauses[4]"]) == "Clause 5: added, TPOT p50 reduction at c=16, at least 10 %"
    removed = words["statistics.outliers.max_reruns"]
    assert removed.kind == "removed"
    assert str(removed) == (
        f"Disturbed repetitions re-run, at most: removed (was "
        f"{before['statistics']['outliers']['max_reruns']} reruns)"
    )
    back = {w.field: w for w in spec_change_words(after, before)}
    assert str(back["clauses[4]"]).startswith("Clause 5: removed (was TPOT p50 reduction at c=16")


def test_the_dotted_path_is_kept_for_engineers_and_matches_the_diff():
    before, after = default_spec("G3"), default_spec("G3")
    after["clauses"][1]["at_least_pct"] = 25
    (words,) = spec_change_words(before, after)
    (change,) = spec_changes(before, after)
    assert words.field == change.field == "clauses[1].at_least_pct"


def test_an_unknown_field_reads_by_its_path_and_text_is_quoted_and_cut():
    before, after = default_spec("G2"), default_spec("G2")
    after["equivalence"]["prompts"] = ["Tell me about the sea " * 10]
    after["future_field"] = 3
    words = {w.field: str(w) for w in spec_change_words(before, after)}
    assert words["future_field"] == "future_field: added, 3"
    assert words["equivalence.prompts"].startswith("Equivalence prompts: ")
    assert words["equivalence.prompts"].endswith("“" + ("Tell me about the sea " * 3)[:60] + "…”")


def test_the_alert_text_lists_the_words_and_says_how_many_more():
    words = spec_change_words({"gate": "G4", "duration_h": 1}, {"gate": "G4", "duration_h": 2})
    assert changes_lines(words) == "- Soak duration: 1 h → 2 h"
    assert changes_lines(words * 3, limit=2).endswith("- ... and 1 more")
    assert changes_lines([]) == "- no field changed"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("ttft_p50", "TTFT p50"),
        ("e2el_mean", "end-to-end latency mean"),
        ("output_throughput", "output throughput"),
    ],
)
def test_metric_names_read_as_a_customer_says_them(name, words):
    assert metric_name(name) == words
