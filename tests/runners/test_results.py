"""runners.results on captured tool outputs: the one reading of a bench cell, a probe and the
greedy answers, shared by the gate programs and the upload API."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners import adapters, results
from runners.errors import BenchmarkError
from runners.results import Cell, ResultError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BENCH = (FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json").read_bytes()
SWEEP = (
    FIXTURES / "vllm-bench/er0080__sweep_v0.25.1__max_num_seqs4_conc2__summary.json"
).read_bytes()
IDLE = (FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_idle.txt").read_bytes()
LOADED = (FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_loaded_128conc.txt").read_bytes()
CELL = Cell("offload", 2, 1)  # the captured bench ran at max_concurrency 2


def test_a_bench_result_gives_the_cells_measurement_and_keeps_the_file_under_the_cell():
    proof = results.bench_proof(BENCH, cell=CELL, source="result.json")
    assert proof.measurement == {
        "arm": "offload",
        "tier": 2,
        "repetition": 1,
        "metrics": adapters.parse(BENCH, tool="vllm-bench")["runs"][0],
        "server": None,
        "artifact": "offload-c2-r1/result.json",
    }
    assert [(a.name, a.tool, a.content) for a in proof.artifacts] == [
        ("offload-c2-r1/result.json", "vllm-bench", BENCH)
    ]


def test_kept_scrapes_around_a_bench_give_its_server_facts_and_are_kept_too():
    proof = results.bench_files_proof(
        (BENCH, "result.json"), cell=CELL, before=(IDLE, "before.txt"), after=(LOADED, "after.txt")
    )
    expected = results.server_facts(
        adapters.parse(IDLE, tool="vllm-metrics"), adapters.parse(LOADED, tool="vllm-metrics")
    )
    assert proof.measurement["server"] == expected and expected["prefix_caching"] is True
    assert [a.name for a in proof.artifacts] == [
        "offload-c2-r1/result.json",
        "offload-c2-r1/metrics-before.txt",
        "offload-c2-r1/metrics-after.txt",
    ]


def test_one_scrape_without_the_other_proves_no_server_facts():
    proof = results.bench_files_proof((BENCH, "result.json"), cell=CELL, before=(IDLE, "b.txt"))
    assert proof.measurement["server"] is None and len(proof.artifacts) == 1


@pytest.mark.parametrize(
    ("raw", "cell", "found"),
    [(SWEEP, CELL, 2), (BENCH, Cell("offload", 8, 1), 0)],
    ids=["two runs at the tier", "none at the tier"],
)
def test_a_file_without_exactly_one_run_at_the_cells_tier_is_refused(raw, cell, found):
    with pytest.raises(ResultError, match=f"^sweep.json: expected one run .* found {found}$") as e:
        results.bench_proof(raw, cell=cell, source="sweep.json")
    assert e.value.field == "file"


@pytest.mark.parametrize(
    ("before", "after", "field"),
    [
        (b"not metrics", LOADED, "metrics_before"),
        (IDLE, b"{}", "metrics_after"),
        # Counters that go backwards: the server restarted between the scrapes.
        (LOADED, IDLE, "metrics_after"),
    ],
    ids=["unreadable before", "unreadable after", "counter reset"],
)
def test_scrapes_that_cannot_be_read_are_refused_naming_their_field(before, after, field):
    with pytest.raises(ResultError) as error:
        results.bench_files_proof(
            (BENCH, "result.json"), cell=CELL, before=(before, "b.txt"), after=(after, "a.txt")
        )
    assert error.value.field == field


def test_an_unreadable_result_is_a_benchmark_error_naming_its_source():
    with pytest.raises(ResultError, match=r"^bench c=2 result\.json: ") as error:
        results.bench_proof(b"{broken", cell=CELL, source="bench c=2 result.json")
    # On a remote run this ends the run as benchmark_error, never as a performance fail.
    assert isinstance(error.value, BenchmarkError) and error.value.outcome == "benchmark_error"


def test_a_probe_gives_its_facts_and_keeps_its_output():
    output = (FIXTURES / "uname/debian12-firecracker-vm__uname_r.txt").read_bytes()
    proof = results.probe_proof("kernel", output, source="probe kernel")
    assert proof.facts == {"kernel": output.decode().strip()}
    assert [(a.name, a.tool, a.content) for a in proof.artifacts] == [
        ("probes/kernel.txt", "uname", output)
    ]


def test_an_unreadable_probe_gives_no_facts_unless_they_are_required():
    proof = results.probe_proof("gpu_nvidia", b"<not-nvidia/>", source="smi.xml")
    assert proof.facts == {} and proof.artifacts[0].name == "probes/gpu_nvidia.txt"
    with pytest.raises(ResultError, match=r"^smi\.xml: not readable as gpu-inventory") as error:
        results.probe_proof("gpu_nvidia", b"<not-nvidia/>", source="smi.xml", required=True)
    assert error.value.field == "file"


def test_completions_give_the_arms_answers_in_order():
    output = b'{"text": "Paris"}\n\n{"text": " 42", "tokens": 2}\n'
    proof = results.answers_proof("offload", output, source="answers.jsonl")
    assert proof.facts == {"answers_offload": ["Paris", " 42"]}
    assert proof.artifacts[0].name == "g2/answers-offload.jsonl"


@pytest.mark.parametrize("output", [b'{"text": "a"}\n{broken\n', b'{"tokens": 2}\n', b"\xff\xfe"])
def test_completions_that_are_not_json_lines_with_text_are_refused(output):
    with pytest.raises(ResultError, match=r"^answers\.jsonl: expected JSON lines") as error:
        results.answers_proof("resident", output, source="answers.jsonl")
    assert error.value.field == "file"


LMCACHE_BEFORE = (
    b"lmcache_mp_lookup_requested_tokens_total 100\nlmcache_mp_lookup_hit_tokens_total 10\n"
)
LMCACHE_AFTER = (
    b"lmcache_mp_lookup_requested_tokens_total 300\nlmcache_mp_lookup_hit_tokens_total 90\n"
)


def test_a_side_services_scrapes_are_kept_under_its_name_and_give_its_facts():
    scrape = partial_scrape("lmcache")
    first, kept_first = scrape(LMCACHE_BEFORE, moment="before")
    last, kept_last = scrape(LMCACHE_AFTER, moment="after")
    assert [(a.name, a.tool) for a in (kept_first, kept_last)] == [
        ("offload-c2-r1/lmcache-metrics-before.txt", "lmcache-metrics"),
        ("offload-c2-r1/lmcache-metrics-after.txt", "lmcache-metrics"),
    ]
    facts = results.service_facts("lmcache-metrics", first, last)
    assert (facts["lookup_hit_rate"], facts["requested_tokens"], facts["hit_tokens"]) == (
        0.4,
        200.0,
        80.0,
    )


def test_an_unreadable_side_service_scrape_names_the_service_and_the_moment():
    with pytest.raises(ResultError) as raised:
        partial_scrape("lmcache")(b"<html>not found</html>", moment="after")
    assert raised.value.field == "lmcache_metrics_after"


def test_the_hit_proof_is_the_named_service_only_when_its_facts_were_read():
    server = {"external_hit_rate": 0.5}
    facts = {"lmcache": {"metrics_tool": "lmcache-metrics", "lookup_hit_rate": 0.4}}
    assert results.with_side_services(server, facts, "lmcache") == {
        "external_hit_rate": 0.5,
        "side_services": facts,
        "hit_proof": "lmcache",
    }
    assert results.with_side_services(server, {}, "lmcache")["hit_proof"] == "engine"
    assert results.with_side_services(server, facts, None)["hit_proof"] == "engine"


def test_the_verifier_reads_a_cells_side_services_again_from_its_kept_pages():
    server = {"external_hit_rate": 0.5}
    files = {
        "offload-c2-r1/metrics-before.txt": b"engine page",
        "offload-c2-r1/lmcache-metrics-before.txt": LMCACHE_BEFORE,
        "offload-c2-r1/lmcache-metrics-after.txt": LMCACHE_AFTER,
        "offload-c2-r2/lmcache-metrics-before.txt": LMCACHE_AFTER,  # another cell's
    }
    recorded = {**server, "side_services": {"lmcache": {}}, "hit_proof": "lmcache"}
    again = results.kept_side_services(server, recorded, files, "offload-c2-r1")
    assert again["hit_proof"] == "lmcache"
    assert again["side_services"]["lmcache"]["lookup_hit_rate"] == 0.4
    # A proof claimed without its pages is not the recomputed proof; pages recorded as none are
    # named; a cell that kept none and recorded none stays as the engine's scrapes give it.
    del files["offload-c2-r1/lmcache-metrics-after.txt"]
    assert results.kept_side_services(server, recorded, files, "offload-c2-r1") == {
        **server,
        "side_services": {},
        "hit_proof": "engine",
    }
    # Pages kept for a cell that recorded no side service: the recomputed facts differ.
    assert results.kept_side_services(server, None, files, "offload-c2-r2") != server
    assert results.kept_side_services(server, {}, files, "baseline-c2-r1") == server


def partial_scrape(service: str):
    def scrape(content: bytes, *, moment: str):
        return results.service_scrape(
            content,
            cell=CELL,
            service=service,
            moment=moment,
            source=f"{service} metrics",
            tool="lmcache-metrics",
        )

    return scrape


def uploaded_cell(*services: results.ServicePages, hit_proof: str | None = "lmcache"):
    """A bench cell uploaded with the engine's pages and the named services' pages."""
    proof = results.bench_files_proof(
        (BENCH, "result.json"), cell=CELL, before=(IDLE, "before.txt"), after=(LOADED, "a.txt")
    )
    return results.with_uploaded_services(proof, list(services), cell=CELL, hit_proof=hit_proof)


def lmcache_pages(before: bytes | None = LMCACHE_BEFORE, after: bytes | None = LMCACHE_AFTER):
    return results.ServicePages(
        "lmcache",
        "lmcache-metrics",
        None if before is None else (before, "lm-before.txt"),
        None if after is None else (after, "lm-after.txt"),
    )


def test_an_uploaded_cell_reads_and_keeps_its_side_services_pages_as_the_bench_step_does():
    proof = uploaded_cell(lmcache_pages())
    server = proof.measurement["server"]
    assert server["hit_proof"] == "lmcache"
    assert server["side_services"]["lmcache"]["lookup_hit_rate"] == 0.4
    assert [a.name for a in proof.artifacts][-2:] == [
        "offload-c2-r1/lmcache-metrics-before.txt",
        "offload-c2-r1/lmcache-metrics-after.txt",
    ]
    # What the verifier reads again from the kept pages is what was recorded.
    files = {a.name: a.content for a in proof.artifacts}
    engine = {k: v for k, v in server.items() if k not in ("side_services", "hit_proof")}
    assert results.kept_side_services(engine, server, files, CELL.label) == server


@pytest.mark.parametrize(
    ("pages", "field"),
    [
        (lmcache_pages(after=None), "lmcache_metrics_after"),
        (lmcache_pages(before=None), "lmcache_metrics_before"),
        (lmcache_pages(before=None, after=None), "lmcache_metrics_before"),
        (lmcache_pages(after=b"<html>not found</html>"), "lmcache_metrics_after"),
    ],
)
def test_a_missing_or_unreadable_page_of_the_hit_proof_names_its_field(pages, field):
    with pytest.raises(ResultError) as raised:
        uploaded_cell(pages)
    assert raised.value.field == field


def test_a_service_that_is_not_the_proof_may_be_left_out_but_not_half_sent():
    left_out = uploaded_cell(lmcache_pages(before=None, after=None), hit_proof=None)
    assert left_out.measurement["server"]["side_services"] == {}
    assert left_out.measurement["server"]["hit_proof"] == "engine"
    with pytest.raises(ResultError) as raised:
        uploaded_cell(lmcache_pages(after=None), hit_proof=None)
    assert raised.value.field == "lmcache_metrics_after"


def test_side_service_pages_need_the_engines_pages_and_no_services_change_nothing():
    bare = results.bench_files_proof((BENCH, "result.json"), cell=CELL)
    with pytest.raises(ResultError) as raised:
        results.with_uploaded_services(bare, [lmcache_pages()], cell=CELL, hit_proof="lmcache")
    assert raised.value.field == "metrics_before"
    assert results.with_uploaded_services(bare, [], cell=CELL, hit_proof="lmcache") is bare
