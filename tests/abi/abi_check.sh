#!/usr/bin/env bash
# ABI check of libmongoelector against the committed baseline.
#
#   abi_check.sh LIBRARY HEADERS_DIR BASELINE SOURCE_DIR          compare
#   abi_check.sh --update LIBRARY HEADERS_DIR BASELINE SOURCE_DIR rewrite the baseline
#
# abidw describes the library's ABI from its DWARF, restricted to the types of the public
# header (HEADERS_DIR); paths are dropped or made relative to SOURCE_DIR, so the baseline
# is the same whatever the checkout or build directory. abidiff then compares the
# baseline with it.
#
# Policy (stricter than abidiff's own "incompatible" bit):
#   * abidiff exit bit 3 (8, incompatible change: a removed function...)  -> fail
#   * a changed function or variable (a parameter or a public struct changed) -> fail:
#     in a C API that means a layout or signature change. Appending a field to an
#     options struct is compatible by design (version field), but is a deliberate act:
#     review it, then run with --update (or `cmake --build <dir> --target abi-update`).
#   * added functions or variables                                         -> pass
# Exit: 0 pass, 1 fail, 77 skipped (abigail-tools not installed).
set -euo pipefail

update=0
if [[ "${1:-}" == "--update" ]]; then
  update=1
  shift
fi
if [[ $# -ne 4 ]]; then
  echo "usage: $0 [--update] LIBRARY HEADERS_DIR BASELINE SOURCE_DIR" >&2
  exit 2
fi
library=$1 headers=$2 baseline=$3 srcdir=$4

for tool in abidw abidiff; do
  if ! command -v "$tool" >/dev/null; then
    echo "abi_check: $tool not found (Debian: apt-get install abigail-tools): skipped"
    exit 77
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

current=$tmp/current.abi
# Only what the exported functions reach, only types of the public header (opaque handles
# stay declarations), no source locations (line numbers of .cpp files are not ABI).
abidw --headers-dir "$headers" --exported-interfaces-only --drop-private-types \
  --drop-undefined-syms --no-corpus-path --no-comp-dir-path --no-show-locs \
  --no-architecture --no-elf-needed --type-id-style hash --out-file "$tmp/raw.abi" "$library"
# Translation units are named by their source paths: make them relative to SOURCE_DIR,
# from an absolute path or from one relative to the build directory (ccache's base_dir
# compiles ../../src/x.cpp for /src/x.cpp).
src=${srcdir%/}
sed -e "s|\([\"']\)\(\.\./\)*/\{0,1\}${src#/}/|\1|g" "$tmp/raw.abi" >"$current"

# Without debug info abidw sees symbols but no types: such a check would prove nothing.
if ! grep -q '<function-decl name=.mongoelector_version' "$current"; then
  echo "abi_check: no debug info for the public functions in $library (build with -g)" >&2
  exit 1
fi
if grep -q "$srcdir" "$current"; then
  echo "abi_check: the ABI description still contains the source path $srcdir" >&2
  exit 1
fi

if [[ $update -eq 1 ]]; then
  cp "$current" "$baseline"
  echo "abi_check: wrote $baseline"
  exit 0
fi
if [[ ! -f "$baseline" ]]; then
  echo "abi_check: no baseline $baseline (create it with --update)" >&2
  exit 1
fi

set +e
abidiff --no-show-locs "$baseline" "$current" >"$tmp/report.txt" 2>&1
rc=$?
set -e
cat "$tmp/report.txt"

if (((rc & 1) || (rc & 2))); then
  echo "abi_check: abidiff failed (exit $rc)" >&2
  exit 1
fi
if ((rc & 8)); then
  echo "abi_check: FAIL: ABI-incompatible change against $baseline (abidiff exit $rc)" >&2
  exit 1
fi
# "Functions changes summary: 0 Removed, 1 Changed (2 filtered out), 3 Added functions"
changed=$(sed -nE 's/^ *(Functions|Variables) changes summary: ([0-9]+) Removed(\s*\([^)]*\))?, ([0-9]+) Changed.*/\2 \4/p' \
  "$tmp/report.txt" | awk '{ s += $1 + $2 } END { print s + 0 }')
if ((changed > 0)); then
  echo "abi_check: FAIL: $changed existing function(s)/variable(s) removed or changed (abidiff exit $rc)." >&2
  echo "  If the change is intended and compatible (a field appended to an options struct)," >&2
  echo "  regenerate the baseline: cmake --build <build-dir> --target abi-update" >&2
  exit 1
fi
if ((rc & 4)); then
  echo "abi_check: compatible additions only (abidiff exit $rc); update the baseline to record them"
else
  echo "abi_check: ABI identical to $baseline"
fi
exit 0
