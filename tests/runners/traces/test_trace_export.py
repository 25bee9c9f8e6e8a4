"""bin/trace-export, run as the customer runs it: a chat log in, a Mooncake trace out that the
Mooncake reader accepts, shares prefixes where the chats do, and holds no text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.traces.characterize import characterize
from runners.traces.readers.mooncake import read_mooncake

EXPORTER = Path(__file__).resolve().parents[3] / "bin" / "trace-export"
SYSTEM = {"role": "system", "content": "You are the secret-sauce assistant. " * 20}
FIRST = [SYSTEM, {"role": "user", "content": "What is the launch code of project NIGHTJAR?"}]
SECOND = [
    *FIRST,
    {"role": "assistant", "content": "It is 0000."},
    {"role": "user", "content": "Thanks"},
]
ALICE = "alice@example.com"
PARTS = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
LOG = [
    {"timestamp": "2024-12-02T12:00:05Z", "messages": SECOND, "session_id": ALICE},
    {
        "timestamp": "2024-12-02T12:00:00Z",
        "messages": FIRST,
        "output": "It is 0000.",
        "session_id": ALICE,
    },
    {"timestamp": 1733140810.5, "messages": PARTS, "usage": {"completion_tokens": 9}},
]


def run_exporter(tmp_path: Path, log: list, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in log))
    return subprocess.run(
        [sys.executable, str(EXPORTER), str(path), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_export_reads_back_as_a_mooncake_trace_that_shares_the_chats_prefixes(tmp_path):
    done = run_exporter(tmp_path, LOG, "--block-tokens", "16")
    assert done.returncode == 0, done.stderr
    first, second, third = list(read_mooncake(done.stdout.splitlines(), block_tokens=16))
    assert (first.arrival_s, second.arrival_s, third.arrival_s) == (0.0, 5.0, 10.5)
    shared = len(b"".join(f"{m['role']}\n{m['content']}\n".encode() for m in FIRST)) // 64
    assert second.block_ids[:shared] == first.block_ids[:shared]
    assert first.output_tokens == 3 and third.output_tokens == 9  # 11 bytes / 4; usage
    assert first.session == second.session == "0" and third.session is None
    profile = characterize(read_mooncake(done.stdout.splitlines(), 16), block_tokens=16)
    assert profile.infinite_cache_hit_ratio > 0


def test_no_text_or_session_name_leaves(tmp_path):
    done = run_exporter(tmp_path, LOG)
    for secret in ("NIGHTJAR", "secret", "0000", "alice"):
        assert secret not in done.stdout
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {key for row in rows for key in row} <= {
        "timestamp", "input_length", "output_length", "hash_ids", "session_id"
    }  # fmt: skip
    ids = sorted({i for row in rows for i in row["hash_ids"]})
    assert ids == list(range(len(ids)))  # remapped to small integers


def test_the_same_key_gives_the_same_trace_and_the_digests_never_show(tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"customer-held secret")
    once = run_exporter(tmp_path, LOG, "--key-file", str(key)).stdout
    assert once == run_exporter(tmp_path, LOG, "--key-file", str(key)).stdout


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"timestamp": 1, "messages": "hi"}, "messages"),
        ({"timestamp": "noon", "messages": [{"role": "user", "content": "x"}]}, "timestamp"),
        ({"messages": [{"role": "user", "content": "x"}]}, "timestamp"),
        ({"timestamp": 1, "messages": [{"content": "x"}]}, "messages[0]"),
        ({"timestamp": 1, "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ],
)
def test_a_bad_log_line_is_refused_with_its_line_and_field(tmp_path, entry, field):
    done = run_exporter(tmp_path, [LOG[1], entry])
    assert done.returncode == 1 and done.stdout == ""
    assert f"line 2, field {field}:" in done.stderr


def test_a_tokenizer_file_gives_real_token_counts_and_block_boundaries(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    words = ["[UNK]", "user", "assistant", "one", "two", "three"]
    tokenizer = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]")
    )
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    first = [{"role": "user", "content": "one two three one two three"}]
    second = [*first, {"role": "assistant", "content": "two"}, {"role": "user", "content": "one"}]
    log = [{"timestamp": 0, "messages": first}, {"timestamp": 1, "messages": second}]
    done = run_exporter(
        tmp_path, log, "--tokenizer", str(tmp_path / "tokenizer.json"), "--block-tokens", "3"
    )
    assert done.returncode == 0, done.stderr
    a, b = list(read_mooncake(done.stdout.splitlines(), block_tokens=3))
    assert (a.input_tokens, b.input_tokens) == (7, 11)  # "user" + six words; + 4 more
    assert b.block_ids[:2] == a.block_ids[:2]
