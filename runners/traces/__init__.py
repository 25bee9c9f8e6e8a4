"""Request traces: streaming readers for the public trace formats (readers/) and the one-pass
characterisation a customer sees before GPUs are booked (characterize.py).

Pure: plain data in, plain data out; only readers/formats.py opens a file. Imports no Django.
"""
