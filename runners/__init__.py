"""Execution: transports, command building, output adapters, gate programs, Celery tasks.

Everything here except tasks.py imports no Django.
"""
