"""Tollgate's soak agent: uploaded to the host by SFTP (SHA-256 checked) and run detached.

Standard library only (any Python 3.6+), with soakwatch.py uploaded beside it (the host's health
per window). It keeps a G4 soak going while the orchestrator is away:

    python3 soakagent.py run CONFIG_JSON      the soak loop (launched detached by Tollgate)

The collector reads DATA_DIR with `hostctl.py soak-read`. What each file in DATA_DIR means, and
the window loop, are described in docs/soak.md.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

# Uploaded beside this file: its folder is first on sys.path.
import soakwatch
from soakprocesses import SideServices, kill_group, proc_start, read_text, write_atomic

HTTP_TIMEOUT_S = 5
HEALTH_FAILS_FOR_CRASH = 3
LOG_TAIL_LINES = 20
POLL_S = 0.2
EXIT_OK, EXIT_SERVER, EXIT_DISK, EXIT_CONFIG = 0, 3, 4, 2


def boot_id(config):
    return read_text(config.get("boot_id_file") or "/proc/sys/kernel/random/boot_id", "unknown")


def free_bytes(path):
    return shutil.disk_usage(path).free


def rss_bytes(pid):
    for line in (read_text(f"/proc/{pid}/status", "") or "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def host_available_bytes():
    for line in (read_text("/proc/meminfo", "") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def http_get(url):
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read()
    except (urllib.error.URLError, OSError):
        return None, b""


class Server:
    """The offload arm's server in a process group of its own, so the agent can stop all of it
    and a restarted agent can find and stop a server its predecessor left behind."""

    def __init__(self, config, data_dir):
        self.config = config
        self.pid_file = os.path.join(data_dir, "server.pid")
        self.log_path = os.path.join(data_dir, "server.log")
        self.process = None
        self.health_fails = 0

    def stop_leftover(self):
        text = read_text(self.pid_file)
        if not text:
            return
        pid, start = text.split()[:2]
        if proc_start(int(pid)) == start:
            kill_group(int(pid))

    def start(self):
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.config["serve_argv"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        write_atomic(self.pid_file, f"{self.process.pid} {proc_start(self.process.pid)}\n")
        self.health_fails = 0
        deadline = time.time() + float(self.config.get("serve_timeout_s", 300))
        while time.time() < deadline:
            if self.process.poll() is not None:
                return False
            if http_get(self.config["health_url"])[0] == 200:
                return True
            time.sleep(POLL_S)
        return False

    def crashed(self):
        """The server is gone or has failed /health several times in a row."""
        if self.process is None or self.process.poll() is not None:
            return True
        if http_get(self.config["health_url"])[0] == 200:
            self.health_fails = 0
            return False
        self.health_fails += 1
        return self.health_fails >= HEALTH_FAILS_FOR_CRASH

    def crash_event(self):
        code = self.process.poll() if self.process else None
        lines = (read_text(self.log_path, "") or "").splitlines()[-LOG_TAIL_LINES:]
        return {"at": time.time(), "exit_code": code, "log_tail": lines}

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            kill_group(self.process.pid, reap=self.process.poll)
        if self.process is not None:
            self.process.wait()


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


class Agent:
    def __init__(self, config):
        self.config = config
        self.data = config["data_dir"]
        self.raw = os.path.join(self.data, "raw")
        self.windows = os.path.join(self.data, "windows.jsonl")
        self.server = Server(config, self.data)
        self.side = SideServices(config, self.data)
        self.restarts = 0
        self.stopping = threading.Event()

    def run(self):
        signal.signal(signal.SIGTERM, _terminate)
        try:
            return self.loop()
        finally:
            # TERM from a cancel or a kill: the server lives in its own group, stop it too.
            self.server.stop()
            self.side.stop()

    def loop(self):
        os.makedirs(self.raw, exist_ok=True)
        floor = self.disk_problem()
        if floor:
            return self.finish(EXIT_DISK, floor)
        self.server.stop_leftover()
        self.side.stop_leftover()
        threading.Thread(target=self.beat, daemon=True).start()
        problem = self.side.start()
        if problem:
            return self.finish(EXIT_SERVER, problem)
        if not self.server.start():
            return self.finish(EXIT_SERVER, "the server did not become healthy", crash=True)
        seq = max(self.last_seq() + 1, int(self.config.get("first_seq", 0)))
        self.start_clock()
        reason, code = "the soak's duration was reached", EXIT_OK
        while True:
            if os.path.exists(os.path.join(self.data, "stop")):
                reason = "stopped by the orchestrator (stop file)"
                break
            if time.time() >= self.deadline():
                break
            self.prune()
            problem = self.disk_problem()
            if problem:
                reason, code = problem, EXIT_DISK
                break
            window = self.window(seq)
            # A restart belongs to the crashed window: the agent watched it all along.
            recovered = window["crashed"] and self.recover()
            window["restarted"], window["end"] = bool(recovered), time.time()
            self.append(window)
            seq += 1
            if window["crashed"] and not recovered:
                reason, code = "the server crashed and the spec allows no more restarts", 3
                break
        self.server.stop()
        return self.finish(code, reason)

    def start_clock(self):
        """The soak's clock starts with its first window, once; a relaunched agent keeps it."""
        if read_text(os.path.join(self.data, "started")) is None:
            # A relaunch on a host that lost the directory gets the clock from the collector.
            now = float(self.config.get("started") or time.time())
            end = float(self.config.get("deadline") or now + self.duration())
            write_atomic(os.path.join(self.data, "deadline"), f"{end}\n")
            write_atomic(os.path.join(self.data, "started"), f"{now}\n")

    def duration(self):
        return float(self.config["duration_s"])

    def deadline(self):
        """The soak's end; an extension is written by the collector into DATA_DIR/deadline."""
        written = read_text(os.path.join(self.data, "deadline"))
        return float(written) if written else time.time() + self.duration()

    def disk_problem(self):
        free = free_bytes(self.data)
        floor = int(self.config.get("free_space_floor_bytes", 0))
        if free < floor:
            return f"free space {free} bytes is below the floor of {floor} bytes"
        return None

    def beat(self):
        path = os.path.join(self.data, "heartbeat")
        while not self.stopping.is_set():
            write_atomic(path, f"{time.time():.3f}\n")
            self.stopping.wait(float(self.config.get("heartbeat_s", 2)))

    def last_seq(self):
        """Resume numbering after a restarted agent: the last line written wins."""
        last = -1
        try:
            with open(self.windows) as handle:
                for line in handle:
                    try:
                        last = max(last, int(json.loads(line)["seq"]))
                    except (ValueError, KeyError, TypeError):
                        continue
        except OSError:
            pass
        return last

    def window(self, seq):
        folder = os.path.join(self.raw, str(seq))
        os.makedirs(folder, exist_ok=True)
        start = time.time()
        files = {"metrics-before.txt": http_get(self.config["metrics_url"])[1]}
        side_errors = {}
        self.side.scrape("before", files, side_errors)
        bench_exit, crash = self.bench(folder)
        probe_errors = {}
        if crash is None:
            files["metrics-after.txt"] = http_get(self.config["metrics_url"])[1]
            self.side.scrape("after", files, side_errors)
            soakwatch.watch(self.config, self.data, files, probe_errors)
            crash = self.pace(start)
        if crash is not None:
            # A GPU that fell off the bus takes the server down with it: what the host says
            # up to the crash belongs to the crashed window, not to one that may never come.
            soakwatch.watch(self.config, self.data, files, probe_errors)
        for name, content in files.items():
            with open(os.path.join(folder, name), "wb") as handle:
                handle.write(content)
        pid = self.server.process.pid if self.server.process else None
        side = self.side.line(side_errors)
        extra = {"side_services": side, "hit_proof": self.config.get("hit_proof")} if side else {}
        return {
            **extra,
            "seq": seq,
            "start": start,
            "end": max(time.time(), start + 0.001),
            "boot_id": boot_id(self.config),
            "agent_pid": os.getpid(),
            "server_pid": pid,
            "server_pids": soakwatch.process_tree(pid) if pid else [],
            "probe_errors": probe_errors,
            "crashed": crash is not None,
            "crash": crash,
            "bench_exit": bench_exit,
            "bench_tool": self.config.get("bench_tool", "vllm-bench"),
            "files": sorted(os.listdir(folder)),
            "server_rss_bytes": rss_bytes(pid) if pid else None,
            "host_available_bytes": host_available_bytes(),
            "free_disk_bytes": free_bytes(self.data),
        }

    def bench(self, folder):
        """Run one bench; a server crash meanwhile ends it early and is returned."""
        result = self.config["bench_result"]
        if os.path.exists(result):
            os.remove(result)
        with open(os.path.join(folder, "bench.log"), "wb") as log:
            process = subprocess.Popen(
                self.config["bench_argv"], stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
            while process.poll() is None:
                if self.server.crashed():
                    crash = self.server.crash_event()
                    process.kill()
                    process.wait()
                    return None, crash
                time.sleep(POLL_S)
        if os.path.exists(result):
            os.replace(result, os.path.join(folder, "bench.json"))
        return process.returncode, None

    def pace(self, start):
        """Watch the server until the window's length has passed."""
        until = start + float(self.config["window_s"])
        while time.time() < until:
            if self.server.crashed():
                return self.server.crash_event()
            time.sleep(min(POLL_S, max(until - time.time(), 0)))
        return None

    def recover(self):
        self.server.stop()
        if not self.config.get("restart_on_crash", True):
            return False
        if self.restarts >= int(self.config.get("max_restarts", 0)):
            return False
        self.restarts += 1
        return self.server.start()

    def append(self, window):
        with open(self.windows, "a") as handle:
            handle.write(json.dumps(window, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def prune(self):
        """Drop raw files the collector has acknowledged: a 72 h soak's disk stays bounded."""
        acked = read_text(os.path.join(self.data, "ack"))
        if acked is None:
            return
        for name in os.listdir(self.raw):
            if name.isdigit() and int(name) <= int(acked):
                shutil.rmtree(os.path.join(self.raw, name), ignore_errors=True)

    def finish(self, code, reason, crash=False):
        self.stopping.set()
        event = {"code": code, "reason": reason, "at": time.time(), "boot_id": boot_id(self.config)}
        if crash:
            event["crash"] = self.server.crash_event()
        write_atomic(os.path.join(self.data, "exit.json"), json.dumps(event, sort_keys=True))
        return code


def main(argv):
    if len(argv) >= 2 and argv[0] == "run":
        with open(argv[1]) as handle:
            config = json.load(handle)
        return Agent(config).run()
    sys.stderr.write(__doc__)
    return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
