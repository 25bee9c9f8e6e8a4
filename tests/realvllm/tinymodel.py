"""Makes the tiny model `make test-vllm` serves: simhost's shipped tokenizer (a byte-level BPE
trained offline with `tokenizers` on this repository's docs/, by `train_tokenizer` below) and a
seeded random-weight Llama small enough for a CPU. vLLM and simhost then count tokens with the
same tokenizer, which the fidelity test relies on.

Run with the test-vllm virtualenv's python (it needs torch and transformers):
    var/vllm-venv/bin/python tests/realvllm/tinymodel.py OUT_DIR
    var/vllm-venv/bin/python tests/realvllm/tinymodel.py --retrain-tokenizer OUT_DIR
Nothing is downloaded. The same seed gives the same weights.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_TOKENIZER = ROOT / "simhost" / "tokenizer.json"
VOCAB_SIZE = 2048
MAX_POSITIONS = 2048
SEED = 1234
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}\n{% endfor %}<|assistant|>"
)


def train_tokenizer(out: Path) -> None:
    """How simhost/tokenizer.json was made (docs/ of the commit that added it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.save(str(out / "tokenizer.json"))


def write_tokenizer_config(out: Path) -> None:
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        # simhost's chat rendering (simhost/textgen.py render_chat), so chat prompts count alike.
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>"})
    )


def make_model(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    # head_dim 64: one the CPU attention backend supports. Many KV heads on a narrow model:
    # 16 KiB of KV per token, so the 1 GiB CPU KV cache holds 64 Ki tokens and cold_recovery's
    # flush (1.2x the cache) stays seconds of prefill, while compute per token stays small.
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=64,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)


def main() -> int:
    retrain = sys.argv[1] == "--retrain-tokenizer"
    out = Path(sys.argv[-1])
    out.mkdir(parents=True, exist_ok=True)
    if retrain:
        train_tokenizer(out)
    elif not (out / "tokenizer.json").exists():
        shutil.copyfile(SHIPPED_TOKENIZER, out / "tokenizer.json")
    write_tokenizer_config(out)
    if not (out / "model.safetensors").exists():
        make_model(out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
