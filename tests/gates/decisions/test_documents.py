"""The typed decision (documents.decision) says what the engines really return: every key a result
carries is declared, every required key is there, and every value has its declared type, across
the verdicts and the odd paths (not evaluated, before the first look, an unfinished soak)."""

from __future__ import annotations

import types
import typing
from typing import Any

import numpy as np
import pytest

from documents import decision as documents
from gates.decisions import decide_g1, decide_g2, decide_g3, decide_g4, stop_loss_review
from gates.decisions.statistics.operating import operating_characteristic
from gates.specs.validation import default_spec
from tests.gates.decisions.g4.test_g4 import g4_spec, soak
from tests.gates.decisions.test_g1 import facts, g1_spec
from tests.gates.decisions.test_g2 import aa_pairs, g2_spec, observed, run
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, measurement, paired


def mismatches(value: Any, hint: Any, where: str = "result") -> list[str]:
    """Every place where a JSON value is not of the type `hint` says."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return []
    if typing.is_typeddict(hint):
        return _typed_dict_mismatches(value, hint, where)
    if origin in (typing.Union, types.UnionType):
        found = [mismatches(value, arg, where) for arg in args]
        return [] if any(not problems for problems in found) else [f"{where}: {value!r} ~ {hint}"]
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [
            p for i, item in enumerate(value) for p in mismatches(item, args[0], f"{where}[{i}]")
        ]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [
            p for key, item in value.items() for p in mismatches(item, args[1], f"{where}.{key}")
        ]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not an integer"]
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    return [] if type(value) is hint else [f"{where}: {value!r} is not {hint.__name__}"]


def _typed_dict_mismatches(value: Any, typed: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    declared = typed.__required_keys__ | typed.__optional_keys__
    problems = [f"{where}.{key}: not declared" for key in set(value) - declared]
    problems += [f"{where}.{key}: missing" for key in typed.__required_keys__ - set(value)]
    hints = typing.get_type_hints(typed)
    return problems + [
        found
        for key in declared & set(value)
        for found in mismatches(value[key], hints[key], f"{where}.{key}")
    ]


def g3_results() -> list[dict]:
    offload_arm_missing = {**CONTEXT, "unavailable_arms": {"offload": "needs a GPU"}}
    two_tiers = g3_spec(tiers=[8, 16], statistics={"pool_tiers": True, "attempts": 2})
    bands = [{"tier": 8, "band": [0.1, 0.3]}, {"tier": 16, "missing": "no saved KV plan"}]
    replay_bands = {**CONTEXT, "replay_external_bands": bands}
    return [
        decide_g3(g3_spec(), paired([0.6] * 4), CONTEXT),  # pass at the first look
        decide_g3(g3_spec(), paired([0.95] * 4), CONTEXT),  # fail
        decide_g3(g3_spec(), paired([0.6, 0.9, 0.7, 0.8]), CONTEXT),  # open: run more
        decide_g3(g3_spec(), paired([0.6, 0.62]), CONTEXT),  # before the first look
        decide_g3(g3_spec(), paired([0.6] * 4), {"kv_exceeds_vram": False}),  # invalid
        decide_g3(g3_spec(), paired([0.6] * 4), offload_arm_missing),  # not evaluated
        decide_g3(g3_spec(), paired([0.6] * 4), {**CONTEXT, "attempt": 2}),  # budget spent
        decide_g3(two_tiers, paired([0.6] * 4) + paired([0.6] * 4, tier=16), CONTEXT),
        decide_g3(g3_spec(), [measurement("baseline", 1, 1000.0)], CONTEXT),  # a lone arm
        # A replayed trace: one tier's offload cell against its band, the other's band missing.
        decide_g3(two_tiers, paired([0.6] * 4) + paired([0.6] * 4, tier=16), replay_bands),
    ]


def with_hit_rates(windows: list[dict], stop_after: int | None = None) -> list[dict]:
    return [
        {**window, "external_hit_rate": 0.0 if stop_after and i >= stop_after else 0.4}
        for i, window in enumerate(windows)
    ]


def g4_results() -> list[dict]:
    return [
        decide_g4(g4_spec(), with_hit_rates(soak())),
        decide_g4(g4_spec(), with_hit_rates(soak(), stop_after=400)),
        decide_g4(g4_spec(), soak()),
        decide_g4(g4_spec(), soak(crashed=(5,), failed=50, leak_mib_per_h=500.0)),
        decide_g4(g4_spec(), soak(count=100)),  # unfinished
        decide_g4(g4_spec(), soak(throughput=lambda i: np.where(i < 200, 1.0, 0.7))),
        decide_g4(g4_spec(), []),
    ]


RESULTS = [
    *[(result, documents.G3Decision) for result in g3_results()],
    *[(result, documents.G4Decision) for result in g4_results()],
    (decide_g1(g1_spec(), facts()), documents.G1Decision),
    (decide_g1(g1_spec(), facts(gpu_inventory=None, kernel=None)), documents.G1Decision),
    (decide_g1(g1_spec(gpu_count=4), {}), documents.G1Decision),
    (decide_g2(g2_spec(), observed()), documents.G2Decision),
    (decide_g2(g2_spec(), observed(aa_pairs=aa_pairs([1.3, 0.7]))), documents.G2Decision),
    (decide_g2(g2_spec(confidence=0.95), {}), documents.G2Decision),
    *[
        (decide_g2(g2_spec(), observed(external_hit_rate=rate), context), documents.G2Decision)
        for rate in (0.1, 0.4, 0.9, None)
        for context in (
            {"replay_external_band": {"tier": 8, "band": [0.3, 0.5]}},
            {"replay_external_band": {"tier": 8, "missing": "no saved KV plan"}},
        )
    ],
    (
        decide_g2(g2_spec(), observed(aa_pairs=[{"a": run(900.0, 0), "b": run(1000.0)}])),
        documents.G2Decision,
    ),
]


@pytest.mark.parametrize(("result", "typed"), RESULTS)
def test_a_decision_is_what_its_typed_document_says(result, typed):
    assert mismatches(result, typed) == []


def test_the_scenarios_reach_every_verdict_and_the_odd_cells():
    verdicts = {result["verdict"] for result, _ in RESULTS}
    assert verdicts >= {"pass", "fail", "inconclusive", "invalid"}
    cells = [cell for result in g3_results() for cell in result["clauses"]]
    assert any(cell.get("not_evaluated") for cell in cells)
    assert any(cell["look"] is None and not cell.get("not_evaluated") for cell in cells)
    assert any("sd_pooled_over" in cell["log_ratio"] for cell in cells)
    checks = {row["check"] for result in g4_results() for row in result["clauses"]}
    assert "offload_hits" in checks


def test_an_operating_characteristic_is_what_its_typed_document_says():
    found = operating_characteristic(default_spec("G3"), gates=200)
    assert mismatches(found, documents.OperatingCharacteristic) == []
    spec = default_spec("G3")
    del spec["statistics"]["noise_cv_pct"]
    assert mismatches(operating_characteristic(spec), documents.NoCharacteristic) == []


def test_a_stop_loss_review_is_what_its_typed_document_says():
    assert mismatches(stop_loss_review(["fail", "pass"], 2), documents.StopLossReview) == []


def test_the_checker_finds_a_wrong_key_and_a_wrong_type():
    result = decide_g1(g1_spec(), facts())
    assert mismatches({**result, "extra": 1}, documents.G1Decision) == [
        "result.extra: not declared"
    ]
    result["clauses"][0]["ok"] = "yes"
    assert mismatches(result, documents.G1Decision)
