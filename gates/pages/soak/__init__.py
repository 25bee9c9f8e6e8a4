"""The soak page of a G4 run: its windows as plot columns and the collector's state."""
