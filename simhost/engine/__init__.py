"""The emulated engine, pure: continuous batching with chunked prefill over the KV block
model, model presets and closed-loop runs in virtual time (simhost.simulation reports them).
"""
