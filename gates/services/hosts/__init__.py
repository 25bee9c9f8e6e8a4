"""Hosts: onboarding with a pinned key, credentials and rotation, the SSH target and
values a run's templates take, and the cleanups a run leaves pending.
"""
