"""A Batch Bake worker ends when the process that started it ends, however that one ended.

A worker waiting for work notices its parent's end on its own: the connection closes. A worker
stuck on a file (an importer that hangs, a read that never returns) does not, and would be left
running after ``kill -9`` of the main process. So each worker, first thing:

* on Linux asks the kernel to kill it when its parent ends (``prctl(PR_SET_PDEATHSIG,
  SIGKILL)``, through ctypes), which works whatever the worker is doing;
* everywhere, checks that its parent is still the one that started it (a parent that died before
  the request was made) and keeps checking in a thread: an orphan is given another parent, so
  ``os.getppid()`` changes. The thread can act while the worker waits in a system call (a read,
  an ``open`` of a named pipe); on Windows, where a process keeps its parent id, it never fires.

The kernel's request concerns the parent *thread* that started the worker: workers are started
from the main process's main thread.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

#: Environment variable carrying the main process's id to a worker started as a new program.
PARENT_ENVIRONMENT = "MARIONETTE_BATCH_PARENT"
_PR_SET_PDEATHSIG = 1


def _kernel_kills_on_parent_death() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError, ValueError):
        return False


def _watch(parent: int, every: float) -> None:
    while True:
        time.sleep(every)
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int | None = None, every: float = 0.5) -> None:
    """Make this process end when ``parent`` (default: the id in :data:`PARENT_ENVIRONMENT`, else
    the current parent) ends; exits at once when it has ended already."""
    if parent is None:
        parent = int(os.environ.pop(PARENT_ENVIRONMENT, "0") or 0) or os.getppid()
    _kernel_kills_on_parent_death()
    if os.getppid() != parent:
        os._exit(1)  # the parent ended before the request above was made
    threading.Thread(target=_watch, args=(parent, every), name="parent-watch", daemon=True).start()
