"""What every field of a gate spec means, in the words docs/specs.md prints, keyed by its dotted
path (`clauses[].metric`: a field of every item of a list); and the rules the schema cannot say,
by field. Pure data; gates/specs/reference.py renders it beside the schema.
"""

from __future__ import annotations

from gates.specs import statistics as spec_statistics
from gates.specs.schema import METRICS

# One workload shape serves four places; its fields are described once, under `workload.`.
WORKLOAD_PATHS = ("offload_hit.workload", "noise_floor.workload", "workload", "load")
CANONICAL_WORKLOAD = "workload"

DESCRIPTIONS: dict[str, str] = {
    # Every kind.
    "gate": "The gate kind this spec is for; it must be the kind of the gate it is sent to.",
    "version": "The version number. Tollgate sets it when a version is stored (the next "
    "number), whatever the sent document says; signatures name it.",
    "stop_loss": "When the engagement stops to review this gate.",
    "stop_loss.max_attempts": "Stop-loss review opens when this many counted attempts ended "
    "`fail` and none passed. `inconclusive`, `invalid` and `infra_error` attempts never count.",
    "server": "Settings of the vLLM server under test for this gate; each one left out comes "
    "from the host's profile. The host's own parameters override this block (they describe "
    "the machine), so agree them with the host's owner too.",
    "server.model_path": "The weights: an absolute path on the host or a hub id.",
    "server.tensor_parallel_size": "`--tensor-parallel-size`: GPUs one server spans. Left "
    "out: the profile's (8 for `vllm`).",
    "server.max_model_len": "`--max-model-len`, in tokens. Left out: the spec's longest "
    "request (prompt + output, with 64 tokens of slack) capped by the model's own limit.",
    "server.gpu_memory_utilization": "`--gpu-memory-utilization`: the share of each GPU's "
    "memory vLLM may take. Left out: the profile's (0.9 for `vllm`).",
    "server.offload_gib": "`--kv-offloading-size` of the offload arm: GiB of offload tier, "
    "total across tensor-parallel ranks. Left out: the profile's (256 for `vllm`).",
    # G1.
    "expect": "What the arriving host must be. Each expectation set to `null` (or left out) "
    "is not checked; each other one is a row of the verdict.",
    "expect.gpu_vendor": "The GPU maker, from whichever inventory tool answered "
    "(nvidia-smi, or amd-smi/rocm-smi).",
    "expect.gpu_model_pattern": "A regular expression every GPU's name must match "
    "(searched anywhere in the name, case-insensitive), e.g. `H100|H200`.",
    "expect.gpu_count": "How many GPUs the host must have: exactly this many.",
    "expect.gpu_memory_min_gib": "Memory of the smallest GPU, at least, in GiB (MiB / 1024). "
    'An "80 GB" H100 reports about 79.6 GiB: write 79, not 80.',
    "expect.driver_min": "Lowest GPU driver version accepted (`550.54.15`). Versions compare "
    "number by number: 0.9.2 is below 0.20.1.",
    "expect.cuda_min": "Lowest CUDA version accepted (`12.4`; 12.4 equals 12.4.0).",
    "expect.rocm_min": "Lowest ROCm version accepted (`6.2`).",
    "expect.vllm_min": "Lowest vLLM version accepted; local labels such as `+cu124` are "
    "ignored, and a pre-release (`rc1`, `.dev3`) is below its release.",
    "expect.engine_min": "Lowest version of the serving engine the host's profile runs (its "
    "version probe: SGLang's, vLLM's ...), compared as vllm_min is.",
    "expect.host_memory_min_gib": "Host RAM (from /proc/meminfo), at least, in GiB.",
    "expect.offload_tier": "The KV offload tier the host must offer (for vLLM's native "
    "offload: host DRAM; a vendor tier reports through its own probe).",
    "expect.offload_tier.required": "Whether the tier must be present at all.",
    "expect.offload_tier.min_capacity_gib": "Its capacity, at least, in GiB; `null`: any.",
    "expect.free_disk_min_gib": "Free disk under the run directory (`run_root`), at least, in GiB.",
    "expect.kernel_pattern": "A regular expression the kernel release (`uname -r`) must "
    "match (searched anywhere, case-sensitive).",
    # G2.
    "health": "Whether the offload-arm server comes up.",
    "health.timeout_s": "Seconds the server has to answer `/health` after it starts.",
    "equivalence": "Whether offload changes answers: the same prompts, asked greedily "
    "(temperature 0) of the offload arm and of the resident arm.",
    "equivalence.prompts": "The prompts asked of both arms.",
    "equivalence.max_tokens": "Tokens generated per answer.",
    "equivalence.max_mismatch_pct": "The share of prompts whose two answers may differ, "
    "at most, in percent; 0 asks for identical answers.",
    "offload_hit": "Whether the offload tier is actually used: one run of a workload that "
    "reuses prefixes, reading the external (offload-tier) prefix-cache hit rate from vLLM's "
    "`/metrics` before and after.",
    "offload_hit.min_external_hit_rate": "The external prefix-cache hit rate the run must "
    "reach, at least, as a fraction of the prompt tokens looked up in the tier (0.2 = 20 %).",
    "offload_hit.workload": "The requests of the hit check (fields: see Workload).",
    "offload_hit.tier": "Concurrency of the hit check: requests in flight at once.",
    "noise_floor": "The A/A calibration: pairs of identical resident-arm sessions, measured "
    "as G3 measures arms, to find the noise of this host. G3 has to beat this noise.",
    "noise_floor.repetitions": "How many A/A pairs to run.",
    "noise_floor.confidence": "Confidence of the A/A interval. Left out: 0.90.",
    "noise_floor.metric": "The metric compared between the two identical arms (a name from "
    "the G3 metric list, e.g. `ttft_p50`).",
    "noise_floor.max_noise_pct": "The widest noise accepted, in percent: the A/A interval's "
    "half-width, and the whole interval must lie within this distance of no difference.",
    "noise_floor.tier": "Concurrency of the A/A sessions: requests in flight at once.",
    "noise_floor.workload": "The requests of each A/A session (fields: see Workload).",
    # G3.
    "workload": "The requests of every benchmark cell (fields: see Workload). Each cell "
    "gets its own prompts, the same for every arm.",
    "arms": "The servers compared, by role. The role names are what `clauses[].compare` "
    "refers to; each role's value is the arm kind that server runs.",
    "arms.baseline": "The reference server, normally `resident` (KV cache in VRAM only, "
    "prefix caching on).",
    "arms.offload": "The server with the offload tier, normally `offload` (prefix caching "
    "on, KV offloading on).",
    "arms.recompute": "Optional third server, normally `recompute` (no prefix caching: every "
    "prompt is computed again). Leave it out to run two arms.",
    "tiers": "The concurrency levels measured: requests in flight at once, one cell per "
    "tier, arm and repetition.",
    "repetitions": "How many times every arm and tier is measured. The engine looks at the "
    "data after `min` repetitions, at the even midpoint and at `max`, and decides or asks for "
    "more.",
    "repetitions.min": "Repetitions before the first look.",
    "repetitions.max": "Repetitions at most (re-runs of disturbed repetitions come on top).",
    "confidence": "Two-sided confidence of the whole gate. Its error (1 - confidence) is "
    "split evenly over `statistics.attempts`; a pass or fail is wrong with at most half of "
    "it, over all attempts together.",
    "clauses": 'The bars. Each reads "metric(A) / metric(B) must change by at least X at '
    'these tiers", or, for a goodput floor, "arm A keeps at least X % of its requests within '
    'the SLO at these tiers".',
    "clauses[].metric": "The metric compared (see the metric list under the rules): "
    "latencies in ms, lower is better; throughputs, higher is better; `goodput`, the share of "
    "a bench's requests that completed within `slo` (failed requests count against it), "
    "higher is better.",
    "clauses[].slo": "A `goodput` clause's service-level objective: a request meets it when "
    "it completed and every stated bound holds (`<=`). At least one bound.",
    "clauses[].slo.ttft_ms": "Time to first token of one request, in ms, at most.",
    "clauses[].slo.tpot_ms": "Time per output token of one request, in ms, at most: (end-to-end "
    "latency - TTFT) / (output tokens - 1), as vLLM's `--goodput`; a one-token output meets it.",
    "clauses[].arm": "A goodput floor: the role (from `arms`) whose share of requests within "
    "`slo` must be at least `at_least_pct`, instead of `compare` and `change`.",
    "clauses[].compare": "`A/B`: two role names from `arms`, e.g. `offload/baseline`.",
    "clauses[].change": "How A is held against B: `reduction` (1 - A/B, percent), `gain` "
    "(A/B - 1, percent) or `ratio` (A/B, a bare factor).",
    "clauses[].at_least_pct": "The bar of a `reduction` or `gain`, in percent; of a goodput "
    "floor, the share of requests within the SLO, in percent.",
    "clauses[].at_least": "The bar of a `ratio`, as a factor (8.6 = A is 8.6 times B).",
    "clauses[].tiers": 'Where the bar holds: `"all"` of the spec\'s tiers, or a list of '
    "them. Each tier is decided on its own (a cell).",
    "clauses[].claimed_pct": "What the vendor expects a `reduction` or `gain` to show, in "
    "percent. Only feeds the power estimate shown before signing; never changes a verdict.",
    "clauses[].claimed": "What the vendor expects a `ratio` to show; as `claimed_pct`.",
    "validity": "Checks on every measurement before any clause; a broken one makes the "
    "gate `invalid` (never `fail`), naming the arm, tier and repetition.",
    "validity.max_failed_pct": "Failed requests, at most, in percent of all requests of one bench.",
    "validity.min_external_hit_rate": "The offload arm's external prefix-cache hit rate, "
    "at least, as a fraction.",
    "validity.require_kv_exceeds_vram": "Require the workload's KV working set not to fit "
    "in VRAM (the KV planner's estimate): a test where it fits cannot show the tier's worth.",
    "statistics": "The statistical rules both parties agree in advance (docs/decisions.md). "
    "Left out (specs written before it): each attempt decides at the full confidence, with no "
    "cap on attempts.",
    "statistics.attempts": "Attempts the error budget is split over; a run beyond them is "
    "refused (`409 attempts_spent`). A run spends its attempt with a verdict, or, however it "
    "ended (canceled too), with its first complete repetition. Left out: 1 share per attempt, "
    "no cap.",
    "statistics.sd_floor": "The least spread of a cell's log-ratios the engine assumes (the "
    "measurement resolution; 0.01 is about 1 %), or the G2 A/A spread when larger. Left out: 0.",
    "statistics.noise_cv_pct": "The noise (coefficient of variation, percent) to assume for "
    "the power estimate before G2 has measured it, and the reference for the sd floor and the "
    "spread test until G2 measures the clause's metric.",
    "statistics.noise_source": "Where the stated noise comes from (a measurement, a report), "
    "shown beside the operating characteristic.",
    "statistics.sd_floor_fraction": "A cell's sd is floored at this share of the reference "
    "noise (the G2 A/A spread of its metric, else the stated CV). Left out: the G2 spread of "
    "the same metric, whole.",
    "statistics.spread_level": "A cell whose spread of log-ratios is this improbable for the "
    "reference noise (chi-square lower tail) makes the run `invalid` (copied or synthetic "
    "values). Left out: not tested.",
    "statistics.min_power": "The chance to pass at the claimed effects below which the gate "
    "page warns. Left out: 0.8.",
    "statistics.require_power": "Refuse a run (`409 underpowered`) while that chance is "
    "below `min_power`. Left out: false.",
    "statistics.pool_tiers": "Pool a clause's spread across its tiers where the data support "
    "it (more power, same promise). Left out: false.",
    "statistics.carry_repetitions": "A new attempt after an inconclusive one starts from that "
    "attempt's repetitions (same spec version, same host and profile, else the run is refused) "
    "and continues at the next look on their union, with its own share of the error budget. "
    "Left out: false, every attempt starts afresh.",
    "statistics.outliers": "The pre-declared rule for disturbed repetitions: set aside and "
    "run again. Left out: a disturbed repetition makes the run `invalid`.",
    "statistics.outliers.max_reruns": "Disturbed repetitions that may be set aside and run "
    "again, at most; one more disturbance makes the run `invalid`.",
    "statistics.outliers.max_preemptions": "Server preemptions in one bench beyond which its "
    "repetition counts as disturbed. Left out: preemptions are not checked.",
    "statistics.outliers.screen_level": "A repetition whose log-ratio in any cell lies further "
    "from the cell's median than an undisturbed one would with this probability per attempt "
    "(robust scale, never under the reference noise) counts as disturbed: set aside, run "
    "again and shown. Left out: only failed requests and preemptions flag a repetition.",
    "statistics.outliers.step_level": "A repetition one of whose benches shows a level shift "
    "in its per-request TTFTs (in send order; the CUSUM of log-TTFT after the first wave, over "
    "the median of the same arm and tier's benches) beyond what an undisturbed bench shows with "
    "this probability per repetition counts as disturbed: set aside, run again and shown. "
    "Tested once an arm and tier has 6 repetitions with 16 timed requests after the first "
    "wave; a bench without per-request TTFTs, or short of that, is named and not tested. Left "
    "out: no step check.",
    # G4.
    "duration_h": "Length of the soak, in hours (the clock starts with the first window, "
    "after the server is up). Under an hour is marked `compressed`.",
    "window_min": "Length of one window, in minutes: one bench of the load, the host's "
    "health probes, and one stored sample.",
    "load": "The requests of each window (fields: see Workload), the same every window.",
    "limits": "What the soak must stay within.",
    "limits.max_crashes": "Windows in which the server crashed, at most.",
    "limits.max_error_rate_pct": "Failed requests over the whole soak, at most, in percent.",
    "limits.max_throughput_drift_pct": "Output throughput may drop this much, at most, in "
    "percent: the worst later stretch against the first (change-point detection).",
    "limits.max_ttft_p99_change_pct": "TTFT p99 may rise this much, at most, in percent "
    "(found the same way as the throughput drift).",
    "limits.max_memory_growth_mib_per_h": "Growth of the server's memory, at most, in MiB per "
    "hour (the trend's 90 % interval must lie below it to pass).",
    "limits.max_unobserved_pct": "Time no window covers, at most, in percent of the soak; "
    "more makes the soak `invalid` (nobody watched), not `fail`.",
    "soak": "How the soak agent treats a crashed server and the host's disk (docs/soak.md).",
    "soak.restart_on_crash": "Restart a crashed server and go on. Left out: true.",
    "soak.max_restarts": "Restarts at most. Left out: `limits.max_crashes` + 1.",
    "soak.free_space_floor_gib": "The agent refuses to start, or stops cleanly, below this "
    "much free disk, in GiB. Left out: 1.",
    "retention": "Which windows' raw files are kept once the decision's evidence is sealed "
    "(docs/soak.md, Retention). Left out: every window's raw files are kept.",
    "retention.keep_every_nth_window": "Keep the raw files of every Nth window (the sample) "
    "besides the telling ones (crashed, failed requests, a health note, a change point, the "
    "hit-rate stop, the first and the last); 1 keeps all.",
    "retention.keep_after_sealed_days": "Days after the evidence is sealed before the janitor "
    "drops the others' raw files (the full bundle stays downloadable until then).",
    # Workload: one shape for offload_hit.workload, noise_floor.workload, workload and load.
    "workload.dataset": "How prompts are made: `random` (random tokens of `input_len`), "
    "`prefix_repetition` (shared prefixes of `prefix_len` plus a unique `suffix_len`), "
    "`cold_recovery` (prefix repetition whose sessions are first pushed out of GPU memory, "
    "then measured coming back: docs/gates.md) or `sharegpt` (accepted here, but neither "
    "built-in profile has a bench command for it: the run ends `spec_error` at its first "
    "bench).",
    "workload.input_len": "Prompt length in tokens (`random`).",
    "workload.prefix_len": "Length of the shared prefix in tokens.",
    "workload.suffix_len": "Length of each prompt's own suffix in tokens.",
    "workload.output_len": "Tokens generated per request.",
    "workload.num_prompts": "Requests per bench (per cell in G3).",
    "workload.seed": "Seed of the prompts (G3 also shuffles its tier order from it), so a run "
    "can be repeated exactly.",
    "workload.cold_recovery": "Give every prompt a prefix of its own (as `cold_recovery` "
    "does) unless `num_prefixes` says otherwise. It does not evict anything: that takes "
    "`dataset` `cold_recovery`.",
    "workload.max_concurrency": "Requests in flight at once; read only in G4's `load` (left "
    "out: 8). G2 and G3 take the concurrency from their tiers.",
    "workload.num_prefixes": "Distinct shared prefixes the prompts cycle through. Left out: "
    "one per prompt for cold recovery, otherwise 10 (vllm bench's default), never more than "
    "`num_prompts`.",
    "workload.trace": "The customer's own trace this workload stands for, named by the SHA-256 "
    "of the file uploaded to the engagement, so both parties sign the exact trace "
    "(docs/workloads.md). A digest the engagement has no upload of is refused at save.",
    "workload.trace.sha256": "SHA-256 of the uploaded trace file, lowercase hex.",
    "workload.trace.format": "The trace's format, as uploaded: `mooncake`, `bailian`, "
    "`burstgpt`, `azure` or `sharegpt`.",
    "workload.trace.block_tokens": "Tokens per hash id, as uploaded. Left out: the format's "
    "default (Mooncake 512, Bailian and ShareGPT 16; null for the load-shape formats).",
    "workload.trace.time_scale": "Multiplies the gaps between arrivals when replayed (0.5 "
    "replays twice as fast). Left out: 1. It leaves the hit-ratio curve unchanged and raises "
    "concurrency.",
    "workload.trace.sample_fraction": "Share of the trace's sessions (or, without sessions, "
    "prefix trees) replayed: a seeded coin per session keeps or drops all of its requests, "
    "never single requests. Left out: 1 (the whole trace).",
    "workload.trace.warmup_s": "Seconds from the replay's start whose requests are sent but "
    "not measured: they fill the caches. Left out: 0.",
    "workload.trace.max_arrival_error_p99_ms": "The replay's arrival-time bar: a cell whose "
    "requests left later (or earlier) than the trace says by this much at p99 makes the run "
    "invalid. Left out: 10 ms. Both parties sign it; loosen it only for a client host known to "
    "be shared.",
}

_PERCENTILES = {f"p{p}": spec_statistics.percentile_requests_needed(float(p)) for p in (50, 90, 99)}
_METRIC_NAMES = ", ".join(f"`{name}`" for name in sorted(METRICS))
_REPETITIONS = spec_statistics.MIN_REPETITIONS

# The semantic rules of gates/specs/validation.py and statistics.py, by kind and field.
# What a run start accepts for the weights (runners.commands.model_source), checked at save.
_MODEL_PATH_RULE = (
    "server.model_path",
    "an absolute path of plain names (letters, digits, `._@+,=-`; no `.` or `..` parts) or a hub "
    "model id (`org/name`); shell text is refused: a run could never start with it",
)
RULES: dict[str, list[tuple[str, str]]] = {
    "G1": [
        ("expect.gpu_model_pattern", "must be a valid (Python) regular expression"),
        ("expect.kernel_pattern", "must be a valid (Python) regular expression"),
    ],
    "G2": [_MODEL_PATH_RULE, ("noise_floor.metric", f"one of the known metrics: {_METRIC_NAMES}")],
    "G3": [
        _MODEL_PATH_RULE,
        ("repetitions.min", f"at least {_REPETITIONS}, even, and not above `repetitions.max`"),
        ("repetitions.max", "even (looks fall on whole A B C / C B A pairs of repetitions)"),
        ("clauses[].metric", f"one of the known metrics: {_METRIC_NAMES}"),
        (
            "clauses[].metric",
            "a percentile needs enough requests per cell (`workload.num_prompts`): "
            + ", ".join(f"{name} at least {n}" for name, n in _PERCENTILES.items())
            + "; `mean` and throughputs need no minimum",
        ),
        ("clauses[].slo", "required for metric `goodput`, refused for any other metric"),
        ("clauses[].compare", "two different role names that `arms` has"),
        (
            "clauses[].compare",
            "required, with `change`, except on a goodput floor, which refuses them",
        ),
        (
            "clauses[].arm",
            "only on a `goodput` clause (a floor), a role name `arms` has; a floor refuses "
            "`compare`, `change`, `at_least` and the claims",
        ),
        (
            "clauses[].at_least_pct",
            "required for `reduction` and `gain`, refused for `ratio`; a reduction below 100; "
            "required for a goodput floor, at most 100",
        ),
        ("clauses[].at_least", "required for `ratio`, refused for `reduction` and `gain`"),
        ("clauses[].claimed_pct", "only for `reduction` and `gain`"),
        ("clauses[].claimed", "only for `ratio`"),
        ("clauses[].tiers", "a list names only tiers in the spec's `tiers`"),
    ],
    "G4": [
        _MODEL_PATH_RULE,
        (
            "window_min",
            "not longer than the soak (`duration_h` x 60), and at most 30,000 windows in it",
        ),
    ],
}

KIND_TITLES = {
    "G1": "G1 arrival acceptance",
    "G2": "G2 functional integration",
    "G3": "G3 performance",
    "G4": "G4 stability soak",
}
KIND_INTROS = {
    "G1": "Probes the arriving host (GPUs, driver and tool versions, memory, disk, kernel, "
    "the offload tier) and compares each fact with `expect`. A probe that cannot run leaves "
    "its row `inconclusive`, not `fail`.",
    "G2": "Starts the offload-arm server, checks it is healthy, that it answers as the "
    "resident arm does, that the offload tier is hit, and measures the host's noise with "
    "identical A/A sessions.",
    "G3": "Measures every arm at every tier, repetition after repetition (A B C, then C B A), "
    "and decides each clause at each tier against its bar with the spec's confidence "
    "(docs/decisions.md).",
    "G4": "Runs the offload-arm server under a steady load for `duration_h`, one window at a "
    "time, watching crashes, errors, drift, memory growth and the host's health "
    "(docs/soak.md).",
}
