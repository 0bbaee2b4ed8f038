"""Who runs a background job: this process, named so that a restarted process with a reused pid is not taken for
it. A job whose runner is no longer alive is stale and may be run again (Chat's thought jobs)."""

from __future__ import annotations

import functools
import os
import uuid


@functools.cache
def _process_token() -> str:
    return uuid.uuid4().hex[:8]


def runner() -> str:
    """Who runs a thought job: this process (the pid alone could be a reused one after a restart)."""
    return f"{os.getpid()}:{_process_token()}"


def runner_alive(name: str | None) -> bool:
    """Whether the process that `name` (a `runner()`) stands for is still running."""
    if not name:
        return False
    if name == runner():
        return True
    pid = int(name.split(":", 1)[0])
    if pid == os.getpid():      # our pid, another token: an earlier process with the same pid
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # alive, owned by another user
        return True
    return True
