"""The KV headroom planner page and its form."""
