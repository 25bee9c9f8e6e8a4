"""Tollgate's host-side helper: uploaded to the host by SFTP and run with its python3.

Standard library only (any Python 3.6+). Talks to the OpenAI-compatible server on the host so
the orchestrator needs no curl there and never sends prompts through a shell:

    python3 hostctl.py health URL [PATH]     exit 0 when URL/health (or URL+PATH) answers 200
    python3 hostctl.py metrics URL [PATH]    print URL/metrics (or URL+PATH)
    python3 hostctl.py complete URL MODEL MAX_TOKENS PROMPTS_JSON_FILE
                                             greedy completions, one JSON line per prompt
    python3 hostctl.py tier                  the native offload tier (host DRAM) as JSON
    python3 hostctl.py listener PORT         who listens on TCP PORT, as JSON: "listening" and
                                             the visible processes (pid, pgid, command)
    python3 hostctl.py soak-read DATA_DIR OFFSET MAX_BYTES ACK_SEQ stop|none DEADLINE|none
                                             one soak collector tick: acknowledge collected
                                             windows (the agent prunes them), maybe ask the
                                             agent to stop or move its deadline, then print a
                                             JSON header and the new windows with raw files
"""

import base64
import hashlib
import json
import os
import sys
import time

TIMEOUT_S = 10
COMPLETION_TIMEOUT_S = 300


def _http():
    """urllib, imported when a command needs it: it pulls in http, email and ssl, which more
    than doubles the start-up of soak-read, run once per tick of every soak."""
    import urllib.error
    import urllib.request

    return urllib


def health(base_url, path="/health"):
    urllib = _http()
    if not path.startswith("/"):
        sys.stderr.write("PATH must start with /\n")
        return 2
    try:
        with urllib.request.urlopen(base_url + path, timeout=TIMEOUT_S) as response:
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError):
        return 1


def metrics(base_url, path="/metrics"):
    urllib = _http()
    if not path.startswith("/"):
        sys.stderr.write("PATH must start with /\n")
        return 2
    with urllib.request.urlopen(base_url + path, timeout=TIMEOUT_S) as response:
        sys.stdout.write(response.read().decode("utf-8", "replace"))
    return 0


def complete(base_url, model, max_tokens, prompts_file):
    urllib = _http()
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


LISTEN = "0A"


def listening_inodes(port):
    """Socket inodes in LISTEN state on `port`, any local address, IPv4 and IPv6."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16) if len(fields) > 9 else None
            if local_port == port and fields[3] == LISTEN:
                inodes.add(fields[9])
    return inodes


def open_links(pid):
    """What the process's file descriptors point at; empty when this account cannot look."""
    links = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return links
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile
    return links


def socket_owners(inodes):
    """The pids holding one of `inodes` open; processes this account cannot read are skipped."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    return sorted(pid for pid in pids if wanted.intersection(open_links(pid)))


def describe_process(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        pgid = os.getpgid(pid)
    except OSError:
        return None
    return {"pid": pid, "pgid": pgid, "command": command[:200]}


def listener(port):
    """Who listens on the port: the server's health check proves the answer came from the
    process the run launched by comparing these process groups with the launched one."""
    inodes = listening_inodes(int(port))
    processes = [describe_process(pid) for pid in socket_owners(inodes)] if inodes else []
    found = [process for process in processes if process is not None]
    print(json.dumps({"port": int(port), "listening": bool(inodes), "processes": found}))
    return 0


def _write_atomic(path, text):
    partial = path + ".tmp"
    with open(partial, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def _read(path, default=None):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return default


def soak_read(data_dir, offset, max_bytes, ack_seq, stop, deadline):
    """One collector tick's read: acknowledge, maybe stop or extend, then the new whole lines
    after `offset` (at most max_bytes) with their windows' raw files, base64 and SHA-256."""
    offset, max_bytes, ack_seq = int(offset), int(max_bytes), int(ack_seq)
    if ack_seq >= 0:
        _write_atomic(os.path.join(data_dir, "ack"), f"{ack_seq}\n")
    if stop == "stop":
        _write_atomic(os.path.join(data_dir, "stop"), "stop\n")
    if deadline != "none":
        _write_atomic(os.path.join(data_dir, "deadline"), f"{float(deadline)}\n")
    header = {
        "now": time.time(),
        "heartbeat": _float(_read(os.path.join(data_dir, "heartbeat"))),
        "exit": json.loads(_read(os.path.join(data_dir, "exit.json")) or "null"),
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "started": _float(_read(os.path.join(data_dir, "started"))),
        "deadline": _float(_read(os.path.join(data_dir, "deadline"))),
    }
    lines = _lines(os.path.join(data_dir, "windows.jsonl"), offset, max_bytes)
    records, end, size = [], offset, 0
    for line, after in lines:
        record = json.dumps({"line": line, "files": _files(data_dir, line)})
        # The reply must fit what one command's output may carry: the rest waits a tick.
        if records and size + len(record) > max_bytes:
            break
        records.append(record)
        end, size = after, size + len(record)
    header["offset"], header["count"] = end, len(records)
    sys.stdout.write("\n".join([json.dumps(header), *records]) + "\n")
    return 0


def _files(data_dir, line):
    window = json.loads(line)
    folder = os.path.join(data_dir, "raw", str(window.get("seq")))
    files = {}
    for name in window.get("files", []):
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                content = handle.read()
        except OSError:
            continue  # pruned after an acknowledgement: already stored
        files[name] = {
            "sha256": hashlib.sha256(content).hexdigest(),
            "base64": base64.b64encode(content).decode(),
        }
    return files


def _lines(path, offset, max_bytes):
    """Whole lines after offset, each with the offset just after it."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(max_bytes)
    except OSError:
        return []
    found, position = [], offset
    for raw in data.splitlines(True):
        if not raw.endswith(b"\n"):
            break
        position += len(raw)
        if raw.strip():
            found.append((raw.decode(), position))
    return found


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


COMMANDS = {
    "health": (health, (1, 2)),
    "metrics": (metrics, (1, 2)),
    "complete": (complete, (4,)),
    "tier": (tier, (0,)),
    "listener": (listener, (1,)),
    "soak-read": (soak_read, (6,)),
}
URL_COMMANDS = ("health", "metrics", "complete")


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS or len(argv) - 2 not in COMMANDS[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    if argv[1] in URL_COMMANDS and not argv[2].startswith(("http://", "https://")):
        sys.stderr.write("URL must start with http:// or https://\n")
        return 2
    if argv[1] == "listener" and not argv[2].isdigit():
        sys.stderr.write("PORT must be a number\n")
        return 2
    function, _ = COMMANDS[argv[1]]
    return function(*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
