"""The clause-history pages (a gate's, and across the engagements a viewer may see) and the
compare view of two runs."""
