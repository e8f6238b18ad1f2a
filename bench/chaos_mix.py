"""The chaos run's steady mix of jobs (bench/chaos.py): one thread submits, seeded."""

import getpass
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from gangsched.client.connection import MasterUnreachable, RequestRefused
from gangsched.client.master_client import MasterClient
from gangsched.deploy.local import progress_folder
from gangsched.deploy.unix_accounts import remove_unix_account, unix_account
from gangsched.jobs.adversaries import RESUMES_ITSELF, RESUMES_OTHERS
from gangsched.jobs.mpi_environments import ensure
from gangsched.jobs.mpi_programs import MpiUnavailable
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol.array_ranges import IndexRange
from gangsched.protocol.records import JobInfo, JobSpec, MpiKind, UserInfo

SECOND_ACCOUNT = "gangchaos"
# how often each kind comes: mostly plain work, some of everything else
KINDS = {"synthetic": 4, "shell": 4, "mpi": 2, "array": 1, "after_ok": 2, "after_any": 1, "second_account": 2,
         "resumes_itself": 1, "resumes_others": 1}
_RETRY_S = 20.0  # a submission is tried again this long while the master does not answer
_ADVERSARY_S = 3.0  # how long a self-resuming or resuming job tries


@dataclass(frozen=True)
class Accepted:
    kind: str
    spec: JobSpec


class ChaosMix(threading.Thread):
    def __init__(self, master: str, home: Path, seed: int, nodes: int, mpi: bool) -> None:
        super().__init__(daemon=True)
        self.master = master  # its endpoint: set once the cluster is up, before the thread starts
        self.keys: Path | None = None  # the cluster's keys, where it has them
        self._home, self._nodes = home, nodes
        self._random = random.Random(seed)
        self._stopping = threading.Event()
        self.accepted: dict[int, Accepted] = {}
        self.refused: Counter[str] = Counter()  # submissions the master refused or never answered, by why
        self._lock = threading.Lock()
        account = unix_account(SECOND_ACCOUNT)
        self._second_account: str | None = account[0].pw_name if account else None
        self._made_account = account is not None and account[1]
        self._mpi_program: str | None = None
        if mpi:
            try:
                self._mpi_program = str(ensure("mpich").build("allreduce", home / "programs"))
            except MpiUnavailable:
                pass
        self._user = getpass.getuser()

    def run(self) -> None:
        kinds = [kind for kind in KINDS if (kind != "mpi" or self._mpi_program)
                 and (kind != "second_account" or self._second_account)]
        weights = [KINDS[kind] for kind in kinds]
        with MasterClient(self.master, timeout_s=2.0, keys=self.keys) as client:
            # about one job a second: what 3 nodes of 2 cores serve with the faults (a faster mix only
            # grows a queue the end has to wait out)
            while not self._stopping.wait(self._random.uniform(0.4, 1.6)):
                kind = self._random.choices(kinds, weights)[0]
                spec, array = self._spec(kind)
                try:
                    job_ids = client.submit_jobs(spec, array, retry_s=_RETRY_S)
                except (RequestRefused, MasterUnreachable) as error:
                    with self._lock:
                        self.refused[re.sub(r"\d+", "N", str(error).splitlines()[0])[:100]] += 1
                    continue
                with self._lock:
                    for job_id in job_ids:
                        self.accepted[job_id] = Accepted(kind, spec)

    def stop(self) -> None:
        self._stopping.set()
        self.join()

    def drain(self, client: MasterClient, stall_s: float) -> tuple[dict[int, JobInfo], list[UserInfo]]:
        """Every accepted job as the master has it once all have ended, or once none has ended for
        ``stall_s`` (those left are then the run's finding), and the users."""
        ids = sorted(self.accepted)
        ended, progress = -1, time.monotonic()
        while True:
            try:
                jobs = {info.job_id: info for info in client.jobs(ids)}
                now_ended = sum(info.state.is_final for info in jobs.values())
                if now_ended == len(ids) or time.monotonic() - progress > stall_s:
                    return jobs, client.users()
                if now_ended > ended:
                    ended, progress = now_ended, time.monotonic()
            except MasterUnreachable:
                if time.monotonic() - progress > stall_s:
                    raise
            time.sleep(0.5)

    def close(self) -> None:
        if self._made_account and self._second_account:
            remove_unix_account(self._second_account)

    def _spec(self, kind: str) -> tuple[JobSpec, list[IndexRange] | None]:
        pick = self._random
        tasks = pick.randint(1, self._nodes)
        shell = ["sh", "-c", f"echo start; sleep {pick.uniform(0.1, 1.5):.2f}; echo done"]
        array = None
        base = {"name": kind, "user": self._user, "tasks": tasks, "argv": shell}
        if kind == "synthetic":
            program = SyntheticJob("compute", iterations=pick.randint(20, 80), compute_ms=5.0)
            base.update(argv=program.argv(), migratable=program.migratable)
        elif kind == "mpi":
            assert self._mpi_program is not None
            base.update(argv=[self._mpi_program, "--iterations", "300", "--grain-ms", "1"], tasks=2,
                        mpi=MpiKind.PMI1)
        elif kind == "array":
            array = [(0, pick.randint(1, 3), 1)]
        elif kind in ("after_ok", "after_any"):
            with self._lock:
                recent = sorted(self.accepted)[-10:]
            if recent:
                base[kind] = [pick.choice(recent)]
        elif kind == "second_account":
            base.update(user=self._second_account)
        elif kind == "resumes_itself":
            base.update(argv=["python3", "-c", RESUMES_ITSELF, str(_ADVERSARY_S)], tasks=1)
        elif kind == "resumes_others":
            base.update(argv=["python3", "-c", RESUMES_OTHERS, str(_ADVERSARY_S),
                                   str(progress_folder(self._home))], tasks=1)
        return JobSpec(**base), array
