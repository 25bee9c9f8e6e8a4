"""Runs: start and cancel, host leases, the worker's recording session, results stored,
attempts spent, evaluation into a decision, uploads, and the work order a worker drives.
"""
