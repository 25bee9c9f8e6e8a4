"""The model's routes of `simhost serve`: /v1/models, /tokenize and /detokenize, answered as
vLLM 0.32 answers them (with simhost's real tokenizer, simhost/textgen.py)."""

from __future__ import annotations

import uuid
from typing import Any, Dict, Sequence

from aiohttp import web

from simhost.server.protocol import parse_json_body, token_ids, tokenize_text
from simhost.textgen import detokenize, tokenize, vocab_size


def add_model_routes(
    app: web.Application, created: float, names: Sequence[str], max_model_len: int
) -> None:
    async def models(_: web.Request) -> web.Response:
        data = [model_card(name, int(created), max_model_len) for name in names]
        return web.json_response({"object": "list", "data": data})

    async def tokenize_route(request: web.Request) -> web.Response:
        ids = tokenize(tokenize_text(parse_json_body(await request.read()), names))
        return web.json_response(
            {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": None}
        )

    async def detokenize_route(request: web.Request) -> web.Response:
        body = parse_json_body(await request.read())
        return web.json_response({"prompt": detokenize(token_ids(body, vocab_size()))})

    app.router.add_get("/v1/models", models)
    app.router.add_post("/tokenize", tokenize_route)
    app.router.add_post("/detokenize", detokenize_route)


def model_card(name: str, created: int, max_model_len: int) -> Dict[str, Any]:
    return {
        "id": name,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": name,
        "parent": None,
        "max_model_len": max_model_len,
        # vLLM's fixed permission card (its id is random per answer there too).
        "permission": [
            {
                "id": "modelperm-" + uuid.uuid4().hex[:16],
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
