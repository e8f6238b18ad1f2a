"""The node daemon: launches the local tasks of jobs and applies slot switches.

``core`` decides (registration, what a switch stops and continues, reports,
exits, timers) with the clock passed in; ``loop`` feeds it and carries out its
answers over the master's sockets (``master_link``) and on the tasks
(``task_runner``); ``tasks`` wraps one task's process group (signals, CPU
clock, progress).
"""
