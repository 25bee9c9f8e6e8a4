"""The soak agent's processes on the host: pid files that survive a reused pid, whole process
groups stopped, and the offload arm's side services (LMCache's server, ...) started before the
server, scraped around every window's bench and stopped after it (docs/soak.md, "Side services").

Uploaded as soakprocesses.py beside soakagent.py, which imports it. Standard library only (any
Python 3.6+).
"""

import os
import signal
import subprocess
import time

COMMAND_TIMEOUT_S = 15
POLL_S = 0.2


def write_atomic(path, text):
    partial = path + ".tmp"
    with open(partial, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def read_text(path, default=None):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return default


def proc_start(pid):
    """The process's start time in clock ticks since boot (guards against pid reuse)."""
    stat = read_text(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


class SideServices:
    """The offload arm's side services (LMCache's server, ...), each in a process group of its
    own, started in order before the server and stopped after it; each that names a metrics
    command is scraped around every window's bench like the server's /metrics."""

    def __init__(self, config, data_dir):
        self.config = config
        self.data = data_dir
        self.services = list(config.get("side_services") or [])
        self.processes = {}

    def pid_file(self, service):
        return os.path.join(self.data, "side-{}.pid".format(service["name"]))

    def stop_leftover(self):
        for service in self.services:
            text = read_text(self.pid_file(service))
            if text:
                pid, start = text.split()[:2]
                if proc_start(int(pid)) == start:
                    kill_group(int(pid))

    def start(self):
        """None when every service is healthy, else why not (the first that was not)."""
        for service in self.services:
            if not service.get("start_argv"):
                continue  # an endpoint of the server itself (KVBM's metrics): nothing to start
            log_path = os.path.join(self.data, "side-{}.log".format(service["name"]))
            with open(log_path, "ab") as log:
                process = subprocess.Popen(
                    service["start_argv"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.processes[service["name"]] = process
            write_atomic(self.pid_file(service), f"{process.pid} {proc_start(process.pid)}\n")
            problem = self.wait_healthy(service, process)
            if problem:
                return problem
        return None

    def wait_healthy(self, service, process):
        deadline = time.time() + float(self.config.get("serve_timeout_s", 300))
        while time.time() < deadline:
            if process.poll() is not None:
                return "the side service {} exited {}".format(service["name"], process.poll())
            if not service.get("health_argv") or _command(service["health_argv"])[0] == 0:
                return None
            time.sleep(POLL_S)
        return "the side service {} did not become healthy".format(service["name"])

    def scrape(self, moment, files, errors):
        """Each metered service's metrics into `<name>-metrics-<moment>.txt`; why one could
        not be read into `errors[name][moment]`."""
        for service in self.services:
            if not service.get("metrics_argv"):
                continue
            code, output, stderr = _command(service["metrics_argv"])
            if code == 0 and output:
                files["{}-metrics-{}.txt".format(service["name"], moment)] = output
            else:
                said = stderr.decode("utf-8", "replace").strip()[-200:]
                why = f"exit {code}" if code != 0 else "no output"
                errors.setdefault(service["name"], {})[moment] = f"{why}: {said}" if said else why

    def line(self, errors):
        """What the window's line says of the metered services (the collector reads them)."""
        return [
            {
                "name": service["name"],
                "metrics_tool": service["metrics_tool"],
                "errors": errors.get(service["name"], {}),
            }
            for service in self.services
            if service.get("metrics_argv")
        ]

    def stop(self):
        for service in reversed(self.services):
            process = self.processes.pop(service["name"], None)
            if process is not None and process.poll() is None:
                kill_group(process.pid, reap=process.poll)
            if process is not None:
                process.wait()


def _command(argv):
    """(exit code, stdout, stderr) of a short command; a timeout or a missing program is exit
    None with why as its stderr."""
    try:
        # capture_output is Python 3.7+; the agent runs on 3.6.
        done = subprocess.run(  # noqa: UP022
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=COMMAND_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return None, b"", str(error).encode()
    return done.returncode, done.stdout, done.stderr


def kill_group(pgid, grace=10.0, reap=None):
    """TERM the group, KILL it after `grace`; `reap` collects our own child, which would
    otherwise linger as a zombie and keep its group alive."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except OSError:
            return
        until = time.time() + wait
        while time.time() < until:
            if reap is not None:
                reap()
            try:
                os.killpg(pgid, 0)
            except OSError:
                return
            time.sleep(0.05)
