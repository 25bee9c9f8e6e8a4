"""Every captured real output parses to exactly the values written by hand beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.adapters import AdapterError, detect, parse
from tests.runners.adapters.golden import (
    EXPECTED_SUFFIX,
    assert_same,
    expected_for,
    fixture_files,
    section,
)

FIXTURES = fixture_files()
PARSED = [path for path in FIXTURES if "refused" not in expected_for(path)]
REFUSED = [path for path in FIXTURES if "refused" in expected_for(path)]


def _ids(paths: list[Path]) -> list[str]:
    return [f"{path.parent.name}/{path.name}" for path in paths]


def test_every_fixture_has_an_expected_file_and_every_folder_a_provenance_note():
    assert len(FIXTURES) >= 20
    for path in FIXTURES:
        assert path.with_name(path.stem + EXPECTED_SUFFIX).is_file(), path
        assert (path.parent / "PROVENANCE.md").is_file(), path.parent


@pytest.mark.parametrize("path", PARSED, ids=_ids(PARSED))
def test_a_fixture_parses_to_its_expected_values_when_the_tool_is_detected(path):
    assert_same(parse(path.read_bytes(), source=str(path)), expected_for(path))


@pytest.mark.parametrize("path", PARSED, ids=_ids(PARSED))
def test_a_fixture_parses_to_the_same_values_when_the_tool_is_named(path):
    expected = expected_for(path)
    assert detect(path.read_bytes()) == expected["tool"]
    assert_same(parse(path.read_text(), tool=expected["tool"]), expected)


@pytest.mark.parametrize("path", REFUSED, ids=_ids(REFUSED))
def test_a_refused_fixture_raises_one_line_naming_the_file_and_the_problem(path):
    expected = expected_for(path)
    with pytest.raises(AdapterError) as raised:
        parse(path.read_bytes(), source=str(path))
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    assert expected["refused"] in message
    assert "\n" not in message


def test_the_all_failed_vllm_run_reports_0_completed_8_failed_and_no_latency():
    path = Path(__file__).parents[2] / "fixtures/vllm-bench"
    run = parse((path / "er0080__bench_serve_all_requests_failed_v0.25.1.json").read_bytes())
    (only,) = run["runs"]
    assert (only["completed"], only["failed"]) == (0, 8)
    # The file says 0.0 ms for every latency; presented as data it would be the fastest run.
    assert all(only[group] is None for group in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"))


def test_the_old_pipeline_file_is_refused_with_a_clear_message():
    path = Path(__file__).parents[2] / "fixtures/vllm-bench"
    name = "zhangxinyuehfad__serving_llama8B_tp1_sharegpt_qps_1__2025-02_ascend_pipeline.json"
    with pytest.raises(AdapterError, match="no `duration` and no `completed`"):
        parse((path / name).read_bytes(), tool="vllm-bench", source=name)


@pytest.mark.parametrize(
    "title",
    [
        "idle :: query-gpu (csv, what the exporter parses)",
        "load :: query-gpu (csv, what the exporter parses)",
    ],
)
def test_the_query_gpu_sections_of_the_h200_capture_parse_to_their_expected_values(title):
    path = Path(__file__).parents[2] / "fixtures/nvidia-smi"
    capture = path / "nvidia_gpu_exporter__capture__linux-x86_64__nvidia-h200__590.48.01.txt"
    body = section(capture.read_text(), title)
    assert_same(parse(body), expected_for(capture)["sections"][title])
