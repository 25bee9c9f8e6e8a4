"""Alerting's parts that are not the outbox: the event catalogue (PURE), content rendering,
signed acknowledge links, email messages and webhooks. The outbox itself (state) is
gates/services/alerts/outbox.py; nothing here writes a model."""
