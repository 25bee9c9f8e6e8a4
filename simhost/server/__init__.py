"""`simhost serve`: the aiohttp app, the OpenAI wire protocol, streaming, /metrics, faults
and the real-time runtime that paces the engine.
"""
