"""Programs that try to run outside their gang's slot, or to take more of a node than a job may, for the
enforcement tests, the chaos run and `gang bench hostile`.

Each is the text of a Python program (``python3 -c PROGRAM ARGS``)."""

# A POSIX timer (timer_create, SIGEV_SIGNAL) sends the task SIGCONT every 5 ms while it spins, for
# argv[1] seconds of the clock (for ever if none). Its SIGCONT handler is there because a kernel drops
# a timer's ignored signals. A SIGSTOP that comes while the timer's signal is pending can leave the
# timer disarmed for good (Linux 6.18), so the task may stop resuming itself: RESUMES_OTHERS does not.
RESUMES_ITSELF = """
import ctypes, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("rest", ctypes.c_byte * 48)]
class TimeSpec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", TimeSpec), ("value", TimeSpec)]
signal.signal(signal.SIGCONT, lambda *_: None)
event = SigEvent(signo=signal.SIGCONT, notify=0)
timer = ctypes.c_void_p()
assert libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer)) == 0
every = TimeSpec(0, 5_000_000)
assert libc.timer_settime(timer, 0, ctypes.byref(ITimerSpec(every, every)), None) == 0
end = time.monotonic() + float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
while time.monotonic() < end:
    pass
"""

# Sends SIGCONT every 5 ms, for argv[1] seconds, to the tasks of the cluster whose progress files are below
# argv[2] (gangsched.deploy.local.progress_folder):
# those of the jobs argv[3:], or of every job but its own if none are named.
RESUMES_OTHERS = """
import os, signal, sys, time
seconds, below, named = float(sys.argv[1]), sys.argv[2] + "/", set(sys.argv[3:])
own = os.environ.get("GANG_JOB_ID")
def targets():
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = dict(item.split("=", 1) for item in
                          open(f"/proc/{entry}/environ", "rb").read().decode(errors="replace").split("\\0")
                          if "=" in item)
        except (OSError, ValueError):
            continue
        job = fields.get("GANG_JOB_ID")
        if fields.get("GANG_PROGRESS_FILE", "").startswith(below) and job != own and (not named or job in named):
            found.append(int(entry))
    return found
end = time.monotonic() + seconds
found, looked = [], 0.0
while time.monotonic() < end:
    if time.monotonic() - looked > 0.5:
        found, looked = targets(), time.monotonic()
    for pid in found:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
    time.sleep(0.005)
"""

# PMI-1 as MPICH speaks it: argv[1] puts of a 1,000-byte value (until the node refuses one, if none is given),
# then a fence and finalize; a refused put ends it with status 3
PMI_FLOOD = """
import os, socket, sys
connection = socket.socket(fileno=int(os.environ["PMI_FD"]))
reader = connection.makefile("rb")
def command(line):
    connection.sendall(line.encode() + b"\\n")
    return reader.readline().decode()
command("cmd=init pmi_version=1 pmi_subversion=1")
name = command("cmd=get_my_kvsname").split("kvsname=")[1].split()[0]
puts = int(sys.argv[1]) if len(sys.argv) > 1 else None
number = 0
while puts is None or number < puts:
    answer = command(f"cmd=put kvsname={name} key=k{os.environ['PMI_RANK']}-{number} value={'v' * 1000}")
    if "rc=0" not in answer:
        print("refused at", number, answer.strip(), flush=True)
        sys.exit(3)
    number += 1
print(command("cmd=barrier_in").strip(), flush=True)
command("cmd=finalize")
"""
