"""The master daemon: job table, Ousterhout matrix, quantum timer, slot switches.

``core`` holds the scheduler's state in parts (``job_table``, ``pending``,
``starting``, ``migrations``, ``ending``, ``decisions``, ``rotation``,
``node_events``, ``node_reports``, ``task_exits``, ``client_requests``) and reacts to events with the clocks
passed in (``clock``); ``loop`` is the ZeroMQ loop around it; ``store``
persists jobs in SQLite or PostgreSQL; the client library (the package ``client``) is how the CLI and
benchmarks talk to a master.
"""
