"""A job's own output kept apart from Blender's: stdout carries only the command's result."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO


@contextlib.contextmanager
def job_output(verbose: bool = False) -> Iterator[TextIO]:
    """Run a job with everything it prints (Blender's importers and savers print to stdout and
    stderr, some from C) kept out of the user's terminal, or sent to stderr with ``verbose``, so
    stdout carries only the command's own, machine-readable result and stderr only its lines.

    Yields a stream to the user's stderr for the command's own progress lines."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    user = os.fdopen(os.dup(2), "w", buffering=1)
    sink = os.open(os.devnull, os.O_WRONLY)
    previous = sys.stdout
    try:
        os.dup2(2 if verbose else sink, 1)
        if not verbose:
            os.dup2(sink, 2)
        sys.stdout = sys.stderr
        yield user
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, sink):
            os.close(fd)
        user.close()
        sys.stdout = previous

