"""Scheduling decisions as plain, deterministic code over data.

Nothing in this package reads a clock, sleeps, signals or touches a socket:
the master daemon and the simulator both call it with the state they hold.
"""
