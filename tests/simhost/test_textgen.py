from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from simhost.textgen import (
    OutputText,
    block_hashes,
    detokenize,
    join_words,
    prompt_seed,
    render_chat,
    tokenize,
    vocab,
    word_tokens,
)
from tests.simhost.conftest import REPO

words = st.lists(st.sampled_from(["a", "b", "c", "dd", "eee"]), min_size=0, max_size=80)


def _text(fingerprint: int, count: int, **kwargs) -> list:
    output = OutputText(fingerprint, **kwargs)
    return [output.next_word() for _ in range(count)]


def test_greedy_output_depends_only_on_the_prompt():
    seed = prompt_seed("the same prompt")
    assert _text(seed, 20, temperature=0.0) == _text(seed, 20, temperature=0.0)
    assert _text(seed, 20, temperature=0.0) != _text(prompt_seed("another"), 20, temperature=0.0)


def test_the_fingerprint_is_the_same_in_another_process_with_another_hash_seed():
    code = "from simhost.textgen import prompt_seed; print(prompt_seed('hello world'))"
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert int(out.stdout) == prompt_seed("hello world")


def test_sampled_output_with_a_seed_repeats_and_without_one_varies():
    seed = prompt_seed("p")
    assert _text(seed, 30, temperature=1.0, seed=7) == _text(seed, 30, temperature=1.0, seed=7)
    assert _text(seed, 30, temperature=1.0) != _text(seed, 30, temperature=1.0)


def test_wrong_output_keeps_the_first_token_and_then_diverges():
    seed = prompt_seed("p")
    good = _text(seed, 30, temperature=0.0)
    bad = _text(seed, 30, temperature=0.0, wrong=True)
    assert bad[0] == good[0]
    assert bad[1:] != good[1:]


@given(words, words)
def test_prompts_sharing_a_prefix_share_the_block_hashes_of_its_full_blocks(prefix, tail):
    shared = block_hashes(prefix, 4)
    assert block_hashes(prefix + tail, 4)[: len(shared)] == shared
    assert len(shared) == len(prefix) // 4


def test_a_change_in_one_token_changes_every_later_block_hash():
    first = block_hashes(list("abcdefgh"), 2)
    second = block_hashes(list("abXdefgh"), 2)
    assert first[0] == second[0]
    assert all(a != b for a, b in zip(first[1:], second[1:], strict=True))


def test_tokens_are_counted_by_the_shipped_tokenizer_and_decode_back():
    ids = tokenize("Tollgate runs the gates")
    assert 1 < len(ids) < len("Tollgate runs the gates")
    assert detokenize(ids) == "Tollgate runs the gates"


def test_the_shipped_word_list_is_the_tokenizers_whole_word_tokens():
    assert vocab() == word_tokens() and len(vocab()) > 500


def test_a_prompt_of_n_words_is_exactly_n_tokens():
    import random

    words = random.Random(3).choices(vocab(), k=4000)
    assert len(tokenize(join_words(words))) == 4000


def _tokenizer_ids(text: str) -> list:
    from simhost.textgen import tokenizer

    return tokenizer().encode(text, add_special_tokens=False).ids


@given(
    st.lists(st.sampled_from(vocab()), min_size=1, max_size=60),
    st.sampled_from(["", " ", "  ", "\n", "x", " 7", "!", " Tollgate"]),
    st.sampled_from(["", " ", "\n", ".", " x", "é"]),
)
def test_the_whole_word_fast_path_gives_the_tokenizers_own_ids(words, head, tail):
    """Whole-word texts take a table lookup; anything around them falls back to the tokenizer.
    Either way the ids are the tokenizer's."""
    text = head + join_words(words) + tail
    assert tokenize(text) == _tokenizer_ids(text)


def test_the_chat_template_marks_roles_and_opens_the_assistant_turn():
    text = render_chat(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    assert text.splitlines() == ["<|system|> be brief", "<|user|> hi", "<|assistant|>"]
