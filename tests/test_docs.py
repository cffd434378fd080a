"""The design pages and the README point at real places: every repository path written in
backticks exists, and every link between the pages lands on a page and a heading that exist.

A path is any word inside backticks (a whole span, or a word of a command written in one) that
starts with one of the repository's top-level folders, so a module map that names a file that has
moved or gone fails here instead of sending a newcomer nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"

#: Top-level folders whose paths the pages may name (kept even if one disappears, so a path into
#: a removed folder still counts as a path, and fails).
FOLDERS = (
    "core",
    "bridge",
    "viewport",
    "properties",
    "usecases",
    "batch_runner",
    "operators",
    "panels",
    "cli",
    "tests",
    "bench",
    "presets",
    "docs",
)

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def written_paths(text: str) -> list[str]:
    """Repository paths named in backticks in ``text`` (fenced blocks left out: they hold diagrams
    and sample files)."""
    found = []
    for span in SPAN.findall(FENCE.sub("", text)):
        for word in span.split():
            word = word.split("::")[0].rstrip(".,;:)")
            head = word.split("/")[0]
            if "/" in word and head in FOLDERS:
                found.append(word)
    return found


def exists(path: str) -> bool:
    if any(c in path for c in "*?["):
        return any(REPO.glob(path))
    return (REPO / path).exists()


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def test_pages_exist() -> None:
    # The index and the pages it promises; the walk below would pass on an empty folder.
    for name in ("README.md", "pipeline.md", "methods.md", "mapping.md", "controls.md", "batch.md",
                 "formats.md", "conventions.md", "glossary.md", "measurements.md"):
        assert (DOCS / name).is_file(), f"docs/{name} is missing"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_written_path_exists(page: Path) -> None:
    paths = written_paths(page.read_text(encoding="utf-8"))
    missing = sorted({p for p in paths if not exists(p)})
    assert not missing, f"{page.relative_to(REPO)} names paths that do not exist: {', '.join(missing)}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_lands(page: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file, _, anchor = target.partition("#")
        dest = page if not file else (page.parent / file).resolve()
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(REPO)} links nowhere: {', '.join(broken)}"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    # The extraction finds paths in spans and in commands, and a made-up one does not exist.
    text = "see `core/rig/nothing_here.py` and `python bench/bench_x.py --runs 3`, not `OUT.blend.parts/`"
    assert written_paths(text) == ["core/rig/nothing_here.py", "bench/bench_x.py"]
    assert not exists("core/rig/nothing_here.py")
    assert exists("core/rig/skeleton.py")
    assert slug("Bones in between, toes and fingers") == "bones-in-between-toes-and-fingers"
    assert slug("FBX, glTF/GLB, VRM and .blend") == "fbx-gltfglb-vrm-and-blend"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_pages_point_inside_the_repository(page: Path) -> None:
    # The design is written here; no page sends the reader to a document the repository lacks.
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"\bSPEC\b|SPEC\.md", text), f"{page.relative_to(REPO)} refers to a document outside the repository"


#: Names the module maps use that are Blender's own, not defined in the repository.
BLENDER_NAMES = {"bl_idname", "frame_change_post"}


def defined_names() -> set[str]:
    """Functions and classes the add-on defines (tests and benchmarks left out)."""
    files = [*REPO.glob("*.py"), *(p for f in FOLDERS if f not in ("tests", "bench") for p in (REPO / f).rglob("*.py"))]
    names: set[str] = set()
    for path in files:
        names.update(re.findall(r"^\s*(?:def|class)\s+(\w+)", path.read_text(encoding="utf-8"), re.M))
    return names


@pytest.mark.parametrize("page", [REPO / "README.md", DOCS / "README.md"], ids=["README.md", "docs/README.md"])
def test_module_map_names_exist(page: Path) -> None:
    # The map names entry functions and classes rather than files that may split; each must still
    # be defined somewhere in the package, or the map has rotted.
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    start = text.index("## Module map")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else None]
    names = {s for s in SPAN.findall(section) if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", s)}
    assert len(names) > 10, "the module map names too few functions to be a map"
    defined = defined_names() | BLENDER_NAMES
    missing = sorted(n for n in names if n.split(".")[-1] not in defined)
    assert not missing, f"{page.relative_to(REPO)}'s module map names what the code no longer defines: {', '.join(missing)}"


CODE_REF = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")


def test_the_code_points_at_pages_and_sections_that_exist() -> None:
    # Docstrings and comments refer to the design by page and section: each must land.
    broken = []
    for path in sorted(REPO.rglob("*.py")):
        if any(part in {".venv", "build", ".git"} or part.endswith(".egg-info") for part in path.relative_to(REPO).parts):
            continue
        for m in CODE_REF.finditer(path.read_text(encoding="utf-8")):
            page = DOCS / m.group(1)
            if not page.exists() or (m.group(2) and m.group(2) not in anchors(page)):
                broken.append(f"{path.relative_to(REPO)}: {m.group(0)}")
    assert broken == []
