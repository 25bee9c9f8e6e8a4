"""The creating and editing pages beyond hosts: a new engagement, a gate's spec edited."""
