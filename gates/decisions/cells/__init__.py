"""G3 cells as the decision document holds them: building a cell (build), what a ratio cell
shows a person (readout) and a goodput floor cell's repetitions and readout (floors)."""
