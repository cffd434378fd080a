"""The command line: ``python -m marionette …`` (Blender as a Python module) and
``blender --background --command marionette …`` (real Blender) share this parser.

Each sub-command is a small function that parses nothing itself, calls one job of
:mod:`marionette.operators.jobs`, prints a machine-readable report and returns an exit status.
A refusal (:class:`~marionette.core.errors.MarionetteError`) becomes one line on stderr and a
non-zero status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from .core.errors import MarionetteError

Command = Callable[[argparse.Namespace], int]
_COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Command]] = []


def version() -> str:
    with open(Path(__file__).with_name("blender_manifest.toml"), "rb") as f:
        return str(tomllib.load(f)["version"])


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]) -> Callable[[Command], Command]:
    """Register a sub-command: ``arguments`` adds its options, the decorated function runs it."""

    def wrap(run: Command) -> Command:
        _COMMANDS.append((name, help, arguments, run))
        return run

    return wrap


@contextlib.contextmanager
def job_output_to_stderr() -> Iterator[None]:
    """Send everything printed while a job runs (Blender's importers and savers print to stdout,
    some from C) to stderr, so stdout carries only the command's own, machine-readable result."""
    sys.stdout.flush()
    saved = os.dup(1)
    previous = sys.stdout
    try:
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)
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
        p.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except MarionetteError as exc:
        print(f"marionette: error: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"marionette: error: {exc}", file=sys.stderr)
        return 1
