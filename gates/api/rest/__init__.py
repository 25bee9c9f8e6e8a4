"""REST plumbing every endpoint shares: bearer-token auth, JSON errors, the JSON parser,
Idempotency-Key replay, rate limits, and the OpenAPI schema hooks.
"""
