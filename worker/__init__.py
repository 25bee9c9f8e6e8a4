"""The Celery worker's side of Tollgate: thin tasks that claim a row by id, drive runners/ and
record through gates.services. The only place where runners/ meets Django.
"""
