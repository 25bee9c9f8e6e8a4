"""What a run's steps recorded, read back: their details in order and the G1 probes' facts.
A read with no service behind it, so the contract's inventory and the evaluation can both
import it without importing each other."""

from __future__ import annotations

from gates.decisions import gathering
from gates.models import Run


def run_steps(run: Run) -> list[dict]:
    """The run's step details in step order: what the engines' gathering reads."""
    return list(run.steps.order_by("position").values_list("detail", flat=True))


def run_g1_facts(run: Run) -> dict:
    """Every probe's facts, the first observed value of each winning."""
    return gathering.gather_g1(run_steps(run))
