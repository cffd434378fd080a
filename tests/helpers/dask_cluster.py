"""A Dask cluster on 127.0.0.1 for the ``bake-pack --cluster`` tests, started with
``distributed``'s own classes, and a worker plugin that makes one pack file kill its worker."""

from __future__ import annotations

import os
import signal
from typing import Any

from distributed import WorkerPlugin


class KillOnFile(WorkerPlugin):
    """A worker process that starts a task of a file whose name holds ``word`` kills itself
    (SIGKILL), as a clip that crashes its importer would."""

    name = "kill-on-file"

    def __init__(self, word: str) -> None:
        self.word = word

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish == "executing" and str(key).startswith("marionette-") and self.word in str(key):
            os.kill(os.getpid(), signal.SIGKILL)


def worker_pids(client: Any) -> dict[str, int]:
    return dict(client.run(os.getpid))


class RemoveOnStart(WorkerPlugin):
    """A worker that starts a task of a pack file first removes that file from ``folder``: the
    client read it already (``--ship-inputs``), and a worker that read it by its path would fail."""

    name = "remove-on-start"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish != "executing" or not str(key).startswith("marionette-"):
            return
        stems = str(key).split("-", 2)[2].rsplit("-", 1)[0].split("+")  # marionette-<file>-<stem>[+<stem>...]-<hex>
        for name in os.listdir(self.folder):
            if os.path.splitext(name)[0] in stems:
                os.remove(os.path.join(self.folder, name))


def shipped_leftovers() -> list[str]:
    """In a worker: the private folders of shipped files left in its temporary folder."""
    import glob
    import tempfile

    return glob.glob(os.path.join(tempfile.gettempdir(), "marionette_shipped_*"))
