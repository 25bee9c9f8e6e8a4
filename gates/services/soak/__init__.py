"""G4 soaks as services: the collector's ticks (claim, store windows once, gaps, decide)
and a person's early stop or extension.
"""
