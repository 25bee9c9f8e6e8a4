"""Gate.readout: what a gate read derives from specs, signatures and decisions, stored when one
of them is created, so the read CI polls costs one plain row (gates.selectors.gate_readout)."""

from __future__ import annotations

from django.db import transaction

from gates.models import Gate
from gates.selectors import gate_readout


def gate_readout_refresh(gate_id: int) -> dict:
    """Rebuild and store the gate's readout; call it in the transaction that created the spec,
    signature or decision. The gate row is locked first, so of two transactions signing at
    once the later one reads the earlier one's signature (a fresh snapshot per statement)
    and stores the readout that counts both."""
    with transaction.atomic():
        Gate.objects.select_for_update().filter(pk=gate_id).values_list("pk").get()
        readout = gate_readout(gate_id)
        Gate.objects.filter(pk=gate_id).update(readout=readout)
    return readout
