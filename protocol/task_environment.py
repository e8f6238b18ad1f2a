"""The variables a task finds in its environment: the node daemon sets them (noded/task_processes.py),
the job runtime reads them (jobs/runtime.py), the containment sweeps know a task's processes
by the first two."""

JOB_ID = "GANG_JOB_ID"
RANK = "GANG_RANK"  # of its step
STEP_ID = "GANG_STEP_ID"  # which of its job's steps (0: the first, what gang submit runs)
SIZE = "GANG_SIZE"
NODE = "GANG_NODE"
BARRIER_ADDR = "GANG_BARRIER_ADDR"  # where rank 0's barrier is reached
BARRIER_BIND = "GANG_BARRIER_BIND"  # rank 0 only: where it binds it
PROGRESS_FILE = "GANG_PROGRESS_FILE"  # eight bytes the node reads at each quantum: barriers passed
IO_ADDR = "GANG_IO_ADDR"  # the cluster's I/O server, where it has one
IO_TOKEN = "GANG_IO_TOKEN"  # what the I/O server checks a write of this job by (protocol/job_tokens.py)
JOB_TOKEN = "GANG_JOB_TOKEN"  # the launch's secret: rank 0's barrier answers only what carries it
CHECKPOINT = "GANG_CHECKPOINT"  # a migratable task's checkpoint file
RESTORE = "GANG_RESTORE"  # "1": start from the checkpoint
ARRAY_JOB_ID = "GANG_ARRAY_JOB_ID"  # a job of an array: the array's first job (Slurm's SLURM_ARRAY_JOB_ID)
ARRAY_TASK_ID = "GANG_ARRAY_TASK_ID"  # and its index in the array (SLURM_ARRAY_TASK_ID)
