"""The command line's export options: ``bake-pack``'s ``--export-dir``, ``--export-format``,
``--engine``, ``--export-single`` and ``--replace``, and ``retarget``'s ``--replace``, with the checks
made of them before any work (a wrong combination: exit status 2; a folder that cannot be written
or, for ``retarget``, an export file that exists already without ``--replace``: exit status 1)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..core.errors import MarionetteError
from ..core.export.presets import ENGINES, FORMAT_OF_EXTENSION, export_format, preset_for
from ..core.paths import USAGE, OutputRefused, folder_write_problem

REPLACE_HELP = "replace an export file (.fbx, .glb, .gltf) that exists already; without it such a file is kept"


def retarget_replace_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--replace", action="store_true",
        help=REPLACE_HELP.replace("kept", "kept and the command refused before any work") + " (a .blend output is replaced as always)",
    )


def check_replace(output: str, replace: bool) -> None:
    """``retarget -o OUT.fbx|.glb|.gltf``: refuse, before any work, an export file that exists
    already (for a .gltf, its .bin too) unless ``--replace`` (a .blend output is replaced, as it
    always was)."""
    if export_format(output) is None or replace:
        return
    written = [output, os.path.splitext(output)[0] + ".bin"] if output.lower().endswith(".gltf") else [output]
    there = next((p for p in written if os.path.lexists(p)), None)
    if there is not None:
        raise OutputRefused(f"-o {output}: {there} exists already; not replaced without --replace (add --replace to replace it)")


def bake_pack_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--export-dir", metavar="DIR",
        help="also write every baked clip for an engine into DIR, one file per clip named after it (the character and that clip), "
        "in pack order (or every clip in one file: --export-single)",
    )
    p.add_argument("--export-format", choices=sorted(set(FORMAT_OF_EXTENSION.values())), help="the files --export-dir holds: fbx, glb or gltf")
    p.add_argument(
        "--engine", choices=ENGINES,
        help="the engine the --export-dir files are for, as for retarget: unity (default for fbx), unreal (fbx, centimetres, "
        "root motion on the root bone), godot (default for glb), web (default for gltf)",
    )
    p.add_argument(
        "--export-single", action="store_true",
        help="write one file in --export-dir holding every baked clip (the character once, each clip named after its Action, "
        "in pack order), named after the output: OUT.blend gives DIR/OUT.fbx (.glb, .gltf)",
    )
    p.add_argument("--replace", action="store_true", help=REPLACE_HELP + " and reported so, and the others written")


def single_stem(output: str) -> str:
    """The name (without extension) of ``--export-single``'s one file: the output .blend's."""
    name = Path(output).name
    return name[: -len(".blend")] if name.lower().endswith(".blend") else Path(name).stem


def check_export_dir(args: argparse.Namespace) -> Any:
    """bake-pack's export options checked before any work: the engine preset they give (``None``
    without --export-dir), or refused (exit 2 for a wrong command line, 1 for a folder that cannot
    be written)."""
    if not args.export_dir:
        given = [o for o, v in (("--export-format", args.export_format), ("--engine", args.engine),
                                ("--export-single", args.export_single), ("--replace", args.replace)) if v]
        if given:
            raise OutputRefused(f"{' and '.join(given)}: only with --export-dir DIR", USAGE)
        return None
    if not args.export_format:
        raise OutputRefused(f"--export-dir {args.export_dir}: give --export-format fbx, glb or gltf", USAGE)
    try:
        preset = preset_for(args.export_format, args.engine)
    except MarionetteError as exc:  # an engine that does not read the format
        raise OutputRefused(str(exc), USAGE) from None
    problem = folder_write_problem(args.export_dir)
    if problem is not None:
        raise OutputRefused(f"--export-dir {args.export_dir}: cannot be written, {problem}")
    return preset


def pack_export(args: argparse.Namespace, preset: Any) -> Any:
    """What bake-pack is to export (:class:`..usecases.export_pack.PackExport`), or ``None``; loads Blender."""
    if preset is None:
        return None
    from ..usecases.export_pack import PackExport

    single = single_stem(args.output) if args.export_single else None
    return PackExport(args.export_dir, args.export_format, preset.engine, single=single, replace=args.replace)
