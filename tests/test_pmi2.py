"""The node's PMI-2 server as plain code: the commands Intel MPI sends, fences, node attributes and bad
input (noded/process_managers/pmi2.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.noded.process_managers.pmi2 import FRAME_MAX, FrameReader, Pmi2Job, Pmi2OrPmi1Job, frame, parse
from gangsched.noded.task_record import World

INIT = b"cmd=init pmi_version=2 pmi_subversion=0\n"


def replies(outcomes) -> dict[int, list[dict[str, str]]]:
    """Each rank's replies, as the fields of each."""
    found: dict[int, list[dict[str, str]]] = {}
    for outcome in outcomes:
        for reply in outcome.replies:
            if reply.line.startswith(b"cmd=response_to_init"):
                found.setdefault(reply.rank, []).append({"cmd": "response_to_init"})
                continue
            length, body = int(reply.line[:6]), reply.line[6:]
            assert length == len(body)
            name, fields = parse(body)
            found.setdefault(reply.rank, []).append({"cmd": name, **fields})
    return found


def command(name: str, **fields: str) -> bytes:
    return frame(name, **fields)


def started(job: Pmi2Job, rank: int) -> None:
    answered = replies(job.received(rank, INIT + command("fullinit", pmijobid="gang-7", pmirank=str(rank),
                                                         threaded="FALSE")))
    assert answered[rank][0] == {"cmd": "response_to_init"}
    assert answered[rank][1]["cmd"] == "fullinit-response" and answered[rank][1]["rank"] == str(rank)


def test_the_opening_commands_intel_mpi_sends_are_answered():
    job = Pmi2Job(world=World(7, 0), size=2, block=[2], node_index=0)
    started(job, 0)
    full = replies(job.received(1, INIT + command("fullinit", pmijobid="gang-7", pmirank="1", threaded="FALSE")))
    assert full[1][1] == {"cmd": "fullinit-response", "rc": "0", "pmi-version": "2", "pmi-subversion": "0",
                          "rank": "1", "size": "2", "appnum": "0", "debugged": "FALSE", "pmiverbose": "FALSE"}
    assert replies(job.received(0, command("job-getid")))[0] == [{"cmd": "job-getid-response", "rc": "0",
                                                                  "jobid": "gang-7"}]
    mapping = replies(job.received(0, command("info-getjobattr", key="PMI_process_mapping")))[0][0]
    assert mapping["found"] == "TRUE" and mapping["value"] == "(vector,(0,1,2))"
    assert replies(job.received(0, command("info-getjobattr", key="universeSize")))[0][0]["found"] == "FALSE"


def test_a_command_may_come_in_pieces_and_several_in_one_read():
    job = Pmi2Job(world=World(7, 0), size=1, block=[1], node_index=0)
    whole = INIT + command("fullinit", pmirank="0") + command("job-getid")
    outcomes = [outcome for piece in (whole[:5], whole[5:50], whole[50:]) for outcome in job.received(0, piece)]
    assert [reply["cmd"] for reply in replies(outcomes)[0]] == ["response_to_init", "fullinit-response",
                                                                "job-getid-response"]


def test_a_waiting_node_attribute_is_answered_once_it_is_put():
    job = Pmi2Job(world=World(1, 0), size=2, block=[2], node_index=0)
    started(job, 0)
    started(job, 1)
    assert replies(job.received(1, command("info-getnodeattr", key="shm", wait="TRUE"))) == {}
    assert replies(job.received(1, command("info-getnodeattr", key="other", wait="FALSE")))[1][0]["found"] == "FALSE"
    answered = replies(job.received(0, command("info-putnodeattr", key="shm", value="/dev/shm/x;y")))
    assert answered[0] == [{"cmd": "info-putnodeattr-response", "rc": "0"}]
    assert answered[1] == [{"cmd": "info-getnodeattr-response", "rc": "0", "found": "TRUE", "value": "/dev/shm/x;y"}]


def test_a_fence_across_nodes_goes_to_the_master_and_brings_every_put():
    first = Pmi2Job(world=World(1, 0), size=2, block=[1, 1], node_index=0)
    second = Pmi2Job(world=World(1, 0), size=2, block=[1, 1], node_index=1)
    started(first, 0)
    started(second, 1)
    first.received(0, command("kvs-put", key="addr-0", value="x"))
    second.received(1, command("kvs-put", key="addr-1", value="y"))
    fences = [first.received(0, command("kvs-fence"))[0].fence, second.received(1, command("kvs-fence"))[0].fence]
    assert [fence.kvs for fence in fences] == [{"addr-0": "x"}, {"addr-1": "y"}]
    assert replies([first.fence_done(0, {"addr-0": "x", "addr-1": "y"})])[0] == [{"cmd": "kvs-fence-response",
                                                                                   "rc": "0"}]
    got = replies(first.received(0, command("kvs-get", jobid="gang-1", srcid="-1", key="addr-1")))[0][0]
    assert got == {"cmd": "kvs-get-response", "rc": "0", "found": "TRUE", "value": "y"}


def test_abort_and_bad_input_fail_the_job_naming_the_rank():
    job = Pmi2Job(world=World(1, 0), size=4, block=[4], node_index=0)
    started(job, 2)
    [outcome] = job.received(2, command("abort", isworld="TRUE", msg="application called MPI_Abort"))
    assert outcome.failure.rank == 2 and outcome.failure.reason == "called PMI-2 abort: application called MPI_Abort"
    [outcome] = job.received(3, b"cmd=init pmi_version=1 pmi_subversion=1\n")
    assert outcome.failure.rank == 3 and "serves PMI-2" in outcome.failure.reason
    for bad in (b"12    cmd=frobnicate;", b"5     nokey", b"abcdef", b"999999" + b"x" * 10):
        job = Pmi2Job(world=World(1, 0), size=1, block=[1], node_index=0)
        outcomes = job.received(0, INIT + bad)
        assert outcomes[-1].failure is not None and "malformed" in outcomes[-1].failure.reason, bad


def test_an_unserved_command_is_refused_without_failing_the_job():
    job = Pmi2Job(world=World(1, 0), size=1, block=[1], node_index=0)
    started(job, 0)
    [outcome] = job.received(0, command("name-publish", service="x", port="x"))
    assert outcome.failure is None and replies([outcome])[0][0]["rc"] == "-1"


def test_semicolons_in_values_survive_the_wire():
    assert parse(frame("kvs-put", key="k", value="a;b;;c")[6:]) == ("kvs-put", {"key": "k", "value": "a;b;;c"})


@settings(max_examples=1000)
@given(st.lists(st.tuples(st.integers(0, 1), st.binary(max_size=60)), max_size=20))
def test_a_fuzzed_peer_never_breaks_the_server(steps):
    """Random bytes from any rank, after or without an init line: answered or failing, never raising."""
    job = Pmi2Job(world=World(1, 0), size=2, block=[2], node_index=0)
    for rank, data in steps:
        for outcome in job.received(rank, data):
            assert all(len(reply.line) < FRAME_MAX + 8 for reply in outcome.replies)


def test_a_frame_longer_than_the_limit_is_refused_before_it_is_read():
    reader = FrameReader()
    reader.feed(INIT)
    try:
        reader.feed(f"{FRAME_MAX + 1:<6}".encode())
    except Exception as error:
        assert "length" in str(error)
        return
    raise AssertionError("an over-long frame was accepted")


def test_pmi2_s_service_speaks_pmi1_to_a_client_that_asks_for_it_as_slurm_s_does():
    """MPICH's simple PMI client asks for version 1 unless told: under --mpi pmi2 its ranks are answered in
    PMI-1's lines, each rank's init held until one of them is whole; a PMI-2 client is answered in PMI-2."""
    job = Pmi2OrPmi1Job(world=World(7, 0), size=2, block=[2], node_index=0)
    assert job.received(1, b"cmd=init pmi_") == [] and job.initialized == set()
    (first,) = job.received(0, b"cmd=init pmi_version=1 pmi_subversion=1\n")
    (second,) = [outcome for outcome in job.received(1, b"version=1 pmi_subversion=1\n")]
    lines = [reply.line for outcome in (first, second) for reply in outcome.replies]
    assert lines == [b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"] * 2
    maxes = [reply.line for outcome in job.received(0, b"cmd=get_maxes\n") for reply in outcome.replies]
    assert maxes[0].startswith(b"cmd=maxes "), "PMI-1 from then on"
    two = Pmi2OrPmi1Job(world=World(8, 0), size=1, block=[1], node_index=0)
    started(two, 0)
