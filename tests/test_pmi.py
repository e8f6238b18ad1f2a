"""The node's PMI-1 server as plain code: the lines MPICH sends, barriers, bad input (noded/pmi.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.noded.process_managers.fences import PmiError, process_mapping
from gangsched.noded.process_managers.pmi1 import LineReader, Pmi1Job
from gangsched.noded.task_record import World


def lines(outcome) -> dict[int, str]:
    return {reply.rank: reply.line.decode() for reply in outcome.replies}


def test_init_and_the_questions_mpich_asks_are_answered():
    job = Pmi1Job(world=World(7, 0), size=2, block=[2], node_index=0)
    assert lines(job.handle(0, b"cmd=init pmi_version=1 pmi_subversion=1")) == {
        0: "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"}
    assert (
        lines(job.handle(0, b"cmd=get_maxes"))[0] == "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024 rc=0\n"
    )
    assert lines(job.handle(0, b"cmd=get_my_kvsname"))[0] == "cmd=my_kvsname kvsname=gang-7 rc=0\n"
    assert lines(job.handle(0, b"cmd=get kvsname=gang-7 key=PMI_process_mapping"))[0] == \
        "cmd=get_result rc=0 value=(vector,(0,1,2))\n"
    assert lines(job.handle(0, b"cmd=get kvsname=gang-7 key=PMI_hwloc_xmlfile"))[0] == \
        "cmd=get_result rc=-1 msg=key_not_found\n"


def test_the_process_mapping_says_which_ranks_share_a_node():
    assert process_mapping([1, 1, 1, 1]) == "(vector,(0,4,1))"
    assert process_mapping([2, 2, 1]) == "(vector,(0,2,2),(2,1,1))"


def test_a_barrier_of_one_node_ends_when_its_last_rank_enters():
    job = Pmi1Job(world=World(1, 0), size=2, block=[2], node_index=0)
    job.handle(0, b"cmd=put kvsname=gang-1 key=a value=1")
    assert job.handle(0, b"cmd=barrier_in").replies == []
    outcome = job.handle(1, b"cmd=barrier_in")
    assert lines(outcome) == {0: "cmd=barrier_out rc=0\n", 1: "cmd=barrier_out rc=0\n"}
    assert outcome.fence is None


def test_a_barrier_across_nodes_fences_through_the_master_and_brings_every_put():
    first = Pmi1Job(world=World(1, 0), size=2, block=[1, 1], node_index=0)
    second = Pmi1Job(world=World(1, 0), size=2, block=[1, 1], node_index=1)
    first.handle(0, b"cmd=put kvsname=gang-1 key=addr-0 value=x")
    second.handle(1, b"cmd=put kvsname=gang-1 key=addr-1 value=y")
    fences = [first.handle(0, b"cmd=barrier_in").fence, second.handle(1, b"cmd=barrier_in").fence]
    assert [fence.kvs for fence in fences] == [{"addr-0": "x"}, {"addr-1": "y"}]
    merged = {"addr-0": "x", "addr-1": "y"}  # what the master sends every node
    assert lines(first.fence_done(0, merged)) == {0: "cmd=barrier_out rc=0\n"}
    assert lines(first.handle(0, b"cmd=get kvsname=gang-1 key=addr-1"))[0] == "cmd=get_result rc=0 value=y\n"
    assert first.fence_done(0, merged).replies == []  # an answer twice is answered once


def test_abort_fails_the_job_naming_the_rank_and_its_message():
    job = Pmi1Job(world=World(1, 0), size=4, block=[4], node_index=0)
    outcome = job.handle(2, b"cmd=abort exitcode=5 message=application called MPI_Abort")
    assert outcome.failure.rank == 2
    assert outcome.failure.reason == "called PMI abort with exit code 5: application called MPI_Abort"


def test_a_malformed_line_gets_an_error_reply_and_fails_the_job():
    job = Pmi1Job(world=World(1, 0), size=1, block=[1], node_index=0)
    for bad in (b"hello", b"cmd=put kvsname=other key=a value=b", b"cmd=frobnicate", b"cmd=init pmi_version=2",
                b"cmd=get kvsname=gang-1 key=" + b"k" * 300, b"cmd=put novalue", b"cmd=\xff"):
        outcome = job.handle(0, bad)
        assert outcome.failure is not None and "malformed" in outcome.failure.reason, bad
        assert outcome.replies[0].line.startswith(b"cmd=error rc=-1 msg=")


def test_a_line_without_an_end_is_an_error_once_it_is_too_long():
    reader = LineReader()
    assert reader.feed(b"cmd=get_maxes\ncmd=get_ap") == [b"cmd=get_maxes"]
    assert reader.feed(b"pnum\n") == [b"cmd=get_appnum"]
    try:
        reader.feed(b"x" * 5000)
    except PmiError:
        return
    raise AssertionError("a 5000-byte line was taken")


KNOWN = [b"cmd=init pmi_version=1 pmi_subversion=1", b"cmd=get_maxes", b"cmd=barrier_in", b"cmd=finalize",
         b"cmd=put kvsname=gang-1 key=k value=v", b"cmd=get kvsname=gang-1 key=k", b"cmd=abort exitcode=1"]


@settings(max_examples=2000)
@given(st.lists(st.tuples(st.integers(0, 2), st.one_of(st.binary(max_size=80), st.sampled_from(KNOWN),
                                                      st.sampled_from(KNOWN).map(lambda line: line[:-3]))),
                max_size=30))
def test_a_fuzzed_peer_never_breaks_the_server(steps):
    """Random and cut-off lines from any rank: every one is answered or fails the job, none raises."""
    job = Pmi1Job(world=World(1, 0), size=3, block=[3], node_index=0)
    reader = LineReader()
    for rank, data in steps:
        try:
            received = reader.feed(data + b"\n")
        except PmiError:
            continue
        for line in received:
            outcome = job.handle(rank, line)
            assert all(reply.line.endswith(b"\n") and reply.line.count(b"\n") == 1 for reply in outcome.replies)
