"""A run's program, pure of Django: the ordered steps of each gate kind (sequence), the work
order services fill (workorder), what every step shares (context), performing or polling one
step on the host (perform) and the bounded loop that advances a run (driver).
"""
