"""Architecture rules (docs/architecture.md §4): import direction, who touches Redis and SQL."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("control_plane", "storage", "workers", "console")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".txt", ".sh"}
TEXT_NAMES = {"Makefile", "Dockerfile"}
OUTSIDE_DOCS = (
    "../" + "shared",
    "ALGORITHMS" + ".md",
    "ARCHITECTURE" + ".md",
    "shared/" + "papers",
)
"""References to documents outside the repository (spelt in pieces so this file does not match)."""


def _modules(package: str) -> Iterator[Path]:
    yield from (p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _violations(
    package: str, forbidden: tuple[str, ...], allowed_under: tuple[str, ...] = ()
) -> list[str]:
    bad = []
    for path in _modules(package):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(a) for a in allowed_under):
            continue
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{rel} imports {name}")
    return bad


@pytest.mark.parametrize(
    "package,forbidden",
    [
        ("storage", ("control_plane", "workers", "console")),
        ("workers", ("control_plane", "storage", "console")),
        ("console", ("control_plane", "storage", "workers")),
        ("control_plane", ("console",)),
    ],
)
def test_dependency_direction(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []


RANKS: dict[str, int] = {
    "core": 0,
    "contracts": 1,
    "policies": 2,
    "admission": 2,
    "placement": 2,
    "control": 2,
    "perception": 2,
    "settings": 2,
    "gc_freeze": 2,
    "state": 2,
    "gateway": 3,
    "scheduler": 3,
    "recorder": 3,
    "sim": 3,
    "up": 3,
    "admin": 4,
    "api": 5,
    "bench": 6,
    "admin_cli": 6,
    "schema_cli": 6,
    "cli": 7,
    "__main__": 8,
}
"""Layers of `control_plane` (its `__init__` docstring): an import points to a lower rank or
stays inside its own package; peers of one rank never import each other."""
ENTRY = 6
"""A process's `main.py` is an entry point: it composes its peers (the scheduler may host the
recorder), so it ranks with the command line."""


def _unit(path: Path) -> tuple[str, int]:
    rel = path.relative_to(ROOT / "control_plane").parts
    name = rel[0] if len(rel) > 1 else path.stem
    return name, ENTRY if rel[-1] == "main.py" and len(rel) > 1 else RANKS[name]


def test_every_control_plane_package_has_a_rank() -> None:
    units = {_unit(p)[0] for p in _modules("control_plane") if p.parent != ROOT / "control_plane"}
    units |= {p.stem for p in (ROOT / "control_plane").glob("*.py")} - {"__init__"}
    assert units == set(RANKS)


def _upward(unit: str, rank: int, names: set[str]) -> list[str]:
    """The imports among `names` that leave `unit` for a package of its rank or higher."""
    up = []
    for name in sorted(names):
        parts = name.split(".")
        if parts[0] != "control_plane" or len(parts) < 2 or parts[1] == unit:
            continue
        if RANKS[parts[1]] >= rank:
            up.append(name)
    return up


def test_imports_only_point_down() -> None:
    up = []
    for path in _modules("control_plane"):
        if path == ROOT / "control_plane" / "__init__.py":
            continue
        unit, rank = _unit(path)
        rel = path.relative_to(ROOT).as_posix()
        up += [f"{rel} imports {name}" for name in _upward(unit, rank, _imports(path))]
    assert up == []


def test_the_layout_rule_can_fail(tmp_path: Path) -> None:
    """The checker flags an upward arrow (core importing a plug-in) and a peer arrow (one
    process importing another), and lets a downward one pass."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from control_plane.policies.registry import build_policy\nimport control_plane.core.job\n"
    )
    assert _upward("core", RANKS["core"], _imports(bad)) == ["control_plane.policies.registry"]
    assert _upward("gateway", RANKS["gateway"], {"control_plane.recorder.rows"}) != []
    assert _upward("sim", RANKS["sim"], {"control_plane.policies.registry"}) == []


@pytest.mark.parametrize(
    "init",
    sorted(
        {
            p.relative_to(ROOT).as_posix()
            for package in PACKAGES
            for p in [
                ROOT / package / "__init__.py",
                *(ROOT / "control_plane").glob("*/__init__.py"),
            ]
            if p.is_file()
        }
    ),
)
def test_every_package_says_what_it_owns_and_may_import(init: str) -> None:
    doc = ast.get_docstring(ast.parse((ROOT / init).read_text())) or ""
    assert "May import" in doc or "imports nothing else" in doc, init


def test_no_module_is_over_400_lines() -> None:
    long = [
        f"{p.relative_to(ROOT).as_posix()}: {n}"
        for package in PACKAGES
        for p in _modules(package)
        if (n := len(p.read_text().splitlines())) > 400
    ]
    assert long == []


def test_only_state_touches_redis() -> None:
    assert _violations("control_plane", ("redis",), ("control_plane/state/",)) == []


def test_only_storage_touches_sqlalchemy() -> None:
    for package in ("control_plane", "workers", "console"):
        assert _violations(package, ("sqlalchemy", "alembic")) == []


def _text_files() -> list[Path]:
    """Tracked files plus untracked ones git does not ignore, limited to text documents."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    paths = [ROOT / name for name in listed.split("\0") if name]
    return [p for p in paths if p.is_file() and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES)]


def test_no_file_points_outside_the_repository() -> None:
    """The repository documents itself (docs/); papers are cited by title, never by path."""
    files = _text_files()
    assert any(p.name == "algorithms.md" for p in files)  # the listing really covers docs/
    bad = [
        f"{p.relative_to(ROOT).as_posix()}: {needle}"
        for p in files
        for needle in OUTSIDE_DOCS
        if needle in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert bad == []
