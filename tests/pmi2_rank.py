"""A rank that speaks PMI-2 through a real PMI-2 client library (Debian's libpmi2, Slurm's), as Intel MPI
does with I_MPI_PMI=pmi2: it puts its address, fences, reads every other rank's, shares a node attribute
with its node's other ranks, and prints what it saw.

usage: python pmi2_rank.py LIBRARY [abort]
"""

import ctypes
import os
import sys

library = ctypes.CDLL(sys.argv[1])
spawned, size, rank, appnum = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
assert library.PMI2_Init(ctypes.byref(spawned), ctypes.byref(size), ctypes.byref(rank), ctypes.byref(appnum)) == 0
jobid = ctypes.create_string_buffer(256)
assert library.PMI2_Job_GetId(jobid, 256) == 0
if sys.argv[2:] == ["abort"] and rank.value == 1:
    library.PMI2_Abort(1, b"rank 1 gives up")
assert library.PMI2_KVS_Put(f"addr-{rank.value}".encode(), f"value-{rank.value};x".encode()) == 0
assert library.PMI2_KVS_Fence() == 0
seen = []
for other in range(size.value):
    value, length = ctypes.create_string_buffer(1024), ctypes.c_int()
    assert library.PMI2_KVS_Get(jobid, -1, f"addr-{other}".encode(), value, 1024, ctypes.byref(length)) == 0
    seen.append(value.value.decode())
mapping, found = ctypes.create_string_buffer(1024), ctypes.c_int()
assert library.PMI2_Info_GetJobAttr(b"PMI_process_mapping", mapping, 1024, ctypes.byref(found)) == 0
attribute = ctypes.create_string_buffer(1024)
if os.environ["LOCAL_RANK"] == "0":
    assert library.PMI2_Info_PutNodeAttr(b"shared", f"from-{rank.value}".encode()) == 0
else:  # waits until its node's first rank put it
    library.PMI2_Info_GetNodeAttr(b"shared", attribute, 1024, ctypes.byref(found), 1)
assert library.PMI2_Finalize() == 0
print(f"rank={rank.value} size={size.value} jobid={jobid.value.decode()} mapping={mapping.value.decode()} "
      f"seen={','.join(seen)} attribute={attribute.value.decode()}", flush=True)
