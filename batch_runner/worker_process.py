"""What a Batch Bake worker process sets up about itself, and what it says about itself.

:func:`die_with_parent`: a worker ends when the process that started it ends, however that one
ended. :func:`openblas_threads` lets a process run numpy's OpenBLAS on one thread (one process per
core already); :func:`peak_memory_mb` is what a worker reports of its memory.

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
from pathlib import Path
from typing import Any

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


def peak_memory_mb() -> float:
    """This process's peak resident memory (0 where the platform does not say).

    On Linux the kernel's high-water mark of this program (``VmHWM``): ``ru_maxrss`` would also
    count the parent's memory at the fork that started this process."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (2**20 if sys.platform == "darwin" else 1024)  # bytes on macOS, KiB elsewhere


def openblas_threads() -> tuple[Any, Any] | None:
    """The ``(get, set)`` thread-count functions of the OpenBLAS that numpy uses, when it is one
    bundled with the numpy wheel (Blender's and pip's); ``None`` otherwise."""
    import ctypes

    import numpy as np

    here = Path(np.__file__).resolve().parent
    for path in (*here.parent.glob("numpy.libs/*openblas*"), *here.glob(".libs/*openblas*"), *here.glob(".dylibs/*openblas*")):
        try:
            lib = ctypes.CDLL(str(path))  # the library numpy already loaded: same handle
        except OSError:
            continue
        for suffix in ("64_", "_64_", ""):
            get = getattr(lib, "openblas_get_num_threads" + suffix, None)
            put = getattr(lib, "openblas_set_num_threads" + suffix, None)
            if get is not None and put is not None:
                return get, put
    return None
