"""Scripts that run nbspam in a child process with a fault injected, for crash tests."""

# `nbspam ARGS...` (argv[2:]) killed with SIGKILL on its argv[1]-th call of os.fsync.
KILL_AT_FSYNC = """
import os, signal, sys
calls, kill_at, real_fsync = 0, int(sys.argv[1]), os.fsync
def fsync(fd):
    global calls
    calls += 1
    if calls == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    real_fsync(fd)
os.fsync = fsync
from nbspam.cli.commands import main
sys.argv = ["nbspam", *sys.argv[2:]]
main()
"""
