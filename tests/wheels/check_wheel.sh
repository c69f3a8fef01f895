#!/usr/bin/env bash
# Checks the binaries of a self-contained wheel:
#
#   bash tests/wheels/check_wheel.sh WHEEL [MAX_GLIBC]
#
#  * mongoelector._native exports PyInit__native and nothing else (the statically linked
#    driver, OpenSSL, SQLite and libc++ stay hidden);
#  * the module and the `mongoelector` command need no shared library but glibc's;
#  * no symbol needs a glibc newer than MAX_GLIBC (default: $GLIBC_TARGET of tools.sh), and
#    none is left undefined without a glibc version (missing from that glibc).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/tools.sh"
WHEEL="$1"
MAX_GLIBC="${2:-$GLIBC_TARGET}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m zipfile -e "$WHEEL" "$tmp"
native="$(ls "$tmp"/mongoelector/_native*.so)"
cli="$(ls "$tmp"/mongoelector-*.data/scripts/mongoelector)"
failed=0
bad() { echo "check_wheel: FAIL: $*" >&2; failed=1; }

exports="$(nm -D --defined-only "$native" | awk '{print $3}')"
[[ "$exports" == "PyInit__native" ]] || bad "_native exports more than PyInit__native: $(echo "$exports" | head -5 | tr '\n' ' ')"

GLIBC_LIBS='^(libc|libm|libpthread|libdl|librt|libresolv)\.so\.[0-9]+$|^ld-linux-x86-64\.so\.2$'
for bin in "$native" "$cli"; do
  name="${bin#"$tmp"/}"
  while read -r lib; do
    [[ "$lib" =~ $GLIBC_LIBS ]] || bad "$name needs $lib"
  done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  # An undefined symbol without a glibc version was not in the target glibc's stubs: it
  # would fail to load there (only the module's Python API symbols may stay unversioned).
  unversioned="$(objdump -T "$bin" | grep -F '*UND*' | grep -v -E 'GLIBC_|^[0-9a-f]+  w ' |
    awk '{print $NF}' | grep -v -E '^_?Py' || true)"
  [[ -z "$unversioned" ]] || bad "$name: symbols no glibc $MAX_GLIBC provides: $(echo "$unversioned" | tr '\n' ' ')"
  newest="$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
  if [[ "$(printf '%s\n%s\n' "$newest" "$MAX_GLIBC" | sort -V | tail -1)" != "$MAX_GLIBC" ]]; then
    bad "$name needs GLIBC_$newest (> $MAX_GLIBC)"
  fi
  echo "check_wheel: $name: $(($(stat -c %s "$bin") / 1024)) KB, needs $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')(newest symbol GLIBC_$newest)"
done
((failed == 0)) && echo "check_wheel: ok ($(basename "$WHEEL"))"
exit "$failed"
