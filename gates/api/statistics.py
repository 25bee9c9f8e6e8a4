"""REST v1: what a G3 gate's spec can decide (its operating characteristic at the measured
noise) and how its latest decision reads per cell (the look, the interval on the ratio scale,
each repetition's ratio). Other gates answer with neither (null and no cells). HTTP only;
reads through gates.selectors."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiTypes, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from gates.models import Gate
from gates.selectors import gate_cell_readouts, gate_operating_characteristic
from gates.tenancy import get_visible_or_404, viewer_for_request


class GateStatisticsApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        gate = get_visible_or_404(Gate, viewer_for_request(request), pk=pk)
        return Response(
            {
                "operating_characteristic": gate_operating_characteristic(gate),
                "cells": gate_cell_readouts(gate),
            }
        )
