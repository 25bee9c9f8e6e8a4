"""The emulated vLLM engine: continuous batching with chunked prefill over the KV block model.

Pure logic in virtual seconds: `step(now)` schedules one engine step and says how long it takes.
No I/O, no clock, no asyncio; imports only the standard library and simhost's pure modules.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Deque, List, Optional, Sequence, Tuple

from simhost.engine.kvcache import CpuTier, GpuBlockPool, blocks_for
from simhost.engine.perf import Chunk, HostLink, step_seconds
from simhost.engine.presets import ModelPreset

GIB = 1 << 30


@dataclass(frozen=True)
class EngineConfig:
    """What a `serve` command line fixes about the engine."""

    preset: ModelPreset
    num_gpu_blocks: int
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    enable_prefix_caching: bool
    kv_offloading_gib: Optional[float]
    offload_bytes_per_s: float
    # "lmcache" is accepted as vLLM >= 0.25 takes it; the emulated tier is the same either way.
    kv_offloading_backend: str = "native"
    offload_lookup_s: float = 0.0005  # connector lookup per admitted request
    # A --kv-transfer-config connector (LMCacheMPConnector): the tier is its side service's, so
    # vLLM's own cache config reports no offloading (kv_offloading_size None).
    kv_connector: Optional[str] = None

    @property
    def offload_enabled(self) -> bool:
        return self.kv_offloading_gib is not None

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.preset.kv_bytes_per_token

    @property
    def num_cpu_blocks(self) -> int:
        if self.kv_offloading_gib is None:
            return 0
        return int(self.kv_offloading_gib * GIB // self.block_bytes)


@dataclass
class EngineStats:
    """Cumulative counters, read by /metrics (tokens unless named otherwise)."""

    prefix_queries: int = 0
    prefix_hits: int = 0
    external_queries: int = 0
    external_hits: int = 0
    prompt_tokens: int = 0
    computed_prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    load_bytes: int = 0
    load_seconds: float = 0.0
    store_bytes: int = 0
    store_seconds: float = 0.0
    steps: int = 0
    busy_seconds: float = 0.0


class EngineRequest:
    """One sequence inside the engine."""

    def __init__(
        self,
        req_id: str,
        prompt_hashes: Sequence[int],
        prompt_len: int,
        max_tokens: int,
        salt: int,
        arrival: float,
    ) -> None:
        self.req_id = req_id
        self.hashes: List[int] = list(prompt_hashes)  # full-block hashes, grows with the output
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.salt = salt
        self.arrival = arrival
        self.num_tokens = prompt_len
        self.computed = 0
        self.generated = 0
        self.blocks: List[Optional[int]] = []
        self.ready_at = 0.0
        self.loading_blocks = 0
        self.first_scheduled: Optional[float] = None
        self.local_hit_tokens = 0
        self.external_hit_tokens = 0
        self.preemptions = 0
        self.state = "waiting"  # waiting | running | finished

    def block_hash(self, index: int) -> int:
        """Hash of full block `index`; blocks past the prompt chain on the previous hash."""
        while len(self.hashes) <= index:
            previous = self.hashes[-1] if self.hashes else self.salt
            self.hashes.append(hash((previous, self.salt, len(self.hashes))))
        return self.hashes[index]


@dataclass
class StepResult:
    """What one step did: its duration and the requests that got a token at its end."""

    duration: float
    emitted: List[EngineRequest] = field(default_factory=list)
    finished: List[EngineRequest] = field(default_factory=list)
    idle: bool = False


class Engine:
    """Scheduler in vLLM V1's style: running requests first, then FCFS admission."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.pool = GpuBlockPool(config.num_gpu_blocks, config.enable_prefix_caching)
        self.tier = CpuTier(config.num_cpu_blocks) if config.offload_enabled else None
        self.waiting: Deque[EngineRequest] = deque()
        self.running: List[EngineRequest] = []
        self.stats = EngineStats()
        # the GPUs' host links: loads and stores of the tier share them (simhost.engine.perf)
        self.link = HostLink(config.preset.platform, config.offload_bytes_per_s)

    def add(self, request: EngineRequest) -> None:
        self.waiting.append(request)

    def abort(self, request: EngineRequest) -> None:
        """Drop a request whose client went away."""
        if request.state == "running":
            self._finish(request)
        elif request.state == "waiting":
            self.waiting.remove(request)
            request.state = "finished"

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self, now: float) -> StepResult:
        self._finish_loads(now)
        scheduled, preempted = self._schedule_running(now)
        budget = self.config.max_num_batched_tokens - sum(n for _, n in scheduled)
        admitted: List[EngineRequest] = []
        if not preempted:
            scheduled += self._admit_waiting(now, budget, admitted)
        if not scheduled:
            return StepResult(duration=self._idle_time(now), idle=True)
        store_bytes = self._publish_blocks(scheduled)
        duration = self._step_cost(scheduled, len(admitted), store_bytes, now)
        result = StepResult(duration=duration)
        self._apply(scheduled, now + duration, result)
        self.stats.steps += 1
        self.stats.busy_seconds += duration
        return result

    def _idle_time(self, now: float) -> float:
        loading = [r.ready_at for r in self.running if r.ready_at > now]
        return max(0.0, min(loading) - now) if loading else 0.0

    def _finish_loads(self, now: float) -> None:
        for request in self.running:
            if request.loading_blocks and request.ready_at <= now:
                start = request.computed // self.config.block_size
                for index in range(start, start + request.loading_blocks):
                    block_hash = request.hashes[index]
                    if self.pool.register(block_hash):
                        request.blocks[index] = block_hash
                request.computed += request.loading_blocks * self.config.block_size
                request.loading_blocks = 0

    def _schedule_running(self, now: float) -> Tuple[List[Tuple[EngineRequest, int]], bool]:
        scheduled: List[Tuple[EngineRequest, int]] = []
        budget = self.config.max_num_batched_tokens
        preempted = False
        for request in list(self.running):
            if request.state != "running" or request.ready_at > now or budget <= 0:
                continue
            count = min(request.num_tokens - request.computed, budget)
            need = blocks_for(request.computed + count, self.config.block_size) - len(
                request.blocks
            )
            while need > self.pool.free_capacity():
                victim = self.running[-1]
                self._preempt(victim)
                preempted = True
                if victim is request:
                    break
            if request.state != "running":
                continue
            self.pool.allocate(need)
            request.blocks.extend([None] * need)
            scheduled.append((request, count))
            budget -= count
        return scheduled, preempted

    def _preempt(self, request: EngineRequest) -> None:
        """Recompute-style preemption: free every block and requeue at the head."""
        self.running.remove(request)
        self.pool.release(request.blocks)
        request.state = "waiting"
        request.blocks = []
        request.computed = 0
        request.loading_blocks = 0
        request.ready_at = 0.0
        request.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(request)

    def _admit_waiting(
        self, now: float, budget: int, admitted: List[EngineRequest]
    ) -> List[Tuple[EngineRequest, int]]:
        scheduled: List[Tuple[EngineRequest, int]] = []
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            request = self.waiting[0]
            count = self._admit(request, now, budget)
            if count is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            request.state = "running"
            admitted.append(request)
            if request.first_scheduled is None:
                request.first_scheduled = now
            if count:
                scheduled.append((request, count))
                budget -= count
        return scheduled

    def _admit(self, request: EngineRequest, now: float, budget: int) -> Optional[int]:
        """Give a waiting request its cached blocks and first chunk; None when KV is short."""
        size = self.config.block_size
        limit = min((request.num_tokens - 1) // size, len(request.hashes))
        local = self.pool.count_hits(request.hashes, limit)
        external = self.tier.count_hits(request.hashes, local, limit) if self.tier else 0
        start = (local + external) * size
        count = 0 if external else min(request.num_tokens - start, budget)
        if not external and count <= 0:
            return None
        fresh = external + blocks_for(start + count, size) - (local + external)
        reusable = sum(1 for h in request.hashes[:local] if self.pool.cached_in_lru(h))
        if fresh > self.pool.free_capacity() - reusable:
            return None
        for block_hash in request.hashes[:local]:
            self.pool.share(block_hash)
        self.pool.allocate(fresh)
        request.blocks = list(request.hashes[:local]) + [None] * fresh
        request.computed = local * size
        self._count_lookup(request, local * size, external * size)
        if external:
            self._start_load(request, external, now)
        return count

    def _count_lookup(
        self, request: EngineRequest, local_tokens: int, external_tokens: int
    ) -> None:
        stats = self.stats
        if self.config.enable_prefix_caching:
            stats.prefix_queries += request.num_tokens
            stats.prefix_hits += local_tokens
        if self.tier is not None:
            stats.external_queries += request.num_tokens - local_tokens
            stats.external_hits += external_tokens
        if request.preemptions == 0:
            request.local_hit_tokens = local_tokens
            request.external_hit_tokens = external_tokens
            stats.prompt_tokens += request.prompt_len

    def _start_load(self, request: EngineRequest, blocks: int, now: float) -> None:
        """Queue a CPU->GPU copy on the tier link; the request waits for it outside the batch."""
        size = blocks * self.config.block_bytes
        seconds, done = self.link.load(size, now)
        request.loading_blocks = blocks
        request.ready_at = done + self.config.offload_lookup_s
        self.stats.load_bytes += size
        self.stats.load_seconds += seconds

    def _step_cost(
        self,
        scheduled: List[Tuple[EngineRequest, int]],
        admitted: int,
        store_bytes: int,
        now: float,
    ) -> float:
        chunks: List[Chunk] = []
        decodes: List[int] = []
        for request, count in scheduled:
            if count == 1 and request.generated > 0:
                decodes.append(request.computed)
            else:
                chunks.append((count, request.computed))
        seconds = step_seconds(
            self.config.preset.platform, self.config.preset.shape, chunks, decodes
        )
        if self.tier is not None:
            # the copy runs beside the step (DMA) but holds the link: loads queue behind it
            self.stats.store_bytes += store_bytes
            self.stats.store_seconds += self.link.store(store_bytes, now)
            seconds += self.config.offload_lookup_s * admitted
        self.stats.computed_prompt_tokens += sum(count for count, _ in chunks)
        return seconds

    def _publish_blocks(self, scheduled: List[Tuple[EngineRequest, int]]) -> int:
        """Publish blocks that fill up in this step; copy them to the tier. Returns bytes copied."""
        size = self.config.block_size
        copied = 0
        for request, count in scheduled:
            for index in range(request.computed // size, (request.computed + count) // size):
                block_hash = request.block_hash(index)
                if self.pool.register(block_hash):
                    request.blocks[index] = block_hash
                if self.tier is not None and self.tier.store(block_hash):
                    copied += self.config.block_bytes
        return copied

    def _apply(
        self, scheduled: List[Tuple[EngineRequest, int]], end: float, result: StepResult
    ) -> None:
        for request, count in scheduled:
            request.computed += count
            if request.computed < request.num_tokens:
                continue
            request.generated += 1
            request.num_tokens += 1
            self.stats.generation_tokens += 1
            result.emitted.append(request)
            if request.generated >= request.max_tokens:
                self._finish(request)
                result.finished.append(request)

    def _finish(self, request: EngineRequest) -> None:
        self.running.remove(request)
        self.pool.release(request.blocks)
        request.blocks = []
        request.state = "finished"
