"""The emulated host: GPU inventory and its nvidia-smi / rocm-smi / amd-smi output, the
kernel log, and live GPU state shared between `serve` and `smi`.
"""
