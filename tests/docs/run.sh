#!/usr/bin/env bash
# The documentation suite: checks that every place naming the version agrees with VERSION
# (check_versions.py), builds the site with `mkdocs build --strict` (broken internal
# links and anchors fail it) and runs every example of README.md and docs/ with
# tests/docs/run_examples.py.
#
#   bash tests/docs/run.sh VENV BUILD_DIR
#
# Needs: VENV, a virtualenv with the mongoelector package installed (`pip install .[test]`,
# which brings mypy); mkdocs and the Material theme are installed into it here, at pinned
# versions. BUILD_DIR, a build tree with libmongoelector.so.1 and the mongoelector command
# (C, Go and Rust examples link against the first, shell examples run the second; Go
# examples run when `go` is on PATH, Rust examples when `cargo` is, in cargo's target
# directory $CARGO_TARGET_DIR, else the cache's cargo-target). Examples marked
# needs-server run only when MONGOELECTOR_TEST_URI is set (run_all.sh runs this suite
# under a fresh mongo-java-server).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:?usage: run.sh VENV BUILD_DIR}"
BUILD_DIR="$(cd "${2:?usage: run.sh VENV BUILD_DIR}" && pwd)"
PY="$VENV/bin/python"

"$PY" -m pip install -q --disable-pip-version-check \
  "mkdocs==1.6.1" "mkdocs-material==9.5.49" "mypy>=1.8"

LIB="$(find "$BUILD_DIR" -name libmongoelector.so.1 -not -path '*/CMakeFiles/*' | head -1)"
CLI="$(find "$BUILD_DIR" -name mongoelector -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -1)"
[[ -n "$LIB" ]] || { echo "no libmongoelector.so.1 under $BUILD_DIR" >&2; exit 1; }
[[ -n "$CLI" ]] || { echo "no mongoelector command under $BUILD_DIR" >&2; exit 1; }

SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
status=0
"$PY" "$ROOT/tests/docs/check_versions.py" --build-dir "$BUILD_DIR" || status=1
(cd "$ROOT" && "$PY" -m mkdocs build --strict --quiet --site-dir "$SITE") || status=1
GO=()
command -v go >/dev/null && GO=(--go)  # Go blocks need the toolchain run_all.sh installs
RUST=()
command -v cargo >/dev/null && RUST=(--rust --cargo-target-dir \
  "${CARGO_TARGET_DIR:-${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}/cargo-target}")
"$PY" "$ROOT/tests/docs/run_examples.py" --python "$PY" --lib-dir "$(dirname "$LIB")" \
  --cli-dir "$(dirname "$CLI")" "${GO[@]}" "${RUST[@]}" || status=1
exit $status
