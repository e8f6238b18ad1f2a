"""The node daemon: launches the local tasks of jobs and applies slot switches.

``tasks`` wraps one task's process group (signals, CPU clock, progress);
``daemon`` registers with the master, reconciles each switch's desired state
against the applied one, and reports every quantum's CPU use.
"""
