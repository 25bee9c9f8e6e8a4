"""Recomputing a decision from a bundle's raw files: each step's facts and each measurement
read again from the files with the same adapters, gathered and decided by the same engine, and
compared, number by number, with what was recorded. A cell that replayed the customer's trace
is read from its per-request records and the replay's plan (the schedule the run uploaded,
kept as `files/replay/<name>.plan.json`) with the run's own functions (runners.traces
.replay_cell, runners.traces.fidelity): its metrics, its fidelity, and the decision's
`replay_fidelity` and its consequence (a missed bar makes the run invalid).

Pure: plain data and bytes in, a list of problems out (each naming the member and the number).
Imports no Django: the offline verifier runs this on a customer's machine.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from documents.carry import complete_repetitions, record_digest, spec_cells
from documents.profile import short_digest
from gates.decisions import EvidenceError, decide_gate
from gates.decisions.gathering import gather_evidence
from gates.evidence import layout
from gates.evidence.layout import sha256_hex
from gates.specs.validation import parse_spec
from runners import adapters, results
from runners.adapters import AdapterError
from runners.adapters.vllm_trace_records import parse_vllm_trace_records, records_lines
from runners.program.sequence import cell_workload
from runners.traces.fidelity import (
    recorded_hit_bands,
    replay_fidelity_summary,
    with_replay_fidelity,
)
from runners.traces.replay_cell import plan_file, replay_cell_metrics

# Added to a G3 result after the engine decided (what the spec could decide): not recomputed here.
NOT_RECOMPUTED = ("operating_characteristic",)
MAX_DIFFERENCES = 20


@dataclass
class RunRecords:
    """One run of a bundle: its prefix, step details, measurements and raw files by name."""

    prefix: str
    steps: list[dict]
    measurements: list[dict]
    files: dict[str, bytes] = field(default_factory=dict)
    attempt: int = 0  # the attempt that measured them (set for carried records)


def recompute_decision(
    spec: dict,
    decision: dict,
    context: dict,
    run: RunRecords,
    carried: Sequence[RunRecords] = (),
) -> list[str]:
    """Every way the recorded decision differs from one recomputed from the run's raw files
    (and, for an attempt that carries repetitions, from the carried ones' raw files too: the
    engine decided on the union)."""
    steps, problems = rederive_steps(run)
    measurements: list[dict] = []
    own: list[dict] = []
    for records in (*carried, run):
        own, found = rederive_measurements(records, spec)
        measurements += own
        problems += found
    recorded = {k: v for k, v in (decision.get("result") or {}).items() if k not in NOT_RECOMPUTED}
    try:
        evidence = gather_evidence(spec, steps, measurements)
        # A bundle's spec is untrusted input: parsed (InvalidSpecError is a ValueError).
        decided = decide_gate(parse_spec(spec), evidence, context or None)
        # The server judges a replay's fidelity on the run's own cells, after the engine.
        result = replay_decided(decided, own, recorded)
    except (EvidenceError, KeyError, ValueError, TypeError) as error:
        return [*problems, f"decision: cannot be recomputed from the raw files ({error})"]
    return problems + decision_differences(decision, recorded, result)


def decision_differences(decision: dict, recorded: dict, result: Mapping[str, Any]) -> list[str]:
    """Where the recomputed result and verdict differ from decision/decision.json's."""
    problems = differences(recorded, result, "decision/decision.json result")
    if decision.get("verdict") != result["verdict"]:
        problems.append(
            f"decision/decision.json verdict: recorded {decision.get('verdict')!r}, "
            f"recomputed {result['verdict']!r}"
        )
    return problems


def rederive_steps(run: RunRecords) -> tuple[list[dict], list[str]]:
    """The steps with every fact a raw file backs read again from that file; facts no file
    backs (a time a person reported) are kept as recorded."""
    steps, problems = [], []
    for position, detail in enumerate(run.steps):
        facts = dict(detail.get("facts") or {})
        where = f"{run.prefix}steps.json[{position}]"
        for name in fact_sources(detail):
            content = run.files.get(name)
            if content is None:
                problems.append(f"member {run.prefix}files/{name}: missing ({where} reads it)")
                continue
            for key, value in file_facts(name, content).items():
                problems += differences(facts.get(key), value, f"{where}.facts.{key}")
                facts[key] = value
        steps.append({**detail, "facts": facts})
    return steps, problems


def rederive_measurements(
    run: RunRecords, spec: dict | None = None
) -> tuple[list[dict], list[str]]:
    """Each measurement read again from its bench result file (and /metrics scrapes); a cell
    that replayed the spec's trace from its records and the replay's plan."""
    measurements, problems = [], []
    for position, recorded in enumerate(run.measurements):
        workload = replay_workload(spec, recorded["arm"]) if spec else None
        where = f"{run.prefix}measurements.json[{position}]"
        name = recorded.get("artifact")
        content = run.files.get(name) if name else None
        if not name or content is None:
            problems.append(f"{where}: no raw result file in the bundle ({name or 'none named'})")
            measurements.append(recorded)
            continue
        if sha256_hex(content) != recorded.get("raw_sha256"):
            problems.append(f"{where}.raw_sha256: is not the SHA-256 of files/{name}")
        try:
            if workload is None:
                derived = bench_measurement(recorded, name, run.files)
            else:
                derived = replay_measurement(recorded, name, run.files, workload)
        except (AdapterError, ReplayEvidenceError) as error:
            problems.append(f"member {run.prefix}files/{name}: unreadable ({error})")
            measurements.append(recorded)
            continue
        problems += measurement_differences(recorded, derived, where)
        measurements.append({**recorded, **derived, "raw_sha256": sha256_hex(content)})
    return measurements, problems


def measurement_differences(recorded: dict, derived: dict, where: str) -> list[str]:
    """Metrics and server facts as recorded against as recomputed; a replayed cell's fidelity
    apart, each difference naming the cell (`replay cell offload c=64 r2 (...) fidelity.valid`)."""
    metrics = dict(recorded.get("metrics") or {})
    replay = metrics.pop("replay", None)
    again = dict(derived["metrics"])
    replayed = again.pop("replay", None)
    problems = differences(metrics, again, f"{where}.metrics")
    problems += differences(recorded.get("server"), derived["server"], f"{where}.server")
    if replay is not None or replayed is not None:
        cell = f"{recorded.get('arm')} c={recorded.get('tier')} r{recorded.get('repetition')}"
        problems += differences(replay, replayed, f"replay cell {cell} ({where}.metrics.replay)")
    return problems


def bench_measurement(recorded: dict, name: str, files: dict[str, bytes]) -> dict:
    """The measurement one bench result file (and the scrapes kept beside it) gives."""
    cell = results.Cell(recorded["arm"], recorded["tier"], recorded["repetition"])
    label = name.rsplit("/", 1)[0]
    scrapes = {
        moment: (files[f"{label}/metrics-{moment}.txt"], f"{label}/metrics-{moment}.txt")
        for moment in ("before", "after")
        if f"{label}/metrics-{moment}.txt" in files
    }
    proof = results.bench_files_proof(
        (files[name], name), cell=cell, before=scrapes.get("before"), after=scrapes.get("after")
    )
    measured = proof.measurement
    assert measured is not None  # a bench result file always gives its cell's measurement
    server = results.kept_side_services(measured["server"], recorded.get("server"), files, label)
    return {"metrics": measured["metrics"], "server": server}


def fact_sources(detail: dict) -> list[str]:
    """The raw files a recorded step read its facts from (a failed probe read none)."""
    step = detail.get("step") or {}
    kind = step.get("kind")
    if kind == "probe" and "error" not in (detail.get("progress") or {}):
        return [f"probes/{step.get('probe')}.txt"]
    if kind == "complete":
        return [f"g2/answers-{step.get('arm')}.jsonl"]
    if kind == "upload":
        return [name for name in detail.get("files") or {} if file_kind(name)]
    return []


def file_kind(name: str) -> str | None:
    if name.startswith("probes/") and name.endswith(".txt"):
        return "probe"
    if name.startswith("g2/answers-") and name.endswith(".jsonl"):
        return "answers"
    return None


def file_facts(name: str, content: bytes) -> dict:
    """The facts one kept file gives, read by the adapters the run read it with."""
    if file_kind(name) == "probe":
        probe = name.removeprefix("probes/").removesuffix(".txt")
        return results.probe_facts(probe, content.decode("utf-8", "replace"))
    if file_kind(name) == "answers":
        arm = name.removeprefix("g2/answers-").removesuffix(".jsonl")
        return results.answers_proof(arm, content, source=name).facts
    return {}


def differences(recorded: object, recomputed: object, where: str) -> list[str]:
    """Where two JSON values differ, each as one line naming its path (at most a few)."""
    found: list[str] = []
    _walk(recorded, recomputed, where, found)
    return found[:MAX_DIFFERENCES]


def _walk(recorded: object, recomputed: object, where: str, found: list[str]) -> None:
    if len(found) >= MAX_DIFFERENCES:
        return
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        for key in sorted(set(recorded) | set(recomputed), key=str):
            _walk(recorded.get(key), recomputed.get(key), f"{where}.{key}", found)
    elif isinstance(recorded, list) and isinstance(recomputed, list):
        if len(recorded) != len(recomputed):
            found.append(f"{where}: recorded {len(recorded)} items, recomputed {len(recomputed)}")
            return
        for i, (a, b) in enumerate(zip(recorded, recomputed, strict=True)):
            _walk(a, b, f"{where}[{i}]", found)
    elif not _same(recorded, recomputed):
        found.append(f"{where}: recorded {recorded!r}, recomputed {recomputed!r}")


def _same(a: object, b: object) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, numbers):
        return a == b
    # Another machine's libm may differ in the last bits of a logarithm; a verdict never does.
    return isinstance(b, numbers) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def carried_set_problems(spec: dict, source: dict, carried: Sequence[RunRecords]) -> list[str]:
    """The carried repetitions must be exactly the source attempt's complete ones (every cell
    measured, none set aside: documents.carry, the rule carrying applied), and each carried
    record the one the source attempt's chain recorded, by digest."""
    name = f"attempt {source['attempt']}"
    where = f"{layout.CARRIED_SOURCE} ({name})"
    records = source["records"]
    aside = (source.get("decision") or {}).get("set_aside") or []
    complete = complete_repetitions(spec_cells(spec), records, aside)
    taken = {row["repetition"] for group in carried for row in group.measurements}
    problems = []
    if missing := sorted(complete - taken):
        problems.append(
            f"{where}: repetition(s) {missing} are complete (every cell measured, none set "
            "aside) but not carried"
        )
    if extra := sorted(taken - complete):
        problems.append(f"{where}: repetition(s) {extra} are carried but are not complete ones")
    recorded = {_cell_key(r["attempt"], r): r["sha256"] for r in records}
    held = set()
    for group in carried:
        for index, row in enumerate(group.measurements):
            key = _cell_key(group.attempt, row)
            held.add(key)
            cell = f"repetition {row['repetition']}, {row['arm']} at c={row['tier']}"
            if key not in recorded:
                problems.append(f"{group.prefix}measurements.json[{index}]: {name} has no {cell}")
            elif record_digest(row) != recorded[key]:
                problems.append(
                    f"{group.prefix}measurements.json[{index}]: not the record {name} holds for "
                    f"{cell} (SHA-256 {short_digest(record_digest(row))}, recorded "
                    f"{short_digest(recorded[key])})"
                )
    dropped = sorted(key for key in recorded if key[1] in complete & taken and key not in held)
    for origin, repetition, arm, tier in dropped:
        problems.append(
            f"{where}: the record of attempt {origin}'s repetition {repetition}, {arm} at "
            f"c={tier} is not carried"
        )
    return problems


def carried_profile_problems(run: dict, carried: Sequence[tuple[str, dict]]) -> list[str]:
    """Every carried attempt's run.json must name the carrying run's profile digest (the same
    profile, so the same command lines: carrying refuses any other)."""
    digest = (run.get("profile") or {}).get("digest")
    problems = []
    for prefix, record in carried:
        theirs = (record.get("profile") or {}).get("digest")
        if theirs != digest:
            problems.append(
                f"{prefix}run.json profile digest: {_short(theirs)}, the carrying run's is "
                f"{_short(digest)}"
            )
    return problems


def _cell_key(attempt: int, row: Mapping[str, Any]) -> tuple[int, int, str, int]:
    return (attempt, row["repetition"], row["arm"], row["tier"])


def _short(digest: object) -> str:
    return short_digest(digest) if isinstance(digest, str) else "none"


# A trace replay's cells (docs/evidence.md, "What is recomputed").


class ReplayEvidenceError(ValueError):
    """A replayed cell whose plan or records the bundle lacks or cannot read."""


def replay_workload(spec: Mapping[str, Any], arm: str) -> dict[str, Any] | None:
    """The workload a cell of this spec replayed, None when the cell sent no trace."""
    workload = cell_workload(dict(spec), arm)
    return workload if workload and workload.get("trace") else None


def replay_measurement(
    recorded: Mapping[str, Any], name: str, files: Mapping[str, bytes], workload: dict[str, Any]
) -> dict[str, Any]:
    """The metrics and server facts a replayed cell's records, plan and /metrics scrapes give,
    computed as the run's bench step computed them."""
    tier, label = int(recorded["tier"]), name.rsplit("/", 1)[0]
    plan_name = plan_file(workload, tier)
    if plan_name not in files:
        raise ReplayEvidenceError(
            f"files/{plan_name}: missing (the replay's plan; {name} needs it)"
        )
    plan = json.loads(files[plan_name])
    _check_vllm_records(files, label, name, plan)
    server = _scraped_server(files, label)
    if server is not None:  # as the run read it: the side services' facts, then the records
        server = results.kept_side_services(server, recorded.get("server"), files, label)
    metrics = replay_cell_metrics(plan, files[name], workload=workload, tier=tier, server=server)
    return {"metrics": metrics, "server": server}


def _check_vllm_records(
    files: Mapping[str, bytes], label: str, name: str, plan: Mapping[str, Any]
) -> None:
    """A `vllm`-profile cell's records were read from vLLM's detailed result kept beside them:
    read it again, with `measured` from the plan, and hold the records to it byte for byte."""
    result = files.get(f"{label}/result.json")
    if result is None:
        return
    records = parse_vllm_trace_records(result, source=f"files/{label}/result.json")
    measured = {int(row[0]): bool(row[4]) for row in plan["requests"]}
    for record in records:
        record["measured"] = measured.get(record["index"], True)
    if records_lines(records) != files[name]:
        raise ReplayEvidenceError(
            f"files/{name}: is not the records files/{label}/result.json gives"
        )


def _scraped_server(files: Mapping[str, bytes], label: str) -> dict[str, Any] | None:
    """The server facts of the cell's two /metrics scrapes (None when either was not kept)."""
    scrapes = {}
    for moment in ("before", "after"):
        content = files.get(f"{label}/metrics-{moment}.txt")
        if content is None:
            return None
        source = f"files/{label}/metrics-{moment}.txt"
        try:
            tool = adapters.detect(content, source=source)
        except AdapterError:
            tool = "vllm-metrics"  # its adapter then says what is wrong with the file
        scrapes[moment] = adapters.parse(content, tool=tool, source=source)
    return results.server_facts(scrapes["before"], scrapes["after"])


def replay_decided(
    result: Mapping[str, Any], measurements: Sequence[Mapping[str, Any]], recorded: Mapping
) -> Mapping[str, Any]:
    """The engine's result with the replays' fidelity as the server adds it (a missed bar:
    invalid), from the recomputed cells and the hit-rate bands the decision recorded (the
    planner's, from the engagement's KV plan and the trace's characterisation, which the
    bundle does not hold: used as recorded, and they only ever add a note)."""
    bands = recorded_hit_bands((recorded or {}).get("replay_fidelity") or {})
    fidelity = replay_fidelity_summary(measurements, bands)
    return result if fidelity is None else with_replay_fidelity(result, fidelity)
