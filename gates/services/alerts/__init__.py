"""Alerts as services: the outbox (one row per event key), the events services raise,
delivery by email or webhook, settings and mutes, acknowledgement and escalation.
"""
