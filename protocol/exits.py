"""Exit statuses with a meaning every side agrees on: the task that exits with one, the node
daemon that reports it and the master that acts on it."""

CHECKPOINTED = 75  # a task saved its state to migrate (EX_TEMPFAIL): the master restarts it elsewhere
