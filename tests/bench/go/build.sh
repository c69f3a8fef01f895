#!/usr/bin/env bash
# Builds the Go contender (main.go) against the Go binding of this checkout, whatever its
# module path currently is (read from capi/go/go.mod), linking the libmongoelector of
# BUILD_DIR (the binding's `mongoelector_dev` tag: header from capi/include).
#
#   bash tests/bench/go/build.sh REPO BUILD_DIR OUTPUT
set -euo pipefail
REPO="$1" BUILD="$2" OUT="$3"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v go >/dev/null || { echo "go not found" >&2; exit 1; }
MOD="$(sed -n 's/^module[[:space:]]\{1,\}//p' "$REPO/capi/go/go.mod" | head -n 1)"
[[ -n "$MOD" ]] || { echo "no module path in $REPO/capi/go/go.mod" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
sed "s#\"mongoelector_binding\"#\"$MOD\"#" "$HERE/main.go" >"$TMP/main.go"
cp "$HERE/clock_linux.go" "$TMP/"
cat >"$TMP/go.mod" <<MOD
module benchcontender

go 1.22

require $MOD v0.0.0

replace $MOD => $REPO/capi/go
MOD
cd "$TMP"
GOFLAGS=-mod=mod CGO_ENABLED=1 CGO_LDFLAGS="-L$BUILD/capi -Wl,-rpath,$BUILD/capi" \
  go build -tags mongoelector_dev -o "$OUT.tmp" .
mv -f "$OUT.tmp" "$OUT"
echo "built $OUT against $MOD ($REPO/capi/go)"
