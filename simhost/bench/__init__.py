"""`simhost bench`: its flags, the timed HTTP client, the run and the result file (its prompts
come from simhost.datasets)."""
