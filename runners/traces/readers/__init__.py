"""One streaming reader per trace format; formats.py names them and opens the file."""
