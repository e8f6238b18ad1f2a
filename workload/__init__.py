"""Workloads: Standard Workload Format traces (``swf``) and synthetic models (``lublin``).

Shared by the simulator, the live experiments and trace replay.
"""
