"""A worker whose sweep is gone exits even when no one reads its stderr any more.

A sweep killed with its terminal or pipeline takes the reader of its workers' stderr with it. The
worker's watch (hydra_plugins/scaling_sweeper/processes.py) must still end the worker: before this
test, the farewell line raised BrokenPipeError in the watch thread, the thread died, and the worker
lived on, blocked, for good.
"""

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import sys, threading, time
    from hydra_plugins.scaling_sweeper import processes
    sys.stdin.readline()  # the test has closed the read end of our stderr by now
    not_our_parent = -1
    threading.Thread(target=processes._watch, args=(not_our_parent,), daemon=True).start()
    time.sleep(30)
    sys.exit(0)  # reached only if the watch failed to end this process
    """
)


def test_an_orphaned_worker_exits_even_when_its_stderr_is_a_broken_pipe():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    child.stderr.close()  # no reader: the farewell line meets EPIPE
    child.stdin.write(b"go\n")
    child.stdin.close()
    rc = child.wait(timeout=25)
    assert rc in (-15, 143), rc  # ended by the watch's SIGTERM (default handler) or its exit 143
