"""Mechanics shared by the master, node and I/O daemons.

Real-time priority (``realtime``), OS signals as poll-loop events
(``signals``), logging set-up (``logs``), endpoint helpers (``endpoints``)
and socket helpers (``sockets``).
"""
