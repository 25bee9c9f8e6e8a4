"""What a soak window records about the host besides the product: the GPU probe's output (on an
AMD host also amd-smi's metric and process views), the kernel log's lines since the previous
window, and the server's own processes.

Standard library only (any Python 3.6+): uploaded beside soakagent.py, which imports it. The
collector judges what this records (runners/soak/fitness.py); nothing here decides.
"""

import json
import os
import subprocess

PROBE_TIMEOUT_S = 30
# A window keeps the kernel log's lines since the previous window, at most about this much of
# them: their start and their end (a fault's first lines, and the latest ones).
KERNEL_LOG_MAX_BYTES = 64 * 1024
# The previous capture's last lines, found again in the next one, mark where new lines begin.
ANCHOR_LINES = 3
MAX_SERVER_PIDS = 256
# amd-smi's JSON for eight GPUs stays under this (a real one-GPU `metric` is about 10 KiB, ROCm 7's
# per-partition lists a few times that). One collector read carries a whole window (soakhost.py's
# READ_MAX_BYTES), and JSON cut short reads as nothing: a larger output is not kept, and why is.
AMD_OUTPUT_MAX_BYTES = 512 * 1024
CURSOR_FILE = "kernel-log.cursor"
# Which GPU probe answered on this host: tried first in the next window.
_WORKED = {}


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def _write_atomic(path, text):
    partial = path + ".tmp"
    with open(partial, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


def process_tree(root):
    """`root`'s process group and every descendant of it: the server's own processes (vLLM's
    engine core and workers hold the GPUs under pids of their own)."""
    parents, found = {}, {root}
    for name in os.listdir("/proc"):
        stat = _read("/proc/" + name + "/stat") if name.isdigit() else None
        if not stat:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        parents[int(name)] = int(fields[1])
        # An orphaned worker (its parent gone) is still in the group the agent made.
        if int(fields[2]) == root:
            found.add(int(name))
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return sorted(found)[:MAX_SERVER_PIDS]


def run_probe(argv):
    """(stdout, None), or (what it printed, why it could not be read)."""
    try:
        done = subprocess.run(  # noqa: UP022 (capture_output is Python 3.7+)
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return b"", f"{argv[0]}: {error}"[:300]
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip()[-200:]
        return done.stdout, f"{argv[0]} exited {done.returncode}: {tail}"
    return done.stdout, None


def gpu_probe(argvs):
    """The output of the first of the profile's GPU probes that works here (nvidia-smi,
    amd-smi, ...), the one that worked last time tried first; else that one's failure."""
    order = sorted(range(len(argvs)), key=lambda index: index != _WORKED.get("smi"))
    failed = None
    for index in order:
        output, error = run_probe(argvs[index])
        if error is None:
            _WORKED["smi"] = index
            return output, None
        failed = failed or (output, error)
    return failed


def lines_since(lines, cursor):
    """The lines after those a previous capture ended with (`cursor`), and the next cursor.

    A kernel log grows only at its end (the ring buffer or a rotated journal drops its oldest
    lines), so the previous last lines are at or before where they were; when they are gone
    (the log was cleared, the host rebooted) every line is new."""
    start, anchor = 0, (cursor or {}).get("anchor") or []
    if anchor:
        size = len(anchor)
        latest = min(len(lines), int(cursor.get("count", len(lines)))) - size
        for index in range(latest, -1, -1):
            if lines[index : index + size] == anchor:
                start = index + size
                break
    return lines[start:], {"anchor": lines[-ANCHOR_LINES:], "count": len(lines)}


def bounded(lines, limit=KERNEL_LOG_MAX_BYTES):
    """The lines as text of at most about `limit` characters: their first and last halves."""
    text = "".join(line + "\n" for line in lines)
    if len(text) <= limit:
        return text
    head = text[: limit // 2].rsplit("\n", 1)[0] + "\n"
    tail = text[-(limit // 2) :].split("\n", 1)[-1]
    left_out = len(text) - len(head) - len(tail)
    return head + f"[soakagent: {left_out} bytes of kernel log left out]\n" + tail


def kernel_log_news(output, data_dir):
    """The lines logged since the previous window's capture. The cursor lives in DATA_DIR, so
    a relaunched agent goes on where its predecessor stopped."""
    path = os.path.join(data_dir, CURSOR_FILE)
    try:
        cursor = json.loads(_read(path) or "{}")
    except ValueError:
        cursor = {}
    # latin-1 maps every byte to one character: the lines go back to the same bytes.
    lines = output.decode("latin-1").splitlines()
    news, cursor = lines_since(lines, cursor)
    _write_atomic(path, json.dumps(cursor))
    return bounded(news).encode("latin-1")


def amd_host(config):
    """Whether the GPU probe that last worked here reads AMD GPUs (amd-smi or rocm-smi)."""
    vendors = config.get("smi_vendors") or []
    index = _WORKED.get("smi")
    return index is not None and index < len(vendors) and vendors[index] == "amd"


def amd_health(probes, files, errors):
    """amd-smi's metric and process views into their files (the latest), bounded; a probe
    that failed or printed too much leaves no file and says why in `errors`."""
    for probe in probes:
        output, error = run_probe(probe["argv"])
        if error is None and len(output) > AMD_OUTPUT_MAX_BYTES:
            # The same words every window: the soak's findings count them as one.
            error = f"{probe['argv'][0]} printed more than {AMD_OUTPUT_MAX_BYTES} bytes: not kept"
        _note(errors, probe["name"], error)
        if error is None:
            files[probe["file"]] = output
        else:
            files.pop(probe["file"], None)


def watch(config, data_dir, files, errors):
    """Add the window's health files: the GPU probe's output (smi.txt, the latest), on an AMD
    host amd-smi's views (amd-metric.txt, amd-process.txt, the latest) and the kernel log's new
    lines (kernel-log.txt, appended); per probe that could not be read this time, why in
    `errors` ({"smi": ..., "amd_metric": ..., "kernel_log": ...}). An NVIDIA host never runs
    amd-smi: it would fail every window, a note about nothing."""
    if config.get("smi_argvs"):
        files["smi.txt"], error = gpu_probe(config["smi_argvs"])
        _note(errors, "smi", error)
    if config.get("amd_probes") and amd_host(config):
        amd_health(config["amd_probes"], files, errors)
    if config.get("kernel_log_argv"):
        output, error = run_probe(config["kernel_log_argv"])
        _note(errors, "kernel_log", error)
        if error is None:  # else the cursor stays where it was: the next read catches up
            files["kernel-log.txt"] = files.get("kernel-log.txt", b"") + kernel_log_news(
                output, data_dir
            )


def _note(errors, name, error):
    if error:
        errors[name] = error
    else:
        errors.pop(name, None)
