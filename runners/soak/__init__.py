"""G4 soaks outside Django: the pure collector (the agent's config, reading windows, the
provisional verdict), the host's fitness rules per window, the collector's host I/O, and
the two host-side scripts (agent.py and watch.py, uploaded as soakagent.py and soakwatch.py).
"""
