"""The gate report: the page, its PDF (WeasyPrint), its charts as SVG (Kaleido) and its
pure clause and inventory tables.
"""
