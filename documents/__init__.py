"""The typed JSON documents that cross Tollgate's layers: a gate spec, a run step, a decision
result. JSON stays the storage and wire format; these types say what its keys hold, parsed once
at the edge and passed down. Standard library only: every package may import them.
"""
