"""The server under test: its port (free, or held by this run's server) and what launching
it needs beyond its `serve` template (context length, offload side server, cold-recovery flush).
"""
