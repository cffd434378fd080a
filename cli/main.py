"""The command line: ``python -m marionette …`` (Blender as a Python module) and
``blender --background --command marionette …`` (real Blender) share this parser.

Each sub-command is a small function that parses nothing itself, calls one job of
:mod:`marionette.usecases.jobs`, prints a machine-readable report and returns an exit status.
A refusal (:class:`~marionette.core.errors.MarionetteError`) becomes one line on stderr and a
non-zero status (2 for a command line that cannot be right, 1 otherwise); Blender's own output
stays out of the terminal unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from ..core.errors import MarionetteError

Command = Callable[[argparse.Namespace], int]
_COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Command]] = []


def version() -> str:
    with open(Path(__file__).resolve().parents[1] / "blender_manifest.toml", "rb") as f:
        return str(tomllib.load(f)["version"])


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]) -> Callable[[Command], Command]:
    """Register a sub-command: ``arguments`` adds its options, the decorated function runs it."""

    def wrap(run: Command) -> Command:
        _COMMANDS.append((name, help, arguments, run))
        return run

    return wrap


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


def build_parser() -> argparse.ArgumentParser:
    from . import commands  # noqa: F401  (registers the sub-commands)

    parser = argparse.ArgumentParser(
        prog="marionette",
        description="Retarget humanoid animation onto humanoid armatures, headless.",
    )
    parser.add_argument("--version", action="version", version=f"marionette {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text, arguments, run in _COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        arguments(p)
        p.add_argument(
            "--verbose", action="store_true", help="show Blender's and the importers' own output, and the traceback of an internal error"
        )
        p.set_defaults(run=run)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except MarionetteError as exc:
        print(f"marionette: error: {_one_line(exc)}", file=sys.stderr)
        return int(getattr(exc, "exit_status", 1))
    except OSError as exc:  # a file that vanished or could not be written while the job ran
        print(f"marionette: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if args.verbose:
            raise
        print(f"marionette: internal error: {type(exc).__name__}: {_one_line(exc)[:300]} (--verbose shows the traceback)", file=sys.stderr)
        return 1
