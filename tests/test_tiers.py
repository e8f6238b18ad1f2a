"""The fast tier starts no process (docs/architecture.md, "Tests in tiers"): tests/conftest.py refuses every
way Python starts one to a test not marked for a tier that may."""

import multiprocessing
import os
import subprocess

import pytest

from tests.helpers.tiers import ProcessInFastTier


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"], check=False),
    lambda: os.system("true"),
    lambda: os.fork(),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
])
def test_a_test_of_the_fast_tier_cannot_start_a_process(start):
    with pytest.raises(ProcessInFastTier, match="test_a_test_of_the_fast_tier_cannot_start_a_process.* starts a "
                       "process: mark it live or docker or mpi"):
        start()


@pytest.mark.live
def test_a_live_test_may():
    assert subprocess.run(["true"], check=False).returncode == 0
