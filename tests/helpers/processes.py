"""Waiting on a running command by what it writes, not by polling: the tests that press Ctrl-C mid-run."""

import os
import selectors
import time


def read_stderr_until(process, done, timeout):
    """The bytes `process` writes to its stderr (a pipe) up to the first moment `done(bytes so far)` holds, the
    pipe closes (the process ended), or `timeout` seconds pass. Blocks in select() between writes, so it wakes on
    the command's own output (its progress bar) rather than on a clock."""
    seen, deadline = b"", time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr.fileno(), selectors.EVENT_READ)
        while not done(seen):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                break  # timed out: the caller's assertion says what was seen
            chunk = os.read(process.stderr.fileno(), 4096)
            if not chunk:
                break  # the process closed its stderr: it ended
            seen += chunk
    return seen
