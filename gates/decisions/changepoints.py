"""Change points of a soak series: where its mean level shifts (PELT with the l2 cost through
ruptures' KernelCPD, a BIC-like penalty on a robust noise estimate). Pure: imports no Django.
"""

from __future__ import annotations

import math

import numpy as np
import ruptures
from scipy import stats

from gates.decisions.g4_summary import MAX_CPD_POINTS

# A shift must last this many points to count as a change point rather than a blip.
MIN_SEGMENT_WINDOWS = 3
NOISE_FLOOR = 0.005  # relative to the median level


def change_points(values: np.ndarray) -> list[int]:
    """Indices where the mean level shifts (PELT, l2 cost, BIC-like penalty on robust noise).

    Beyond MAX_CPD_POINTS windows (a 72 h soak of 10 s windows has 25,920) the search runs on
    medians of consecutive blocks: PELT's cost grows with the square of the points, and a
    shift shorter than a few blocks is not drift. Breaks map back to the block's first window.
    """
    if len(values) > MAX_CPD_POINTS:
        block = math.ceil(len(values) / MAX_CPD_POINTS)
        usable = len(values) // block * block
        medians = np.median(values[:usable].reshape(-1, block), axis=1)
        return [index * block for index in change_points(medians)]
    if len(values) < 2 * MIN_SEGMENT_WINDOWS:
        return []
    scale = float(np.median(np.abs(values))) or 1.0
    signal = values / scale
    # Noise from first differences with a robust scale, so the shifts themselves do not inflate it.
    noise = stats.median_abs_deviation(np.diff(signal), scale="normal") / math.sqrt(2)
    # Quantized values can give zero spread; below half a percent a shift is not worth a segment.
    noise = max(noise, NOISE_FLOOR)
    penalty = 2 * math.log(len(signal)) * noise**2
    # KernelCPD with a linear kernel is PELT with the l2 cost, implemented in C.
    model = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT_WINDOWS)
    found = model.fit(signal.reshape(-1, 1)).predict(pen=penalty)
    return [int(index) for index in found[:-1]]
