"""What runs inside the cluster: the task runtime library, the synthetic barrier
and phased programs of the papers, and the I/O server they write to.
"""
