"""Sub-commands of the command line; each is a few lines around one job."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .cli import command, job_output_to_stderr


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
    from .operators.jobs import demo as run_demo
    from .operators.jobs import format_summary

    with job_output_to_stderr():
        outcome = run_demo(args.output)
    print(f"wrote {Path(args.output).resolve()} (action {outcome.action.name!r} on armature 'Metarig')")
    print("quality of the retarget (measured against the source clip):")
    print(format_summary(outcome.report))
    _write_report(outcome.report, args.report)
    return 0


def _retarget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="clip file: .bvh, .fbx, .glb/.gltf or .blend")
    p.add_argument("target", help="character file: .bvh, .fbx, .glb/.gltf or .blend")
    p.add_argument("-o", "--output", required=True, help="result .blend (target armature, its meshes, the new Action)")
    p.add_argument("--clip", help="name of the clip to use when the source file holds several")
    p.add_argument("--target-armature", help="name of the armature to retarget onto when the target file holds several")
    p.add_argument("--mapping", help="JSON bone mapping for the target (default: auto-mapping)")
    p.add_argument("--keep-frames", action="store_true", help="keep the source's frame numbers instead of its timing")
    p.add_argument("--root-motion", choices=["HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE"], default="HIPS")
    p.add_argument("--report", help="write the JSON report here (measurements, mapping, facing cues)")
    p.add_argument("--report-png", help="write a picture of the report here (per-bone error over time, key frames)")


@command("retarget", "retarget one clip from SOURCE onto the armature in TARGET and save OUT.blend", _retarget_arguments)
def retarget(args: argparse.Namespace) -> int:
    from .core.retarget import RetargetOptions
    from .operators.jobs import format_summary, retarget_files

    with job_output_to_stderr():
        outcome = retarget_files(
            args.source,
            args.target,
            args.output,
            clip=args.clip,
            target_armature=args.target_armature,
            mapping=args.mapping,
            keep_frames=args.keep_frames,
            options=RetargetOptions(root_motion=args.root_motion),
        )
    print(f"wrote {Path(args.output).resolve()} (action {outcome.action.name!r})")
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
    p.add_argument("--report-png", help="also draw the report as a picture here")


@command("measure", "measure a retarget saved in a .blend against its source clip; prints a JSON report", _measure_arguments)
def measure(args: argparse.Namespace) -> int:
    from .operators.jobs import measure_files

    with job_output_to_stderr():
        report = measure_files(args.source, args.retargeted, clip=args.clip, action=args.action, target_armature=args.target_armature)
    print(json.dumps(report, indent=1))
    if args.report_png:
        from .report_figure import write_report_png

        write_report_png(report, args.report_png)
    return 0
