"""History and comparison: a clause's estimates across decided attempts and engagements, and two
runs side by side. series.py and comparison.py are pure; reads.py reads the models."""
