"""The POSIX shared memory that an MPI job's ranks leave in /dev/shm when they do not finalize.

MPICH keeps one segment per job and node in /dev/shm and unlinks it in
``MPI_Finalize``; a rank that is cancelled, killed or crashes never gets there,
and the file stays (a megabyte or more each) until the machine reboots. The node
daemon notes the files in /dev/shm that an MPI task's processes map (from
/proc/PID/maps, at each PMI exchange and before it ends the task), and once the
job's last task on the node is gone it removes those that the job's user owns.
Files the ranks never mapped, or that belong to anyone else, are left alone.
"""

import os
import stat
from collections.abc import Iterable
from pathlib import Path

SHM = Path("/dev/shm")
_PREFIX = os.fsencode(SHM) + b"/"
_DELETED = b" (deleted)"


def mapped_files(pids: Iterable[int]) -> set[str]:
    """The names of the files directly in /dev/shm that these processes map."""
    names: set[str] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as maps:
                for line in maps:
                    fields = line.rstrip(b"\n").split(maxsplit=5)
                    if len(fields) == 6 and fields[5].startswith(_PREFIX):
                        name = fields[5][len(_PREFIX):].removesuffix(_DELETED)
                        if b"/" not in name:
                            names.add(os.fsdecode(name))
        except OSError:  # gone, or not ours to read
            continue
    return names


def remove_owned(names: Iterable[str], uid: int) -> list[str]:
    """Unlink the regular files among ``names`` that ``uid`` owns; the names removed."""
    removed: list[str] = []
    try:
        folder = os.open(SHM, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return removed
    try:
        for name in sorted(names):
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_uid == uid:
                    os.unlink(name, dir_fd=folder)
                    removed.append(name)
            except OSError:  # unlinked by its job meanwhile
                continue
    finally:
        os.close(folder)
    return removed


class JobSharedMemory:
    """The /dev/shm files each MPI job's tasks on this node were seen to map."""

    def __init__(self) -> None:
        self._files: dict[int, set[str]] = {}

    def note(self, job_id: int, pids: Iterable[int]) -> None:
        self._files.setdefault(job_id, set()).update(mapped_files(pids))

    def release(self, job_id: int, uid: int) -> list[str]:
        """The job's last task here is gone: remove what its ranks left."""
        return remove_owned(self._files.pop(job_id, set()), uid)
