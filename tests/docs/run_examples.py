#!/usr/bin/env python3
"""Runs every code example of README.md and docs/**/*.md, so that none stops working.

Writing examples (read this before adding one)
------------------------------------------------
Every fenced code block is one of:

* a **complete program**, run by this script (the default for ```python, ```c and ```sh):
    - ``python``: run with the interpreter given by ``--python`` (the installed package),
      and checked with ``mypy --strict``. Use ``memory://NAME`` or ``sqlite:///...`` URIs,
      or ``os.environ.get("MONGO_URI", "mongodb://localhost:27017")`` for a real server
      (then mark it ``needs-server``, below: this script sets MONGO_URI to
      $MONGOELECTOR_TEST_URI).
    - ``c``: compiled with gcc against the built library (``--include-dir``,
      ``--lib-dir``, with an rpath), then run.
    - ``sh`` / ``bash`` / ``shell``: run with ``bash -eu`` in an empty temporary directory,
      with the ``mongoelector`` command (``--cli-dir``) first on PATH and a private HOME
      and XDG_STATE_HOME.
    - ``go``: a block that starts with ``package main`` is built in a temporary module
      (``replace`` pointing at capi/go, ``-tags mongoelector_dev``, linked against
      ``--lib-dir`` with an rpath) and run; any other Go block must be a fragment.
    - ``rust``: a block that defines ``fn main`` is built as a binary of a temporary crate
      outside the repository (``mongoelector`` by path from capi/rust, the workspace's
      Cargo.lock, linked against ``--lib-dir`` with an rpath) and run; any other Rust
      block must be a fragment. Cargo's target directory: ``--cargo-target-dir``
      (default $CARGO_TARGET_DIR, else a directory inside the temporary crate).
* a **fragment**: part of a program, or a command that installs or builds something.
  Put an HTML comment on the line right before the fence:

      <!-- fragment -->              (optionally with a reason: <!-- fragment: needs X -->)

* other languages (``text``, ``json``, ``toml``, blocks without a language: output,
  documents, grammar) are not programs and are only counted.

More markers, same place (several may share one comment line or stand on consecutive lines):

    <!-- needs-server -->    run only when MONGOELECTOR_TEST_URI is set (else "skipped")
    <!-- no-mypy -->         run it, but do not type-check it (say why in the text)
    <!-- expect-exit: N -->  the program must exit with status N (default 0)

Usage::

    python3 tests/docs/run_examples.py --python VENV/bin/python \
        --lib-dir BUILD/capi --cli-dir BUILD/capi/cli [--go] [--rust] [--no-mypy] [FILES...]

Prints one line per failure and a table of blocks per language (run / fragment /
skipped / not run / failed); exits 1 if any block failed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)[^\n]*$")
MARKER = re.compile(r"<!--\s*([\w-]+)(?:\s*:\s*(.*?))?\s*-->")
LANGS = {
    "python": "python",
    "py": "python",
    "c": "c",
    "sh": "sh",
    "bash": "sh",
    "shell": "sh",
    "go": "go",
    "rust": "rust",
}
TIMEOUT = 300
GO_MODULE = "github.com/mongoelector/mongoelector/capi/go"


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            j += 1
        body = [
            ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1 : j]
        ]
        markers: dict[str, str] = {}
        k = i - 1
        while k >= 0 and lines[k].strip().startswith("<!--"):
            for mm in MARKER.finditer(lines[k]):
                markers[mm.group(1)] = mm.group(2) or ""
            k -= 1
        out.append(
            Block(
                path,
                i + 1,
                LANGS.get(info, "text:" + (info or "-")),
                "\n".join(body) + "\n",
                markers,
            )
        )
        i = j + 1
    return out


def run(cmd: list[str], cwd: Path, env: dict[str, str], expect: int) -> str | None:
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT} s"
    if p.returncode != expect:
        tail = (p.stdout + p.stderr).strip().split("\n")[-15:]
        return f"exit {p.returncode} (expected {expect})\n    " + "\n    ".join(tail)
    return None


def run_rust(
    b: Block, n: int, tmp: Path, env: dict[str, str], args: argparse.Namespace, expect: int
) -> str | None:
    """Builds block b as binary b<n> of one crate shared by all Rust blocks, then runs it."""
    crate = tmp / "rust-examples"
    lib = str(Path(args.lib_dir).resolve())
    if not crate.exists():
        (crate / "src" / "bin").mkdir(parents=True)
        (crate / "src" / "lib.rs").write_text("")
        # The dependency versions the bindings are tested with.
        shutil.copy(ROOT / "capi" / "rust" / "Cargo.lock", crate / "Cargo.lock")
        (crate / "Cargo.toml").write_text(
            '[package]\nname = "examples"\nversion = "0.0.0"\nedition = "2021"\n'
            'publish = false\nbuild = "build.rs"\n\n[dependencies]\n'
            f'mongoelector = {{ path = "{ROOT / "capi" / "rust" / "mongoelector"}" }}\n\n'
            "[workspace]\n"
        )
        # A program of a dependent crate gets no rpath from mongoelector-sys (cargo does
        # not pass link arguments on to dependents): it adds its own, as a user would.
        (crate / "build.rs").write_text(
            f'fn main() {{ println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}"); }}\n'
        )
    (crate / "src" / "bin" / f"b{n}.rs").write_text(b.code)
    target = Path(args.cargo_target_dir).resolve() if args.cargo_target_dir else crate / "target"
    cenv = dict(
        env,
        HOME=os.environ.get("HOME", env["HOME"]),
        MONGOELECTOR_LIB_DIR=lib,
        CARGO_TARGET_DIR=str(target),
    )
    err = run(["cargo", "build", "--quiet", "--bin", f"b{n}"], crate, cenv, 0)
    if err is None:
        err = run([str(target / "debug" / f"b{n}")], tmp / f"b{n}", env, expect)
    return err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with mongoelector installed (default: this one)",
    )
    ap.add_argument(
        "--lib-dir",
        default=os.environ.get("MONGOELECTOR_LIB_DIR", ""),
        help="directory of libmongoelector.so (default $MONGOELECTOR_LIB_DIR)",
    )
    ap.add_argument("--include-dir", default=str(ROOT / "capi" / "include"))
    ap.add_argument("--cli-dir", default="", help="directory of the mongoelector command")
    ap.add_argument("--no-mypy", action="store_true", help="skip mypy --strict")
    ap.add_argument(
        "--go", action="store_true", help="build and run Go blocks (needs go and --lib-dir)"
    )
    ap.add_argument(
        "--rust", action="store_true", help="build and run Rust blocks (needs cargo and --lib-dir)"
    )
    ap.add_argument(
        "--cargo-target-dir",
        default=os.environ.get("CARGO_TARGET_DIR", ""),
        help="cargo's target directory for Rust blocks (kept between runs)",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="print every block run")
    args = ap.parse_args()

    files = [f.resolve() for f in args.files] or [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
    ]
    blocks = [b for f in files for b in blocks_of(f)]
    server = os.environ.get("MONGOELECTOR_TEST_URI", "")
    counts: dict[str, dict[str, int]] = {}
    failures: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="mongoelector-docs-"))
    env = dict(os.environ, HOME=str(tmp / "home"), XDG_STATE_HOME=str(tmp / "state"))
    (tmp / "home").mkdir()
    (tmp / "state").mkdir()
    env.pop("MONGOELECTOR_URI", None)
    if server:  # the examples that need a server read MONGO_URI
        env["MONGO_URI"] = server
    if args.cli_dir:
        env["PATH"] = str(Path(args.cli_dir).resolve()) + os.pathsep + env["PATH"]
    typed: list[tuple[Block, Path]] = []

    def count(lang: str, what: str) -> None:
        counts.setdefault(lang, {}).setdefault(what, 0)
        counts[lang][what] += 1

    for n, b in enumerate(blocks):
        lang = b.lang
        if lang.startswith("text:"):
            count("(text, output)", "not code")
            continue
        if "fragment" in b.markers:
            count(lang, "fragment")
            continue
        if (lang == "rust" and not args.rust) or (lang == "go" and not args.go):
            count(lang, "not run")
            continue
        if "needs-server" in b.markers and not server:
            count(lang, "skipped")
            if lang == "python" and "no-mypy" not in b.markers:  # type-checked all the same
                src = tmp / f"example_{n}.py"
                src.write_text(b.code)
                typed.append((b, src))
            continue
        expect = int(b.markers.get("expect-exit", "0") or 0)
        work = tmp / f"b{n}"
        work.mkdir()
        if args.verbose:
            print(f"run {b.where} ({lang})", flush=True)
        err: str | None
        if lang == "python":
            src = work / f"example_{n}.py"
            src.write_text(b.code)
            err = run([args.python, src.name], work, env, expect)
            if "no-mypy" not in b.markers:
                typed.append((b, src))
        elif lang == "c":
            if not args.lib_dir:
                err = "no --lib-dir (or MONGOELECTOR_LIB_DIR) to link C examples against"
            else:
                (work / "example.c").write_text(b.code)
                lib = str(Path(args.lib_dir).resolve())
                err = run(
                    [
                        "gcc",
                        "-std=c99",
                        "-Wall",
                        "-Werror",
                        "-o",
                        "example",
                        "example.c",
                        "-I",
                        args.include_dir,
                        "-L",
                        lib,
                        "-lmongoelector",
                        "-Wl,-rpath," + lib,
                    ],
                    work,
                    env,
                    0,
                )
                if err is None:
                    err = run(["./example"], work, env, expect)
        elif lang == "go":
            if not b.code.lstrip().startswith("package main"):
                err = "a Go block must be a complete program (package main) or a fragment"
            elif not args.lib_dir:
                err = "no --lib-dir (or MONGOELECTOR_LIB_DIR) to link Go examples against"
            else:
                lib = str(Path(args.lib_dir).resolve())
                (work / "main.go").write_text(b.code)
                (work / "go.mod").write_text(
                    "module example\n\ngo 1.22\n\n"
                    f"require {GO_MODULE} v0.0.0\n\n"
                    f"replace {GO_MODULE} => {ROOT / 'capi' / 'go'}\n"
                )
                genv = dict(
                    env,
                    CGO_ENABLED="1",
                    HOME=os.environ.get("HOME", env["HOME"]),
                    CGO_CFLAGS=f"-I{args.include_dir}",
                    CGO_LDFLAGS=f"-L{lib} -Wl,-rpath,{lib}",
                )
                err = run(
                    ["go", "build", "-tags", "mongoelector_dev", "-o", "example", "."],
                    work,
                    genv,
                    0,
                )
                if err is None:
                    err = run(["./example"], work, env, expect)
        elif lang == "rust":
            if not re.search(r"^\s*fn main\s*\(", b.code, re.M):
                err = "a Rust block must be a complete program (fn main) or a fragment"
            elif not args.lib_dir:
                err = "no --lib-dir (or MONGOELECTOR_LIB_DIR) to link Rust examples against"
            else:
                err = run_rust(b, n, tmp, env, args, expect)
        else:  # sh
            (work / "example.sh").write_text(b.code)
            err = run(["bash", "-eu", "example.sh"], work, env, expect)
        if err:
            count(lang, "failed")
            failures.append(f"FAIL {b.where} ({lang}): {err}")
        else:
            count(lang, "run")

    if typed and not args.no_mypy:
        # One mypy process for all blocks: each file is its own module.
        mypy = [
            args.python,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp / "mypy-cache"),
            *[str(p.relative_to(tmp)) for _, p in typed],
        ]
        p = subprocess.run(mypy, capture_output=True, text=True, cwd=tmp)
        by_file: dict[str, list[str]] = {}
        for ln in (p.stdout + p.stderr).splitlines():
            by_file.setdefault(ln.split(":", 1)[0], []).append(ln)
        if p.returncode not in (0, 1) or (
            p.returncode == 1 and not any(": error:" in ln for ln in p.stdout.splitlines())
        ):
            failures.append("FAIL mypy did not run: " + (p.stdout + p.stderr)[-500:])
        for b, src in typed:
            msgs = [m for m in by_file.get(str(src.relative_to(tmp)), []) if ": error:" in m]
            if msgs:
                count("python", "mypy failed")
                failures.append(
                    f"FAIL {b.where} (mypy --strict):\n    "
                    + "\n    ".join(m.replace(str(src.relative_to(tmp)), "line") for m in msgs)
                )
            else:
                count("python", "mypy ok")

    for f in failures:
        print(f, file=sys.stderr)
    cols = ["run", "fragment", "skipped", "not run", "failed", "mypy ok", "mypy failed", "not code"]
    print(f"\n{'language':<16}" + "".join(f"{c:>12}" for c in cols))
    for lang in sorted(counts):
        print(f"{lang:<16}" + "".join(f"{counts[lang].get(c, 0):>12}" for c in cols))
    print(
        f"{len(blocks)} blocks in {len(files)} files; "
        f"{'server ' + server if server else 'no MONGOELECTOR_TEST_URI: needs-server blocks skipped'}"
    )
    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
