#!/usr/bin/env python3
"""Checks that every place naming the project's version agrees with the VERSION file.

Read from VERSION: CMake (project(VERSION ...), hence the library's file name, the .pc and
the CMake package version) and the Python package's metadata (pyproject.toml). Repeated,
and checked here: the C header's macros, python/mongoelector/__init__.py's __version__,
the Rust crates' version (workspace) and the safe crate's dependency on the -sys crate,
the generated Rust bindings, and a CHANGELOG.md heading. With --build-dir, also the
generated mongoelector.pc and CMake package version file, and `mongoelector --version`.

    python3 tests/docs/check_versions.py [--build-dir BUILD]

Prints each mismatch and exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", type=Path, help="a configured (and built) CMake tree")
    args = ap.parse_args()

    version = (ROOT / "VERSION").read_text().strip()
    errors: list[str] = []
    checked = 0

    def expect(what: str, found: str | None, want: str = version) -> None:
        nonlocal checked
        checked += 1
        if found != want:
            errors.append(f"{what}: {found!r}, VERSION says {want!r}")

    def grep(path: str, pattern: str) -> str | None:
        m = re.search(pattern, (ROOT / path).read_text(), re.M)
        return m.group(1) if m else None

    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        print(f"VERSION: {version!r} is not MAJOR.MINOR.PATCH", file=sys.stderr)
        return 1
    major, minor, patch = m.groups()

    cmake = (ROOT / "CMakeLists.txt").read_text()
    checked += 1
    if (
        not re.search(r'file\(STRINGS\s+"\$\{CMAKE_CURRENT_SOURCE_DIR\}/VERSION"', cmake)
        or "project(mongoelector VERSION ${MONGOELECTOR_VERSION}" not in cmake
    ):
        errors.append("CMakeLists.txt: project() does not take its version from VERSION")
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    expect(
        "pyproject.toml: [tool.scikit-build.metadata.version] input",
        py["tool"]["scikit-build"]["metadata"]["version"].get("input"),
        "VERSION",
    )

    header = "capi/include/mongoelector/common.h"
    expect(
        f"{header}: MONGOELECTOR_VERSION_MAJOR",
        grep(header, r"#define MONGOELECTOR_VERSION_MAJOR (\d+)"),
        major,
    )
    expect(
        f"{header}: MONGOELECTOR_VERSION_MINOR",
        grep(header, r"#define MONGOELECTOR_VERSION_MINOR (\d+)"),
        minor,
    )
    expect(
        f"{header}: MONGOELECTOR_VERSION_PATCH",
        grep(header, r"#define MONGOELECTOR_VERSION_PATCH (\d+)"),
        patch,
    )
    expect(
        f"{header}: MONGOELECTOR_VERSION_STRING",
        grep(header, r'#define MONGOELECTOR_VERSION_STRING "([^"]*)"'),
    )
    expect(
        "python/mongoelector/__init__.py: __version__",
        grep("python/mongoelector/__init__.py", r'^__version__ = "([^"]*)"'),
    )
    cargo = tomllib.loads((ROOT / "capi/rust/Cargo.toml").read_text())
    expect(
        "capi/rust/Cargo.toml: [workspace.package] version",
        cargo["workspace"]["package"]["version"],
    )
    safe = tomllib.loads((ROOT / "capi/rust/mongoelector/Cargo.toml").read_text())
    expect(
        "capi/rust/mongoelector/Cargo.toml: mongoelector-sys dependency version",
        safe["dependencies"]["mongoelector-sys"]["version"],
    )
    expect(
        "capi/rust/mongoelector-sys/src/bindings.rs: MONGOELECTOR_VERSION_STRING",
        grep(
            "capi/rust/mongoelector-sys/src/bindings.rs",
            r'MONGOELECTOR_VERSION_STRING: &\[u8; \d+\] = b"([^"\\]*)\\0"',
        ),
    )
    checked += 1
    if not re.search(
        rf"^## \[?{re.escape(version)}\]?(\s|$)", (ROOT / "CHANGELOG.md").read_text(), re.M
    ):
        errors.append(f"CHANGELOG.md: no '## {version}' heading")

    if args.build_dir:
        build = args.build_dir.resolve()

        def field(path: Path, pattern: str) -> str | None:
            m = re.search(pattern, path.read_text(), re.M)
            return m.group(1) if m else None

        for pc in build.rglob("mongoelector.pc"):
            expect(f"{pc.relative_to(build)}: Version", field(pc, r"^Version: (\S+)"))
        for cv in build.rglob("mongoelectorConfigVersion.cmake"):
            expect(
                f"{cv.relative_to(build)}: PACKAGE_VERSION",
                field(cv, r'set\(PACKAGE_VERSION "([^"]*)"\)'),
            )
        clis = [
            p
            for p in build.rglob("mongoelector")
            if p.is_file() and p.stat().st_mode & 0o100 and "CMakeFiles" not in p.parts
        ]
        for cli in clis:
            out = subprocess.run([str(cli), "--version"], capture_output=True, text=True)
            # "mongoelector X (libmongoelector Y, C API header Z)": all three.
            found = set(re.findall(r"\d+\.\d+\.\d+\S*?(?=[ ,)]|$)", out.stdout))
            expect(
                f"{cli.relative_to(build)} --version",
                found.pop() if len(found) == 1 else out.stdout.strip(),
            )

    for e in errors:
        print(f"version mismatch: {e}", file=sys.stderr)
    print(f"version {version}: {checked} places checked, {len(errors)} mismatched")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
