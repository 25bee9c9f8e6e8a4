"""The audit log page (page.py) and its events as sentences a person reads (words.py, pure)."""
