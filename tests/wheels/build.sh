#!/usr/bin/env bash
# Builds the self-contained Linux wheels of the Python package:
#
#   bash tests/wheels/build.sh [--out DIR] [PYTHON...]
#
# PYTHON: the interpreters to build for (default: every CPython 3.9 to 3.13 found, in
# pyenv's versions or on PATH). Wheels go to DIR (default: the cache's wheel/dist).
#
# Each wheel links a static mongo-c-driver, OpenSSL and SQLite (tests/wheels/deps.sh,
# built once into the cache) and zig's libc++ into mongoelector._native and the
# `mongoelector` command, compiled by zig against glibc $GLIBC_TARGET (tools.sh);
# `auditwheel repair` then gives it the manylinux tag that glibc level allows. Checked
# here: the module exports PyInit__native only, neither binary needs a library outside
# glibc, auditwheel accepts the tag. Cache: ${MONGOELECTOR_CACHE:-~/.cache/mongoelector}/wheel.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$HERE/tools.sh"

OUT="$WHEEL_CACHE/dist"
PYTHONS=()
while (($#)); do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) PYTHONS+=("$1"); shift ;;
  esac
done
if ((${#PYTHONS[@]} == 0)); then
  pyenv_root="$(pyenv root 2>/dev/null || true)"
  for minor in 9 10 11 12 13; do
    py="$(ls -d "$pyenv_root"/versions/3.$minor.*/bin/python3.$minor 2>/dev/null | sort -V | tail -1)"
    [[ -n "$py" ]] || py="$(command -v "python3.$minor" 2>/dev/null || true)"
    [[ -n "$py" ]] && "$py" -c 'import sys' 2>/dev/null && PYTHONS+=("$py")
  done
  ((${#PYTHONS[@]})) || PYTHONS=(python3)
fi

start=$SECONDS
apt_need cmake ninja-build binutils
wheel_tools
PREFIX="$(bash "$HERE/deps.sh" | tail -n 1)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
RAW="$WHEEL_CACHE/raw"
rm -rf "$RAW"
mkdir -p "$RAW"

built=()
for py in "${PYTHONS[@]}"; do
  tag="$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
  wsay "wheel for $tag ($py)"
  # A venv per interpreter with a current pip (-C needs pip >= 23.1) and the build
  # requirements (pyproject.toml); the interpreter's own installation is left alone.
  # Without build isolation the pybind11 headers keep their path, so rebuilds are
  # incremental.
  venv="$WHEEL_CACHE/build-venv-$tag"
  if [[ ! -f "$venv/.complete" ]]; then
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade 'pip>=23.1'
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
      'scikit-build-core>=0.11' 'pybind11>=2.11'
    touch "$venv/.complete"
  fi
  # One incremental build tree per interpreter and dependency prefix, outside the source.
  build_dir="$WHEEL_CACHE/build/py-$tag-$(basename "$PREFIX")"
  CC="$ZIG_BIN/cc" CXX="$ZIG_BIN/c++" "$venv/bin/python" -m pip wheel -q --disable-pip-version-check \
    --no-deps --no-build-isolation -w "$RAW/$tag" "$ROOT" \
    -C build-dir="$build_dir" \
    -C cmake.define.MONGOELECTOR_STATIC_DRIVER="$PREFIX" \
    -C cmake.define.MONGOELECTOR_SQLITE_AMALGAMATION="$PREFIX/sqlite" \
    -C cmake.build-type=MinSizeRel \
    -C cmake.define.CMAKE_SHARED_LINKER_FLAGS=-Wl,--gc-sections \
    -C cmake.define.CMAKE_EXE_LINKER_FLAGS=-Wl,--gc-sections
  raw="$(ls "$RAW/$tag"/mongoelector-*.whl)"
  bash "$HERE/check_wheel.sh" "$raw"
  # Nothing to vendor (all static): repair only proves the policy and retags.
  "$TOOLS_VENV/bin/auditwheel" repair -w "$RAW/$tag/repaired" "$raw" >"$RAW/$tag/repair.log" 2>&1 ||
    { cat "$RAW/$tag/repair.log" >&2; exit 1; }
  whl="$(ls "$RAW/$tag/repaired"/*.whl)"
  rm -f "$OUT/$(basename "$whl")"
  mv "$whl" "$OUT/"
  built+=("$OUT/$(basename "$whl")")
done

wsay "wheels ($((SECONDS - start)) s)"
for whl in "${built[@]}"; do
  printf '%s  %s KB\n' "$whl" "$(($(stat -c %s "$whl") / 1024))"
done
"$TOOLS_VENV/bin/auditwheel" show "${built[0]}"
