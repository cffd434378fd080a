"""The command line: ``python -m marionette …`` (Blender as a Python module) and
``blender --background --command marionette …`` (real Blender) share this parser.

Each sub-command (:mod:`.commands`) is a small function that parses nothing itself, calls one
entry function of :mod:`marionette.usecases`, prints a machine-readable report and returns an exit status.
A refusal (:class:`~marionette.core.errors.MarionetteError`) becomes one line on stderr and a
non-zero status (2 for a command line that cannot be right, 1 otherwise); Blender's own output
stays out of the terminal unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..core.errors import MarionetteError
from . import commands  # noqa: F401  (registers the sub-commands)
from .registry import COMMANDS, version

__all__ = ["build_parser", "main", "version"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="marionette",
        description="Retarget humanoid animation onto humanoid armatures, headless.",
    )
    parser.add_argument("--version", action="version", version=f"marionette {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text, arguments, run in COMMANDS:
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
