"""The statistics of a G3 decision: paired log-ratio t intervals and the walk over cells
(inference), group-sequential boundaries, the outlier rule, variance pooling across tiers and
the operating characteristic. numpy and scipy only; imports no Django.
"""
