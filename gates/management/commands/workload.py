"""`manage.py workload characterize PATH --format ...`: a trace's characterisation (text or
--json). Thin: parses arguments and calls runners.traces; touches no database."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runners.traces.characterize import DEFAULT_CAPACITIES_TOKENS, TraceProfile, characterize
from runners.traces.readers.formats import FORMATS, read_trace_file
from runners.traces.records import TraceError

TRACE_ERROR = 1
USAGE_ERROR = 2


class Command(BaseCommand):
    help = "Characterise a request trace: lengths, arrivals, reuse, the LRU hit-ratio curve."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["characterize"])
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", required=True, choices=sorted(FORMATS))
        parser.add_argument("--block-tokens", type=int, help="tokens per block (format default)")
        parser.add_argument(
            "--capacity-tokens", type=int, nargs="+", help="cache sizes to read the curve at"
        )
        parser.add_argument(
            "--warmup-requests", type=int, default=0, help="requests that fill but are not measured"
        )
        parser.add_argument(
            "--sessions-in-flight", type=int, default=1, help="sharegpt: conversations interleaved"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        for name in ("block_tokens", "sessions_in_flight"):
            if options[name] is not None and options[name] < 1:
                flag = "--" + name.replace("_", "-")
                raise CommandError(f"{flag} must be at least 1", returncode=USAGE_ERROR)
        profile = self._characterize(options)
        data = {"format": options["format"], "path": str(options["path"])} | profile.to_dict()
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self.stdout.write(render_summary(data))

    def _characterize(self, options: dict[str, Any]) -> TraceProfile:
        trace_format = FORMATS[options["format"]]
        # A load-shape format has no blocks, whatever --block-tokens says.
        block = trace_format.block_tokens and (options["block_tokens"] or trace_format.block_tokens)
        records = read_trace_file(
            options["path"], options["format"], block, options["sessions_in_flight"]
        )
        try:
            return characterize(
                records,
                block_tokens=block,
                chained_ids=trace_format.chained_ids,
                capacities_tokens=options["capacity_tokens"] or DEFAULT_CAPACITIES_TOKENS,
                warmup_requests=options["warmup_requests"],
            )
        except TraceError as error:
            raise CommandError(
                f"{options['path']}: line {error.line}, field {error.field}: {error.message}",
                returncode=TRACE_ERROR,
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"{options['path']}: {error}", returncode=TRACE_ERROR) from None


def render_summary(data: dict[str, Any]) -> str:
    lines = [
        f"{data['path']} ({data['format']}): {data['requests']:,} requests, "
        f"{data['block_accesses']:,} block accesses of {data['block_tokens'] or '-'} tokens",
        _lengths("input", data["input_length"]),
        _lengths("output", data["output_length"]),
    ]
    if arrivals := data["arrivals"]:
        lines.append(
            f"arrivals: {arrivals['duration_s']:,.0f} s, {arrivals['mean_rate_per_s'] or 0:.2f}/s, "
            f"CV {arrivals['interarrival_cv'] or 0:.2f}, peak {arrivals['peak_per_1s']}/1 s"
        )
    if sessions := data["sessions"]:
        lines.append(f"sessions: {sessions['sessions']:,}")
    if not data["prefix_information"]:
        lines.append(f"reuse: {data['notice']}")
        return "\n".join(lines) + "\n"
    lines.append(f"infinite-cache ceiling: {data['infinite_cache_hit_ratio']:.1%} of input tokens")
    lines += [f"LRU {int(c):>12,} tokens: {r:.1%}" for c, r in data["hit_ratio_at"].items()]
    return "\n".join(lines) + "\n"


def _lengths(name: str, summary: dict[str, Any]) -> str:
    return f"{name} tokens: p50 {summary['p50']}, p90 {summary['p90']}, p99 {summary['p99']}"
