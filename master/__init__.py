"""The master daemon: job table, Ousterhout matrix, quantum timer, slot switches.

``core`` holds the scheduler's state and reacts to events with the clock
passed in; ``daemon`` is the thin ZeroMQ loop around it; ``store`` persists
jobs in SQLite; ``client`` is how the CLI and benchmarks talk to a master.
"""
