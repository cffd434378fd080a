"""Sub-commands of the command line; each is a few lines around one entry function of
:mod:`..usecases`, registered for :mod:`.main`'s parser with :func:`.registry.command`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..core.errors import FileFormatError, MappingError, MarionetteError
from ..core.export.presets import ENGINES, EXPORTED, export_format, preset_for
from ..core.paths import BLEND, USAGE, Output, OutputRefused, check_inputs, check_outputs
from .export_options import (
    bake_pack_export_arguments,
    check_export_dir,
    check_replace,
    pack_export,
    retarget_replace_argument,
)
from .job_output import job_output
from .registry import command

#: The first bytes of a .blend file: plain, gzip- or zstd-compressed.
_BLEND_MAGIC = (b"BLENDER", b"\x1f\x8b", b"\x28\xb5\x2f\xfd")


def _report_outputs(args: argparse.Namespace) -> list[Output]:
    """The report files the command was asked to write (checked with the output, before the work)."""
    out = [Output("--report", getattr(args, "report", None) or "")]
    png = getattr(args, "report_png", None)
    if png:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise MarionetteError(f"--report-png {png}: drawing the report needs matplotlib (pip install matplotlib)")
        out.append(Output("--report-png", png, (".png",)))
    return out


PRESETS = Path(__file__).resolve().parents[1] / "presets"

ROOT_MOTIONS = ("HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE")
ROOT_MOTION_HELP = (
    "where the clip's horizontal travel goes: HIPS (default) on the hips bone; ROOT_BONE on the unmapped bone above "
    "the hips (a game engine's root; without one it stays on the hips, with a warning); OBJECT on the armature "
    "object's location keys; IN_PLACE nowhere (walks on the spot). The hips keep their height in every mode"
)


#: ``--control-rig``: as bridge.control_target.CONTROL_RIG_MODES (not imported: it loads Blender).
CONTROL_RIG_CHOICES = ("fk", "ik", "off")
CONTROL_RIG_HELP = (
    "what a control rig target (one whose mapped bones follow other bones through constraints or drivers) is keyed on: "
    "fk (default) its FK controls (Rigify: the IK/FK switches set to FK); ik its IK controls (switches set to IK); "
    "off the mapped bones themselves, even when constraints override them"
)


def _control_rig_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--control-rig", choices=CONTROL_RIG_CHOICES, default="fk", help=CONTROL_RIG_HELP)


def _mapping_help() -> str:
    names = ", ".join(sorted(q.stem for q in PRESETS.glob("*.json")))
    return (
        "bone mapping for the target (default: auto-mapping): a JSON file as the sidebar's Save Mapping writes it "
        '({"format": "marionette.bone_mapping", "version": 1, "slots": {"hips": {"bone": "mixamorig:Hips"}, ...}}; '
        f'a slot may give just the bone name), or the name of a shipped preset: {names}'
    )


def _mapping_file(value: str | None) -> str | None:
    """``--mapping``: a file, or the name of a shipped preset (when no such file exists)."""
    if not value or os.path.exists(value) or os.sep in value or "/" in value:
        return value
    shipped = PRESETS / f"{value}.json"
    return str(shipped) if shipped.is_file() else value


def _check_mapping(path: str | None) -> None:
    """Refuse a bone mapping file that cannot be read, before any work (one line naming it)."""
    if not path:
        return
    from ..core.mapping.bone_mapping import BoneMapping

    name = Path(path).name
    try:
        BoneMapping.load(path)
    except UnicodeDecodeError as exc:
        raise MappingError(f"{name}: the bone mapping is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})") from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise MappingError(f"{name}: the bone mapping has a wrong value ({exc})") from None


def _check_blend(path: str) -> None:
    """Refuse, before Blender opens it, a file that is not a .blend."""
    try:
        with open(path, "rb") as f:
            head = f.read(7)
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not head.startswith(_BLEND_MAGIC):
        raise FileFormatError(f"{path}: is not a Blender file (.blend)")


def _write_report(report: dict[str, Any], path: str | None) -> None:
    if path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(report, indent=1))


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="marionette_demo.blend", help="result .blend (default: %(default)s)")
    p.add_argument("--report", help="also write the full JSON report here")


@command("demo", "retarget the built-in sample walk onto Blender's Rigify metarig and print its quality", _demo_arguments)
def demo(args: argparse.Namespace) -> int:
    check_outputs([Output("-o", args.output, BLEND), *_report_outputs(args)], [])
    from ..usecases.demo import demo as run_demo
    from ..usecases.summary import format_summary

    with job_output(args.verbose):
        outcome = run_demo(args.output)
    print(f"wrote {Path(args.output).resolve()} (action {outcome.action.name!r} on armature 'Metarig')")
    print("quality of the retarget (measured against the source clip):")
    print(format_summary(outcome.report))
    _write_report(outcome.report, args.report)
    return 0


def _plant_feet_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plant-feet",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold each foot still where the source foot is planted, bending the legs to reach (default: on; "
        "--no-plant-feet carries every bone's direction exactly and lets feet slide on legs proportioned unlike the source's)",
    )


def _retarget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="clip file: .bvh, .fbx, .glb/.gltf, .blend or .vmd (MikuMikuDance motion)")
    p.add_argument("target", help="character file: .bvh, .fbx, .glb/.gltf or .blend")
    p.add_argument(
        "--vmd-model", metavar="MODEL.pmx",
        help="a .vmd source: the PMX model it was made for, on which it is played before the retarget (default: the built-in standard MMD skeleton)",
    )
    p.add_argument(
        "-o", "--output", required=True,
        help="result file (target armature, its meshes, the new Action): .blend, or for an engine .fbx, .glb or .gltf "
        "(written with Blender's exporters as --engine says)",
    )
    p.add_argument(
        "--engine", choices=ENGINES,
        help="the engine an .fbx/.glb/.gltf output is for (units, axes, root motion): unity (default for .fbx, metres, Y up), "
        "unreal (.fbx, centimetres, Z up, root motion on the root bone), godot (default for .glb) or web (default for .gltf): "
        "glTF as its spec says (metres, Y up, facing +Z)",
    )
    retarget_replace_argument(p)
    p.add_argument("--clip", help="name of the clip to use when the source file holds several")
    p.add_argument("--target-armature", help="name of the armature to retarget onto when the target file holds several")
    p.add_argument("--mapping", metavar="FILE_OR_PRESET", help=_mapping_help())
    p.add_argument(
        "--source-mapping", metavar="FILE_OR_PRESET",
        help="the source rig's bone mapping, as --mapping is the target's (a body described as chains needs one on each side)",
    )
    p.add_argument("--keep-frames", action="store_true", help="keep the source's frame numbers instead of its timing")
    p.add_argument(
        "--root-motion", choices=ROOT_MOTIONS, help=ROOT_MOTION_HELP + "; for --engine unreal ROOT_BONE is the default",
    )
    p.add_argument(
        "--method",
        default="geometric",
        help="retarget method: geometric (default), rest-space, or per slot or group, later items winning, "
        "e.g. 'geometric,fingers=local-curl' (groups: all, trunk, arms, legs, fingers, twists, face)",
    )
    p.add_argument(
        "--match-rest",
        action="store_true",
        help="rest-space: turn the target's rest onto the source's bone directions (an A-pose clip onto a T-pose rig of one family)",
    )
    _plant_feet_argument(p)
    _control_rig_argument(p)
    p.add_argument(
        "--push-to-nla",
        action="store_true",
        help="keep the new Action on a muted NLA track of its own above the target's tracks; the target keeps the Action it plays",
    )
    p.add_argument("--report", help="write the JSON report here (measurements, mapping, facing cues)")
    p.add_argument("--report-png", metavar="R.png", help="write a picture of the report here (per-bone error over time, key frames); needs matplotlib (pip install '.[blender]' or pip install matplotlib)")


@command(
    "retarget", "retarget one clip from SOURCE onto the armature in TARGET and save OUT.blend, or OUT.fbx/.glb/.gltf for an engine",
    _retarget_arguments,
)
def retarget(args: argparse.Namespace) -> int:
    from ..core.mapping.method_names import parse_method_table
    from ..core.retarget.geometric import RetargetOptions

    methods = parse_method_table(args.method)  # a bad table is refused before any file is read
    args.mapping = _mapping_file(args.mapping)
    args.source_mapping = _mapping_file(args.source_mapping)
    inputs = [("source", args.source), ("target", args.target), ("mapping", args.mapping or ""), ("source mapping", args.source_mapping or "")]
    if args.vmd_model:
        if not args.source.lower().endswith(".vmd"):
            raise OutputRefused(f"--vmd-model: only for a .vmd source, not {args.source}", USAGE)
        inputs.append(("--vmd-model", args.vmd_model))
    check_outputs([Output("-o", args.output, BLEND + EXPORTED), *_report_outputs(args)], inputs)
    fmt = export_format(args.output)
    if fmt is None and args.engine:
        raise OutputRefused(f"--engine {args.engine}: only for an .fbx, .glb or .gltf output, not {args.output}", USAGE)
    try:
        preset = preset_for(fmt, args.engine) if fmt else None
    except MarionetteError as exc:  # an engine that does not read the format: a wrong command line
        raise OutputRefused(str(exc), USAGE) from None
    check_replace(args.output, args.replace)
    args.root_motion = args.root_motion or (preset.root_motion if preset else "HIPS")
    check_inputs(inputs[:2] + inputs[4:])  # the mappings' reader names them (as bake-pack's does)
    _check_mapping(args.mapping)
    _check_mapping(args.source_mapping)
    from ..usecases.retarget import retarget_files  # loads Blender
    from ..usecases.summary import format_summary

    with job_output(args.verbose):
        outcome = retarget_files(
            args.source,
            args.target,
            args.output,
            clip=args.clip,
            target_armature=args.target_armature,
            mapping=args.mapping,
            source_mapping=args.source_mapping,
            keep_frames=args.keep_frames,
            options=RetargetOptions(root_motion=args.root_motion, plant_feet=args.plant_feet),
            methods=methods,
            match_rest=args.match_rest,
            control_rig=args.control_rig,
            push_to_nla=args.push_to_nla,
            engine=args.engine,
            vmd_model=args.vmd_model,
        )
    exported = outcome.report.get("export")
    for_engine = f" for {exported['engine']}" if isinstance(exported, dict) else ""
    print(f"wrote {Path(args.output).resolve()}{for_engine} (action {outcome.action.name!r})")
    print(format_summary(outcome.report))
    _write_report(outcome.report, args.report)
    if args.report_png:
        from .report_figure import write_report_png

        write_report_png(outcome.report, args.report_png)
    return 0


def _measure_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="the clip file the retarget started from")
    p.add_argument("retargeted", help=".blend holding the retargeted armature and its action")
    p.add_argument("--clip", help="source clip name when the source file holds several")
    p.add_argument("--action", help="retargeted action name (default: the armature's active action)")
    p.add_argument("--target-armature", help="armature to measure when the .blend holds several")
    p.add_argument("--vmd-model", metavar="MODEL.pmx", help="a .vmd source: the PMX model it was played on (default: the built-in standard MMD skeleton)")
    p.add_argument("--mapping", metavar="FILE_OR_PRESET", help="the retargeted rig's mapping (a body described as chains needs one on each side)")
    p.add_argument("--source-mapping", metavar="FILE_OR_PRESET", help="the source rig's mapping, as --mapping is the retargeted rig's")
    p.add_argument(
        "--root-motion", choices=["HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE"], default="HIPS",
        help="quadrupeds and chain-described bodies: where the retarget put the travel, which the travel figures judge (default HIPS)",
    )
    p.add_argument("--report-png", metavar="R.png", help="also draw the report as a picture here (a .png); needs matplotlib (pip install matplotlib)")


@command("measure", "measure a retarget saved in a .blend against its source clip; prints a JSON report", _measure_arguments)
def measure(args: argparse.Namespace) -> int:
    args.mapping = _mapping_file(args.mapping)
    args.source_mapping = _mapping_file(args.source_mapping)
    inputs = [("source", args.source), ("retargeted file", args.retargeted)] + ([("--vmd-model", args.vmd_model)] if args.vmd_model else [])
    check_outputs(_report_outputs(args), inputs)
    check_inputs(inputs)
    _check_mapping(args.mapping)
    _check_mapping(args.source_mapping)
    from ..usecases.measure import measure_files

    with job_output(args.verbose):
        report = measure_files(
            args.source, args.retargeted, clip=args.clip, action=args.action, target_armature=args.target_armature, vmd_model=args.vmd_model,
            mapping=args.mapping, source_mapping=args.source_mapping, root_motion=args.root_motion,
        )
    print(json.dumps(report, indent=1))
    if args.report_png:
        from .report_figure import write_report_png

        write_report_png(report, args.report_png)
    return 0


def _bake_pack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pack", nargs="+", metavar="PACK_DIR_OR_FILES", help="clip files (.bvh, .fbx, .glb/.gltf, .blend, .vmd: MikuMikuDance motions, played on the standard MMD skeleton) and folders searched for them")
    p.add_argument("target", help="character file holding the armature to bake onto")
    p.add_argument("-o", "--output", required=True, help="result .blend: the character with one new Action per clip")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes (default: one per core; lowered to the cores and to what the pack can use, saying so)",
    )
    p.add_argument(
        "--cluster", metavar="tcp://HOST:8786|local:N",
        help="run the clips on the workers of a Dask scheduler (pip install '.[cluster]'), or on a local Dask cluster of N processes; "
        "the cluster's worker threads set how many files bake at once (not --jobs)",
    )
    p.add_argument(
        "--ship-inputs",
        action="store_true",
        help="with --cluster: send each pack file to the worker baking it, so the workers need no shared path to the pack",
    )
    p.add_argument("--report", help="write the JSON report here (per file: baked, failed with the reason, lost)")
    p.add_argument("--target-armature", help="name of the armature to bake onto when the target file holds several")
    p.add_argument("--mapping", metavar="FILE_OR_PRESET", help=_mapping_help())
    p.add_argument(
        "--source-mapping", metavar="FILE",
        help="a mapping describing every clip's body as chains, for a target whose --mapping describes its body as chains "
        "(quadrupeds need none: each clip's rig is mapped by shape)",
    )
    p.add_argument("--resume", action="store_true", help="keep the clips already in OUT.blend (or left by an interrupted run) and bake the rest")
    p.add_argument("--keep-frames", action="store_true", help="keep each clip's frame numbers instead of its timing")
    p.add_argument("--root-motion", choices=["HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE"], help=ROOT_MOTION_HELP + "; for --engine unreal ROOT_BONE is the default")
    p.add_argument(
        "--method",
        default="geometric",
        help="retarget method for every clip, as for retarget: geometric (default), rest-space, or per slot or group, "
        "later items winning, e.g. 'geometric,fingers=local-curl' (groups: all, trunk, arms, legs, fingers, twists, face); "
        "items win over the mapping file's methods",
    )
    p.add_argument(
        "--match-rest",
        action="store_true",
        help="rest-space: turn the target's rest onto the source's bone directions (an A-pose pack onto a T-pose rig of one family)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="stop a worker that stays silent this long on one file (a hanging importer or read), with any --jobs, "
        "and report the file failed (0: no limit)",
    )
    p.add_argument(
        "--max-file-mb",
        type=float,
        default=1024.0,
        metavar="MB",
        help="save the output in volumes (OUT.blend, OUT.002.blend, ...) of about this much Action memory each (0: one file)",
    )
    p.add_argument("--max-clips-per-file", type=int, default=0, metavar="N", help="also start a new volume after N clips (0: no limit)")
    p.add_argument(
        "--control-rig",
        choices=["fk", "ik", "off"],
        default="fk",
        help="a target whose mapped bones follow controls (a Rigify rig...): key its FK controls (default), its IK controls, "
        "or off: the mapped bones themselves; every clip is checked on what Blender plays and reported failed when it misses",
    )
    p.add_argument(
        "--push-to-nla",
        action="store_true",
        help="also keep each clip on a muted NLA track of its own on the target, in pack order; the target keeps the Action it plays",
    )
    bake_pack_export_arguments(p)
    _plant_feet_argument(p)


@command(
    "bake-pack",
    "bake every clip of an animation pack onto the armature in TARGET, in parallel, and save OUT.blend "
    "(exit status 0 only when every file baked and, with --export-dir, every export file written)",
    _bake_pack_arguments,
)
def bake_pack(args: argparse.Namespace) -> int:
    from ..batch_runner.pack_start import start_pack
    from ..core.mapping.method_names import parse_method_table
    from ..core.retarget.geometric import RetargetOptions

    limits = (
        ("--jobs", args.jobs, 1),
        ("--timeout", args.timeout, 0),
        ("--max-file-mb", args.max_file_mb, 0),
        ("--max-clips-per-file", args.max_clips_per_file, 0),
    )
    for name, value, least in limits:
        if value is not None and value < least:
            print(f"marionette: error: {name} must be at least {least}", file=sys.stderr)
            return 2
    if args.cluster is not None and args.jobs is not None:
        print(
            "marionette: error: --jobs and --cluster: on a cluster the workers' threads set how many files bake at once "
            "(local:N for N processes here); give one of them",
            file=sys.stderr,
        )
        return 2
    if args.ship_inputs and args.cluster is None:
        print("marionette: error: --ship-inputs sends the pack to a cluster's workers: give --cluster too", file=sys.stderr)
        return 2
    methods = parse_method_table(args.method)  # a bad table is refused before any file is read
    from ..core.batch.plan import CLIP_EXTENSIONS

    args.mapping = _mapping_file(args.mapping)
    args.source_mapping = _mapping_file(args.source_mapping)

    inputs = [("target", args.target), ("mapping", args.mapping or ""), ("source mapping", args.source_mapping or "")]
    inputs += [("pack file", p) for p in args.pack if not os.path.isdir(p)]
    check_outputs(
        [Output("-o", args.output, BLEND, volumes=True), *_report_outputs(args)],
        inputs,
        pack_folders=[p for p in args.pack if os.path.isdir(p)],
        pack_extensions=CLIP_EXTENSIONS,
        resume=args.resume,
    )
    preset = check_export_dir(args)
    args.root_motion = args.root_motion or (preset.root_motion if preset else "HIPS")
    check_inputs([("target", args.target)])
    _check_mapping(args.mapping)
    _check_mapping(args.source_mapping)
    with job_output(args.verbose) as terminal:  # progress, one line per file, goes to the terminal
        # Workers start (and read their first files) while this process loads Blender and the target.
        start = start_pack(args.pack, args.output, jobs=args.jobs, resume=args.resume, cluster=args.cluster, ship_inputs=args.ship_inputs)
        if start.jobs_note:
            print(f"marionette: {start.jobs_note}", file=terminal, flush=True)
        from ..usecases.bake_pack import bake_pack as run_bake_pack

        report = run_bake_pack(
            args.pack,
            args.target,
            args.output,
            jobs=args.jobs,
            report_path=args.report,
            target_armature=args.target_armature,
            mapping=args.mapping,
            source_mapping=args.source_mapping,
            resume=args.resume,
            keep_frames=args.keep_frames,
            options=RetargetOptions(root_motion=args.root_motion, plant_feet=args.plant_feet),
            methods=methods,
            match_rest=args.match_rest,
            control_rig=args.control_rig,
            max_clips_per_file=args.max_clips_per_file or None,
            max_file_mb=args.max_file_mb or None,
            timeout=args.timeout or None,
            progress=lambda line: print(line, file=terminal, flush=True),
            start=start,
            push_to_nla=args.push_to_nla,
            export=pack_export(args, preset),
        )
    lines = report.summary_lines()
    print(f"wrote {report.info['output']}: {lines[0]}")
    for line in lines[1:]:
        print(line)
    exports = report.info.get("exports")
    if exports is not None:
        from ..usecases.export_pack import export_lines

        for line in export_lines(exports, args.export_dir):
            print(line)
    if report.interrupted:
        return 130
    return 0 if report.ok and not any("error" in e or "kept" in e for e in exports or ()) else 1


def _bake_controls_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help=".blend holding the armature and its controls (it is not modified)")
    p.add_argument("--object", required=True, help="the armature object whose controls are baked")
    p.add_argument("-o", "--output", required=True, help="result .blend: the file with the new Action on the armature")
    p.add_argument("--frames", nargs=2, type=int, metavar=("A", "B"), help="first and last frame to bake (default: the scene's range)")
    p.add_argument("--action-name", help="name of the new Action (default: the current one's with '_controls', or '_physics')")
    p.add_argument(
        "--physics", action="store_true",
        help="also simulate the rig's rigid bodies (from import-pmx --physics) after the controls and write the dynamic bones' poses into the Action",
    )
    p.add_argument("--report", help="also write the JSON report here")


@command(
    "bake-controls",
    "bake an armature's controls (IK, look-at...) over a frame range into a new Action and save OUT.blend; prints a JSON report",
    _bake_controls_arguments,
)
def bake_controls(args: argparse.Namespace) -> int:
    if args.frames is not None and args.frames[1] < args.frames[0]:
        print("marionette: error: --frames A B needs A <= B", file=sys.stderr)
        return 2
    check_outputs([Output("-o", args.output, BLEND), *_report_outputs(args)], [("input file", args.file)])
    check_inputs([("input file", args.file)])
    _check_blend(args.file)
    from ..usecases.bake_controls import bake_file  # loads Blender
    from ..usecases.bake_physics import bake_physics_file
    from ..usecases.controls import registered

    with job_output(args.verbose), registered():
        job = bake_physics_file if args.physics else bake_file
        report = job(args.file, args.object, args.output, args.frames, args.action_name)
    print(json.dumps(report, indent=1))
    _write_report(report, args.report)
    return 0


def _import_pmx_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pmx", help="PMX model file (MikuMikuDance, PMX 2.0 or 2.1)")
    p.add_argument("-o", "--output", required=True, help="result .blend: the armature with its IK, inheritance and fixed-axis controls")
    p.add_argument("--scale", type=float, default=0.08, help="metres per MMD unit (default: %(default)s; a 20-unit model stands 1.6 m)")
    p.add_argument("--names", choices=["japanese", "english"], default="japanese", help="bone names (default: %(default)s; both are kept on each bone)")
    p.add_argument(
        "--vmd", metavar="MOTION.vmd",
        help="also key this MikuMikuDance motion onto the rig (a new Action at 30 fps; its IK switches keyed on the IK controls' Enabled)",
    )
    p.add_argument(
        "--physics", action="store_true",
        help="also build the model's rigid bodies and joints in the scene's rigid-body world (Blender's Bullet); bake them with bake-controls --physics",
    )
    p.add_argument("--report", help="also write the JSON report here")


@command(
    "import-pmx",
    "build an armature with its IK chains, inheritance and fixed axes from a PMX model and save OUT.blend; prints a JSON report",
    _import_pmx_arguments,
)
def import_pmx(args: argparse.Namespace) -> int:
    inputs = [("PMX model", args.pmx)] + ([("VMD motion", args.vmd)] if args.vmd else [])
    check_outputs([Output("-o", args.output, BLEND), *_report_outputs(args)], inputs)
    check_inputs(inputs)
    from ..usecases.controls import registered
    from ..usecases.import_pmx import import_pmx_file
    from ..usecases.vmd_apply import import_with_motion

    with job_output(args.verbose), registered():
        if args.vmd:
            report = import_with_motion(args.pmx, args.vmd, args.output, scale=args.scale, names=args.names, physics=args.physics)
        else:
            report = import_pmx_file(args.pmx, args.output, scale=args.scale, names=args.names, physics=args.physics)
    print(json.dumps(report, indent=1))
    _write_report(report, args.report)
    return 0


def _export_vrma_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="clip file: .bvh, .fbx, .glb/.gltf or .blend (any humanoid)")
    p.add_argument("-o", "--output", required=True, help="result .vrma (VRM Animation: glTF 2.0 with VRMC_vrm_animation)")
    p.add_argument("--clip", help="name of the clip to use when the source file holds several")
    p.add_argument("--mapping", metavar="FILE_OR_PRESET", help=_mapping_help().replace("for the target", "for the source"))
    p.add_argument("--no-fingers", dest="fingers", action="store_false", help="leave the fingers out")
    p.add_argument("--fps", type=_positive_rate, default=24.0, help="frames a second written, the clip's timing kept (default: %(default)g)")
    p.add_argument("--report", help="also write the JSON report here")


def _positive_rate(value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        rate = float("nan")
    if not 0.0 < rate <= 1000.0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a frame rate (a number of frames a second, above 0, at most 1000)")
    return rate


@command("export-vrma", "write one clip of any humanoid as VRM Animation (OUT.vrma), to play on every VRM avatar", _export_vrma_arguments)
def export_vrma(args: argparse.Namespace) -> int:
    args.mapping = _mapping_file(args.mapping)
    inputs = [("source", args.source), ("mapping", args.mapping or "")]
    check_outputs([Output("-o", args.output, (".vrma",)), *_report_outputs(args)], inputs)
    check_inputs(inputs[:1])
    _check_mapping(args.mapping)
    from ..usecases.vrma import export_vrma_file  # loads Blender

    with job_output(args.verbose):
        outcome = export_vrma_file(args.source, args.output, clip=args.clip, mapping=args.mapping, fingers=args.fingers, fps=args.fps)
    clip = outcome.report["clip"]
    print(f"wrote {outcome.path.resolve()} (clip {clip['name']!r}, {clip['frames']} frames at {clip['fps']:g} fps, {len(outcome.bones)} humanoid bones)")
    _write_report(outcome.report, args.report)
    return 0
