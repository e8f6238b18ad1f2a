"""The trace-driven simulator: the same policy code as the live master, on virtual time.

``prepare`` turns trace records into jobs (counting the awkward ones),
``engine`` runs a policy over them, ``metrics`` summarizes the schedule.
"""
