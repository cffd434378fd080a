"""The quality summary a person reads after a retarget (the command line prints it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Controls named in a summary line before "and N more".
NAMED_CONTROLS = 8


def named(names: Sequence[str], at_most: int = NAMED_CONTROLS) -> str:
    """``names`` joined, the first ``at_most`` of them then "and N more"."""
    shown = ", ".join(names[:at_most])
    return shown + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


def control_rig_line(described: dict[str, Any] | None) -> str | None:
    """What a retarget onto a control rig keyed (``report["control_rig"]``), in one line; ``None``
    when the target's mapped bones were keyed themselves."""
    if not described:
        return None
    controls = list(described.get("controls", []))
    line = f"control rig: {described['plan']}; keyed {len(controls)} control{'' if len(controls) == 1 else 's'}"
    if controls:
        line += f" ({named(controls)})"
    switches = [f"{s['bone']} {s['property']}={s['value']:g}" for s in described.get("switches", [])]
    if switches:
        line += f" and switch{'' if len(switches) == 1 else 'es'} {named(switches, 4)}"
    return line


def format_summary(report: dict[str, Any]) -> str:
    """The quality figures a person reads after a retarget."""
    if report.get("body_plan") in ("quadruped", "chains"):
        return "\n".join(chain_lines(report))
    s = report["summary"]
    rig = control_rig_line(report.get("control_rig"))
    lines = [f"  note: {note}" for note in report.get("notes", [])] + ([f"  {rig}"] if rig else []) + [
        f"  bone direction error   mean {s['mean_direction_error']:.3f} deg, max {s['max_direction_error']:.3f} deg",
        f"  limb direction error   mean {s['mean_limb_direction_error']:.3f} deg",
        f"  elbow/knee plane error max {s['max_limb_plane_error']:.3f} deg",
        f"  hips height error      max {100 * s['hips_height_error']:.2f} % of target hip height",
        f"  silhouette overlap     front {s['silhouette_front']:.2f}, side {s['silhouette_side']:.2f} (IoU; proportions differ)",
    ]
    turned = report.get("rotation_since_first_frame_deg", {})
    if turned:
        figures = ", ".join(
            f"{group} {g['off']:.2f}"
            # A run judged as a whole says so where its bones, one by one, would read otherwise.
            + (f" (run as a whole; bone for bone {g['per_bone_off']:.2f})" if abs(g.get("per_bone_off", g["off"]) - g["off"]) >= 0.005 else "")
            for group, g in turned.items()
        )
        lines.append(f"  rotation since first frame, off by (mean deg): {figures}")
    skate = report.get("foot_skating", {})
    for side in ("L", "R"):
        if f"foot.{side} slide" in skate and skate[f"foot.{side} contact frames"]:
            lines.append(
                f"  foot.{side} slide planted  {100 * skate[f'foot.{side} slide']:.1f} % of hip height over "
                f"{skate[f'foot.{side} contact frames']:.0f} contact frames (source: {100 * skate[f'foot.{side} source slide']:.1f} %)"
            )
    for palm, err in report.get("palm_normal_error_deg", {}).items():
        lines.append(f"  {palm} normal error   max {err:.2f} deg")
    if report.get("options", {}).get("plant_feet") and not report.get("method", {}).get("native"):
        held = report.get("planted_feet", {})
        counts = ", ".join(
            f"{foot} held on {c['held']} frames" + (f" ({c['out_of_reach']} out of the leg's reach)" if c["out_of_reach"] else "")
            for foot, c in held.items()
        )
        lines.append(f"  Plant Feet: {counts or 'no planted contacts in the clip'}")
        drop = report.get("planted_hip_drop", {})
        if drop.get("frames"):
            lines.append(
                f"  (hips lowered by up to {100 * drop['max']:.1f} % of hip height on {drop['frames']} frames "
                "to bring held feet within the legs' reach)"
            )
        lines.append("  (thighs and shins bend away from the clip's directions to hold the feet)")
    if "measured_frames" in report:
        lines.append(f"  (measured on {report['measured_frames']} evenly spread frames of the pose Blender plays)")
    for warning in report.get("warnings", []):
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def chain_lines(report: dict[str, Any]) -> list[str]:
    """The per-chain summary a person reads after a retarget between quadrupeds (or bodies
    described as chains)."""
    s = report["summary"]
    lines = [f"  note: {note}" for note in report.get("notes", [])] + [
        f"  chain direction error  mean {s['mean_direction_error']:.3f} deg, max {s['max_direction_error']:.3f} deg",
    ]
    for chain, c in report["chains"].items():
        lines.append(
            f"    {chain:<12} {c['bones']} bones from {c['source_bones']}: mean {c['mean_direction_error']:.3f} deg, max {c['max_direction_error']:.3f} deg"
        )
    t = s["travel"]
    lines += [
        f"  pelvis orientation     mean {s['pelvis_orientation_error']:.3f} deg",
        f"  travel                 {t['target']:.4g} (source scaled {t['source_scaled']:.4g}); largest gap {t['largest_gap_hip_heights']:.4f} pelvis heights",
        f"  facing                 mean {s['facing_error']['mean']:.3f} deg, max {s['facing_error']['max']:.3f} deg",
    ]
    for chain, p in report.get("paw_slide", {}).items():
        if p["contact_frames"]:
            lines.append(
                f"    {chain:<12} paw slide planted {100 * p['slide']:.1f} % of pelvis height over {p['contact_frames']} contact frames "
                f"(source: {100 * p['source_slide']:.1f} %)"
            )
    if report.get("planted_feet"):
        drop = report.get("planted_hip_drop", {}).get("max", 0.0)
        lines.append(f"  (paws held where the source's are planted; the legs above them bend to reach; pelvis lowered by up to {100 * drop:.1f} %)")
    return lines + [f"  warning: {w}" for w in report.get("warnings", [])]
