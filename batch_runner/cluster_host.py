"""``--cluster local:N``'s Dask cluster, in a process of its own forked before Blender loads.

A Dask ``LocalCluster`` started inside the command line's process runs its scheduler and nannies
on that process's event loop, where they compete with the writing of every Action for the
interpreter, and it spawns its workers as fresh programs that import Python, numpy, Dask and the
add-on again (about a second of a core each), while this process loads Blender. Here instead, on
Linux and before Blender is loaded (:func:`.worker_pool.can_fork_workers`), the command line forks
a *host*: it imports Dask (while the command line imports it too), starts the scheduler and the nannies, and its nannies fork the workers
from it (``multiprocessing-method: fork``), so they start with the add-on imported and begin
reading the pack while Blender loads. The host never loads Blender, so a worker the nanny starts
again after a loss is a clean fork too.

The host and its workers form a process group of their own (Ctrl-C in the terminal is for the
command line, which decides what it means) and end with the command line, however it ends.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection, Pipe
from typing import Any

from .worker_pool import fork_child
from .worker_process import die_with_parent


def _host(n: int, conn: Connection, parent: int, settings: dict[str, Any], reading: tuple[str, Sequence[Sequence[str]]]) -> None:
    os.setsid()
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import dask
    from distributed import LocalCluster

    from .cluster_worker import ReadFirst

    run, lists = reading
    plugins = (ReadFirst(run, [list(x) for x in lists]),) if lists else ()

    dask.config.set({"distributed.worker.multiprocessing-method": "fork", **settings})
    cluster = LocalCluster(
        n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None, silence_logs=40, plugins=tuple(plugins)
    )
    conn.send(cluster.scheduler_address)
    while cluster.status.name not in ("closing", "closed"):  # until the command line ends it, or ends
        time.sleep(1.0)


class ForkedCluster:
    """A local Dask cluster of ``n`` single-thread workers in a forked host process (see the
    module docstring; ``reading``: the run's id and, per worker, the BVH files it reads from its
    start on, :class:`.cluster_worker.ReadFirst`). Offers what :class:`.cluster.ClusterPool` uses of a ``LocalCluster``:
    :attr:`scheduler_address` (once :meth:`wait` returned) and :meth:`close`."""

    def __init__(self, n: int, settings: dict[str, Any], reading: tuple[str, Sequence[Sequence[str]]] = ("", ())) -> None:
        here, there = Pipe(duplex=False)
        parent = os.getpid()

        def host() -> int:  # the forked host: never returns into the caller
            here.close()
            _host(n, there, parent, settings, reading)
            return 0

        pid = fork_child(host)
        there.close()
        self.pid = pid
        self._conn = here
        self.scheduler_address: str | None = None

    def wait(self, timeout: float) -> str:
        """The scheduler's address, once the host has started it."""
        deadline = time.monotonic() + timeout
        while not self._conn.poll(0.05):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local cluster did not start within {timeout:g} s")
            if os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                self.pid = 0
                raise OSError("the local cluster's process ended while starting")
        self.scheduler_address = str(self._conn.recv())
        return self.scheduler_address

    def close(self) -> None:
        """End the host and its workers at once (everything they computed has arrived)."""
        self._conn.close()
        if not self.pid:
            return
        for kill in (os.killpg, os.kill):  # its group, once it has made one
            try:
                kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = 0
