"""Tollgate's host-side helper: uploaded to the host by SFTP and run with its python3.

Standard library only (any Python 3.6+). Talks to the OpenAI-compatible server on the host so
the orchestrator needs no curl there and never sends prompts through a shell:

    python3 hostctl.py health URL [PATH]     exit 0 when URL/health (or URL+PATH) answers 200
    python3 hostctl.py metrics URL           print URL/metrics
    python3 hostctl.py complete URL MODEL MAX_TOKENS PROMPTS_JSON_FILE
                                             greedy completions, one JSON line per prompt
    python3 hostctl.py tier                  the native offload tier (host DRAM) as JSON
"""

import json
import sys
import time
import urllib.error
import urllib.request

TIMEOUT_S = 10
COMPLETION_TIMEOUT_S = 300


def health(base_url, path="/health"):
    if not path.startswith("/"):
        sys.stderr.write("PATH must start with /\n")
        return 2
    try:
        with urllib.request.urlopen(base_url + path, timeout=TIMEOUT_S) as response:
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError):
        return 1


def metrics(base_url):
    with urllib.request.urlopen(base_url + "/metrics", timeout=TIMEOUT_S) as response:
        sys.stdout.write(response.read().decode("utf-8", "replace"))
    return 0


def complete(base_url, model, max_tokens, prompts_file):
    with open(prompts_file) as handle:
        prompts = json.load(handle)
    for index, prompt in enumerate(prompts):
        started = time.time()
        body = {
            "model": model,
            "prompt": prompt,
            "max_tokens": int(max_tokens),
            "temperature": 0,
            "seed": 0,
        }
        request = urllib.request.Request(
            base_url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=COMPLETION_TIMEOUT_S) as response:
            answer = json.loads(response.read().decode())
        choice = answer["choices"][0]
        print(
            json.dumps(
                {
                    "index": index,
                    "text": choice.get("text", ""),
                    "finish_reason": choice.get("finish_reason"),
                    "usage": answer.get("usage"),
                    "seconds": round(time.time() - started, 4),
                }
            )
        )
        sys.stdout.flush()
    return 0


def tier():
    """vLLM's native offload tier is host memory: report what /proc/meminfo has."""
    fields = {}
    with open("/proc/meminfo") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0]) * 1024
    capacity = fields.get("MemAvailable", fields.get("MemTotal", 0))
    print(
        json.dumps(
            {
                "present": capacity > 0,
                "kind": "cpu-dram",
                "capacity_gib": round(capacity / 2**30, 2),
            }
        )
    )
    return 0


COMMANDS = {
    "health": (health, (1, 2)),
    "metrics": (metrics, (1,)),
    "complete": (complete, (4,)),
    "tier": (tier, (0,)),
}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS or len(argv) - 2 not in COMMANDS[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    if len(argv) > 2 and not argv[2].startswith(("http://", "https://")):
        sys.stderr.write("URL must start with http:// or https://\n")
        return 2
    function, _ = COMMANDS[argv[1]]
    return function(*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
