"""The POSIX shared memory that an MPI job's ranks leave in /dev/shm when they do not finalize.

MPICH keeps one segment per job and node in /dev/shm and unlinks it in
``MPI_Finalize``; a rank that is cancelled, killed or crashes never gets there,
and the file stays (a megabyte or more each) until the machine reboots. The node
daemon notes the files in /dev/shm that an MPI task's processes map (from
/proc/PID/maps, at each PMI exchange and before it ends the task), and once the
job's last task on the node is gone it removes those that the job's user owns.
Files the ranks never mapped, or that belong to anyone else, are left alone.

What it noted is also written down in the node's spool, a file per job: a daemon
killed with SIGKILL forgets it (its watchdog kills the tasks, but knows no names),
and the next daemon of the node removes what the notes name before it runs a task.
"""

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from gangsched.noded.task_record import World

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
    """The /dev/shm files each MPI job's tasks on this node were seen to map, noted in ``notes`` too."""

    def __init__(self, notes: Path) -> None:
        """Made as the daemon starts, before any task: what the notes of an earlier daemon name is removed."""
        self._notes = notes
        self._files: dict[World, set[str]] = {}
        notes.mkdir(parents=True, exist_ok=True)
        for note in notes.glob("job-*"):
            try:
                uid, *names = note.read_text().split("\n")
                remove_owned([name for name in names if name], int(uid))
            except (OSError, ValueError):
                pass
            note.unlink(missing_ok=True)

    def note(self, world: World, pids: Iterable[int]) -> None:
        pids = list(pids)
        known = self._files.setdefault(world, set())
        new = mapped_files(pids) - known
        if not new:
            return
        known |= new
        path = self._notes / world.name
        try:
            if not path.exists():  # its user's id first: only their files are removed
                path.write_text(f"{os.stat(f'/proc/{pids[0]}').st_uid}\n")
            with open(path, "a") as note:
                note.write("".join(f"{name}\n" for name in sorted(new)))
        except OSError:  # the task is gone, or the spool full: the daemon still removes them when it can
            pass

    def release(self, world: World, uid: int) -> list[str]:
        """The step's last task here is gone: remove what its ranks left."""
        (self._notes / world.name).unlink(missing_ok=True)
        return remove_owned(self._files.pop(world, set()), uid)
