"""The thread a node daemon's launches run in (noded/launch_thread.py): the work runs beside the caller,
its end is told on a descriptor, and what it returned or raised comes back."""

import select
import threading

import pytest

from gangsched.noded.launch_thread import LaunchThread
from gangsched.noded.spawn import spawn


def test_work_runs_beside_the_caller_and_its_outcome_comes_back_once_its_descriptor_says_so():
    launches = LaunchThread()
    go = threading.Event()
    launches.start(lambda: (go.wait(10), threading.current_thread().name)[1])
    assert not select.select([launches.fd], [], [], 0.2)[0]  # still under way: the caller goes on meanwhile
    go.set()
    assert select.select([launches.fd], [], [], 10)[0]
    assert launches.outcome() == "launches"


def test_what_the_work_raised_is_raised_to_the_caller_and_the_thread_goes_on():
    launches = LaunchThread()
    launches.start(lambda: spawn(["/no/such/program"], {}, []))
    assert select.select([launches.fd], [], [], 10)[0]
    with pytest.raises(FileNotFoundError):
        launches.outcome()
    launches.start(lambda: 7)
    assert select.select([launches.fd], [], [], 10)[0]
    assert launches.outcome() == 7
