"""The master daemon: job table, Ousterhout matrix, quantum timer, slot switches.

``core`` holds the scheduler's state in parts (``lifecycle``, ``rotation``,
``node_events``, ``requests``) and reacts to events with the clock passed in;
``loop`` is the ZeroMQ loop around it; ``store`` persists jobs in SQLite;
``client`` is how the CLI and benchmarks talk to a master.
"""
