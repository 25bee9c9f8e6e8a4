"""G4 soaks outside Django: the pure collector (the agent's config, reading windows, the
provisional verdict), the host's fitness rules per window, the collector's host I/O, and
the side services' window facts, and the three host-side scripts (agent.py, watch.py and
processes.py, uploaded as soakagent.py, soakwatch.py and soakprocesses.py).
"""
