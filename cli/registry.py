"""What the command line's parser is built from: the sub-commands :mod:`.commands` registers
with :func:`command`, and the version the manifest gives."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Callable
from pathlib import Path

Command = Callable[[argparse.Namespace], int]
COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Command]] = []


def version() -> str:
    with open(Path(__file__).resolve().parents[1] / "blender_manifest.toml", "rb") as f:
        return str(tomllib.load(f)["version"])


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]) -> Callable[[Command], Command]:
    """Register a sub-command: ``arguments`` adds its options, the decorated function runs it."""

    def wrap(run: Command) -> Command:
        COMMANDS.append((name, help, arguments, run))
        return run

    return wrap

