"""The node daemon: launches the local tasks of jobs and applies slot switches.

``core`` decides (registration, what a switch stops and continues, reports,
exits, timers) with the clock passed in; ``loop`` feeds it and carries out its
answers over the master's sockets (``master_link``) and on the tasks
(``executor``, whose outcomes come back as ``task_events``); ``task_processes``
wraps one task's processes (signals, CPU clock, progress), held by the
``containment`` chosen where the node starts (``task_groups``).
"""
