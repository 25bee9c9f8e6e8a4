"""Gate specs, pure: the schema and vocabularies (schema), the one validator (validation),
the G3 statistics rules (statistics), what changed between versions (diff) and the default
spec of each gate kind (templates/). Imports no framework.
"""
