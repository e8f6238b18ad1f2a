"""The wire protocol: every message between master, node daemons and clients.

One pydantic model per message (``messages``), a msgpack codec that checks the
protocol version and the size (``codec``), the named error codes that replies
carry (``errors``), and the exit statuses every side agrees on (``exits``).
Import from the modules: this package imports nothing, so that a task that only
needs an exit status does not load pydantic.
"""
