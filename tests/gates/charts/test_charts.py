"""The gate figures: forest plot rows, intervals and colours agree with the engine's result;
measurements, A/A and hit-rate figures plot the numbers given; broken numbers never crash."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates import figures
from gates.charts import g2 as charts_g2
from gates.charts import g3 as charts
from gates.charts import style
from gates.decisions import decide_g2, decide_g3

TEMPLATES = Path(__file__).resolve().parents[3] / "gates" / "specs" / "templates"
ARM_SERVER = {
    "baseline": {"prefix_caching": True, "offload_enabled": False},
    "offload": {"prefix_caching": True, "offload_enabled": True},
    "recompute": {"prefix_caching": False, "offload_enabled": False},
}
# Shaped on the vendor's published field report (docs/simhost.md): TTFT -30 %, throughput
# +45 % at c=8 and +42 % at c=16 (just above its 40 % bar, so that cell stays inconclusive),
# recompute 12x offload's TTFT.
BASE_TTFT_MS = {4: 10_170.0, 8: 18_000.0, 16: 35_730.0}
TTFT_FACTOR = {"baseline": 1.0, "offload": 0.70, "recompute": 0.70 * 12}
THROUGHPUT = {
    "baseline": {4: 60.0, 8: 100.0, 16: 160.0},
    "offload": {4: 66.0, 8: 145.0, 16: 227.0},
    "recompute": {4: 4.0, 8: 4.1, 16: 4.1},
}
CONTEXT = {"kv_exceeds_vram": True}


def template(kind: str) -> dict:
    return json.loads((TEMPLATES / f"{kind}.json").read_text())


def synthetic_measurements(repetitions: int, seed: int = 0, noise: float = 0.05) -> list[dict]:
    """Three arms at c=4, 8, 16 per repetition with lognormal noise, as a G3 run records them."""
    rng = np.random.default_rng(seed)
    rows = []
    for repetition in range(1, repetitions + 1):
        for tier, base in BASE_TTFT_MS.items():
            for arm, factor in TTFT_FACTOR.items():
                jitter = np.exp(rng.normal(0.0, noise, size=3))
                metrics = {
                    "completed": 64,
                    "failed": 0,
                    "max_concurrency": tier,
                    "ttft_ms": {"median": base * factor * jitter[0], "p99": 3 * base * jitter[1]},
                    "output_throughput": THROUGHPUT[arm][tier] * jitter[2],
                }
                server = {**ARM_SERVER[arm], "peak_running": tier}
                server["external_hit_rate"] = 0.6 if arm == "offload" else None
                rows.append(
                    {
                        "arm": arm,
                        "tier": tier,
                        "repetition": repetition,
                        "metrics": {k: _plain(v) for k, v in metrics.items()},
                        "server": server,
                    }
                )
    return rows


def _plain(value):
    if isinstance(value, dict):
        return {key: float(number) for key, number in value.items()}
    return float(value) if isinstance(value, np.floating) else value


def g3_result(repetitions: int = 8, seed: int = 0) -> dict:
    return decide_g3(template("G3"), synthetic_measurements(repetitions, seed), CONTEXT)


def g2_rows(a_b: list[tuple[float, float]], hit_rate: float | None = 0.63) -> dict[str, dict]:
    def run(ttft: float) -> dict:
        return {"completed": 32, "failed": 0, "ttft_ms": {"median": ttft}}

    observed = {
        "health": {"healthy": True, "seconds": 40.0},
        "equivalence": [{"prompt": i, "reference": "x", "offload": "x"} for i in range(5)],
        "external_hit_rate": hit_rate,
        "aa_pairs": [
            {"repetition": i, "a": run(a), "b": run(b)} for i, (a, b) in enumerate(a_b, start=1)
        ],
    }
    result = decide_g2(template("G2"), observed)
    return {row["check"]: row for row in result["clauses"]}


def strict_json(figure: dict) -> dict:
    return json.loads(json.dumps(figure, allow_nan=False))


def estimate_traces(figure: dict) -> list[dict]:
    return [t for t in figure["data"] if t.get("legendgroup") in style.VERDICT_STYLES]


def titles(figure: dict) -> list[str]:
    """Panel titles as read: a long one is broken onto two lines where its bar is stated."""
    notes = figure["layout"].get("annotations", [])
    return [note["text"].replace(":<br>", ": ") for note in notes]


# --- the forest plot -----------------------------------------------------------------------


def test_every_clause_cell_is_one_point_with_the_engines_interval_around_it():
    result = g3_result()
    figure = strict_json(charts.forest_figure(result))
    points = {}
    for trace in estimate_traces(figure):
        errors = trace["error_x"]
        for x, y, plus, minus in zip(
            trace["x"], trace["y"], errors["array"], errors["arrayminus"], strict=True
        ):
            points[(trace["xaxis"], y)] = (x, x - minus, x + plus, trace["name"])
    assert len(points) == len(result["clauses"]) == 8
    axes = {}
    for cell in result["clauses"]:
        axis = axes.setdefault(cell["clause"], f"x{len(axes) + 1}".replace("x1", "x"))
        x, low, high, verdict = points[(axis, f"c={cell['tier']}")]
        assert x == pytest.approx(cell["estimate"])
        assert (low, high) == (pytest.approx(cell["low"]), pytest.approx(cell["high"]))
        assert verdict == cell["verdict"]


def test_points_take_the_colour_and_shape_of_their_verdict():
    result = g3_result()
    verdicts = ["pass", "fail", "inconclusive", "invalid"]
    for cell, verdict in zip(result["clauses"], verdicts * 2, strict=True):
        cell["verdict"] = verdict
    traces = estimate_traces(charts.forest_figure(result))
    assert {t["name"] for t in traces} == set(verdicts)
    for trace in traces:
        color, symbol = style.VERDICT_STYLES[trace["name"]]
        assert (trace["marker"]["color"], trace["marker"]["symbol"]) == (color, symbol)
        assert trace["error_x"]["color"] == color
    assert sum(t["showlegend"] for t in traces) == len(verdicts)  # one legend entry each


def test_the_bar_is_drawn_at_each_cells_threshold():
    result = g3_result()
    figure = charts.forest_figure(result)
    bars = [t for t in figure["data"] if t.get("legendgroup") == "bar"]
    assert [x for t in bars for x in t["x"]] == [c["threshold"] for c in result["clauses"]]
    assert [t["showlegend"] for t in bars] == [True, False, False, False]


def test_each_clause_has_a_panel_titled_in_words_and_ticks_in_its_own_units():
    figure = charts.forest_figure(g3_result())
    assert titles(figure) == [
        "TTFT p50 reduction, offload vs baseline: at least 25 %",
        "output throughput gain, offload vs baseline: at least 29 %",
        "output throughput gain, offload vs baseline: at least 40 %",
        "TTFT p50 ratio, recompute vs offload: at least 8.6x",
    ]
    layout = figure["layout"]
    suffixes = [layout[name]["ticksuffix"] for name in ("xaxis", "xaxis2", "xaxis3", "xaxis4")]
    assert suffixes == [" %", " %", " %", "x"]
    assert layout["yaxis"]["categoryarray"] == ["c=4", "c=8", "c=16"]


def test_a_cell_reads_like_a_sentence_a_customer_understands():
    cell = next(c for c in g3_result()["clauses"] if c["tier"] == 16)
    assert charts.cell_label(cell) == "TTFT p50 reduction, offload vs baseline, c=16"
    hover = estimate_traces(charts.forest_figure({"clauses": [cell]}))[0]["hovertext"][0]
    assert hover.startswith("<b>TTFT p50 reduction, offload vs baseline, c=16</b>")
    assert f"{figures.number(cell['estimate'], '%')}" in hover and "bar: at least 25 %" in hover


def test_the_passing_side_of_each_bar_is_shaded():
    figure = charts.forest_figure(g3_result())
    shapes = figure["layout"]["shapes"]
    assert [shape["x0"] for shape in shapes] == [25, 29, 40, 8.6]
    for shape, axis in zip(shapes, ("xaxis", "xaxis2", "xaxis3", "xaxis4"), strict=True):
        assert shape["x1"] == figure["layout"][axis]["range"][1]


def test_a_cell_without_an_interval_says_so_at_the_bar_instead_of_drawing_a_point():
    result = g3_result(repetitions=1)
    assert all(cell["estimate"] is None for cell in result["clauses"])
    figure = strict_json(charts.forest_figure(result))
    assert estimate_traces(figure) == []
    notes = [t for t in figure["data"] if t.get("mode") == "text"]
    assert sum(len(t["x"]) for t in notes) == 8
    assert "an interval needs at least 2" in notes[0]["hovertext"][0]


def test_names_from_a_spec_cannot_add_markup_to_the_figure():
    cell = {**g3_result()["clauses"][0], "compare": "<img src=x onerror=alert(1)>/baseline"}
    text = json.dumps(charts.forest_figure({"clauses": [cell]}))
    assert "<img" not in text and "&lt;img" in text


# --- measurements ----------------------------------------------------------------------------


def test_measurements_are_one_line_per_arm_tier_and_metric_with_the_recorded_values():
    rows = synthetic_measurements(3)
    figure = strict_json(charts.measurements_figure(rows, ["ttft_p50", "output_throughput"]))
    assert len(figure["data"]) == 3 * 3 * 2
    first = figure["data"][0]  # ttft_p50, c=4, baseline
    wanted = [r["metrics"]["ttft_ms"]["median"] for r in rows if r["tier"] == 4][::3]
    assert (first["name"], first["x"], first["y"]) == ("baseline", [1, 2, 3], wanted)
    assert [t["name"] for t in figure["data"] if t["showlegend"]] == [
        "baseline",
        "offload",
        "recompute",
    ]
    layout = figure["layout"]
    assert layout["yaxis"]["title"]["text"] == "TTFT p50, ms (log)"
    assert layout["yaxis4"]["title"]["text"] == "output throughput, tokens/s (log)"
    assert layout["xaxis4"]["title"]["text"] == "repetition"
    assert titles(figure) == ["concurrency 4", "concurrency 8", "concurrency 16"]


def test_a_missing_metric_is_a_gap_in_its_line_not_a_zero():
    rows = synthetic_measurements(3)
    rows[0]["metrics"]["ttft_ms"] = {"median": None}
    rows[9]["metrics"]["ttft_ms"] = {"median": float("nan")}  # baseline c=4, repetition 2
    figure = strict_json(charts.measurements_figure(rows, ["ttft_p50"]))
    assert figure["data"][0]["y"][:2] == [None, None]


def test_log_axes_get_round_ticks_around_the_values_finer_over_a_narrow_range():
    assert charts.log_ticks([180.0, 1_900.0]) == [200.0, 500.0, 1000.0, 2000.0]
    assert charts.log_ticks([]) == []
    assert charts.log_ticks([1_000.0, 1_100.0]) == [800.0, 1000.0, 1200.0, 1500.0]
    assert charts.log_ticks([7.0]) == [5.0, 6.0, 8.0, 10.0]


# --- G2 --------------------------------------------------------------------------------------


def test_the_aa_figure_plots_both_runs_their_difference_and_the_interval_inside_the_floor():
    rows = g2_rows([(1000.0, 1010.0), (1030.0, 1005.0), (990.0, 1000.0)])
    figure = strict_json(charts_g2.noise_floor_figure(rows["noise_floor"]))
    run_a, run_b, difference, interval = figure["data"]
    assert (run_a["y"], run_b["y"]) == ([1000.0, 1030.0, 990.0], [1010.0, 1005.0, 1000.0])
    assert difference["x"] == pytest.approx([(1000 / 1010 - 1) * 100, 2.4875, -1.0], abs=1e-3)
    row = rows["noise_floor"]
    centre = interval["x"][0]
    assert centre == pytest.approx((math.exp(row["mean_log_ratio"]) - 1) * 100)
    assert centre + interval["error_x"]["array"][0] == pytest.approx((row["high_ratio"] - 1) * 100)
    assert interval["marker"]["color"] == style.VERDICT_STYLES[row["verdict"]][0]
    (band,) = figure["layout"]["shapes"]
    assert (band["x0"], band["x1"]) == (pytest.approx(-100 / 11), 10.0)


def test_the_hit_rate_is_a_bar_in_its_verdicts_colour_against_the_dashed_floor():
    for rate, verdict in ((0.63, "pass"), (0.05, "fail")):
        row = g2_rows([(1000.0, 1000.0)] * 3, hit_rate=rate)["offload_hit"]
        figure = strict_json(charts_g2.hit_rate_figure(row))
        (bar,) = figure["data"]
        assert (bar["x"], row["verdict"]) == ([pytest.approx(rate * 100)], verdict)
        assert bar["marker"]["color"] == style.VERDICT_STYLES[verdict][0]
        (floor,) = figure["layout"]["shapes"]
        assert floor["x0"] == floor["x1"] == pytest.approx(20.0)


def test_an_unobserved_hit_rate_is_said_in_words():
    row = g2_rows([(1000.0, 1000.0)] * 3, hit_rate=None)["offload_hit"]
    figure = charts_g2.hit_rate_figure(row)
    assert figure["data"] == []
    assert "The hit rate was not observed." in titles(figure)


@pytest.mark.parametrize(
    "build",
    [charts.forest_figure, charts.measurements_figure, charts_g2.noise_floor_figure],
)
def test_nothing_to_plot_gives_a_figure_that_says_so(build):
    figure = strict_json(build(None))
    assert figure["data"] == []
    assert titles(figure) and titles(figure)[0].startswith(("This", "No"))


# --- broken numbers never crash ----------------------------------------------------------------

ANY_NUMBER = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.text(max_size=5),
)
CELLS = st.fixed_dictionaries(
    {},
    optional={
        "clause": st.one_of(st.integers(0, 3), st.none()),
        "metric": st.sampled_from(["ttft_p50", "output_throughput", "bogus", None]),
        "compare": st.sampled_from(["offload/baseline", "recompute", "", None]),
        "change": st.sampled_from(["reduction", "gain", "ratio", "sideways", None]),
        "tier": st.one_of(st.integers(0, 64), st.none(), st.text(max_size=3)),
        "threshold": ANY_NUMBER,
        "estimate": ANY_NUMBER,
        "low": ANY_NUMBER,
        "high": ANY_NUMBER,
        "n": ANY_NUMBER,
        "confidence_at_look": ANY_NUMBER,
        "verdict": st.sampled_from(["pass", "fail", "inconclusive", "invalid", "odd", None]),
        "cause": st.one_of(st.none(), st.text(max_size=40)),
    },
)
MEASUREMENTS = st.fixed_dictionaries(
    {},
    optional={
        "arm": st.sampled_from(["baseline", "offload", "x", None]),
        "tier": st.one_of(st.integers(1, 32), st.none(), st.booleans()),
        "repetition": st.one_of(st.integers(1, 8), st.none()),
        "metrics": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "ttft_ms": st.one_of(ANY_NUMBER, st.fixed_dictionaries({"median": ANY_NUMBER})),
                    "output_throughput": ANY_NUMBER,
                },
            ),
        ),
    },
)
G2_ROWS = st.fixed_dictionaries(
    {},
    optional={
        "verdict": st.sampled_from(["pass", "fail", None]),
        "metric": st.sampled_from(["ttft_p50", "nonsense", None]),
        "pairs": st.lists(
            st.fixed_dictionaries(
                {}, optional={"repetition": ANY_NUMBER, "a": ANY_NUMBER, "b": ANY_NUMBER}
            ),
            max_size=4,
        ),
        "mean_log_ratio": ANY_NUMBER,
        "low_ratio": ANY_NUMBER,
        "high_ratio": ANY_NUMBER,
        "confidence": ANY_NUMBER,
        "max_noise_pct": ANY_NUMBER,
        "external_hit_rate": ANY_NUMBER,
        "min_external_hit_rate": ANY_NUMBER,
    },
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(CELLS, max_size=6))
def test_any_clause_cells_make_a_strict_json_forest_plot(cells):
    strict_json(charts.forest_figure({"clauses": cells}))


@FUZZ
@given(st.lists(MEASUREMENTS, max_size=8), st.lists(st.sampled_from(["ttft_p50", "x"])))
def test_any_measurements_make_a_strict_json_figure(rows, metrics):
    strict_json(charts.measurements_figure(rows, metrics))


@FUZZ
@given(G2_ROWS)
def test_any_g2_rows_make_strict_json_figures(row):
    strict_json(charts_g2.noise_floor_figure(row))
    strict_json(charts_g2.hit_rate_figure(row))


@FUZZ
@given(st.lists(st.floats(min_value=5e-324, max_value=1.7e308), min_size=1, max_size=5))
def test_log_ticks_never_fail_on_positive_numbers(values):
    ticks = charts.log_ticks(values)
    assert all(math.isfinite(t) and t > 0 for t in ticks)


@pytest.mark.parametrize("module", [charts, charts_g2, style], ids=lambda m: m.__name__)
def test_the_chart_modules_import_no_framework(module):
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not {name for name in imported if name and name.startswith(("django", "gates.models"))}


def test_forest_titles_are_left_aligned_and_break_before_the_bar():
    notes = charts.forest_figure(g3_result())["layout"]["annotations"]
    assert all(note["xanchor"] == "left" and note["x"] == 0 for note in notes)
    assert notes[0]["text"] == "TTFT p50 reduction, offload vs baseline:<br>at least 25 %"


def test_a_narrow_log_panel_gets_a_range_that_holds_its_tick_labels():
    rows = [
        {"arm": arm, "tier": 2, "repetition": 1, "metrics": {"output_throughput": value}}
        for arm, value in (("baseline", 82.0), ("offload", 90.0))
    ]
    layout = charts.measurements_figure(rows, ["output_throughput"])["layout"]
    low, high = layout["yaxis"]["range"]
    inside = [t for t in layout["yaxis"]["tickvals"] if low <= math.log10(t) <= high]
    assert len(inside) >= 2
    # One repetition: one tick, with room around it.
    assert layout["xaxis"]["range"] == [0.5, 1.5] and layout["xaxis"]["dtick"] == 1
