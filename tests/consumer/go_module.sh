#!/usr/bin/env bash
# The Go module as a user gets it: `go get` from a module proxy into a fresh, read-only
# module cache (no ../include next to it, no checkout), built against an INSTALLED
# libmongoelector found through pkg-config alone.
#
#   tests/consumer/go_module.sh PREFIX     (PREFIX: a `cmake --install --prefix` tree)
#
# capi/go is zipped the way the Go proxy serves a module from a subdirectory (files
# under github.com/mongoelector/mongoelector/capi/go@vX.Y.Z/) into a file:// GOPROXY.
# A fresh main module then runs `go get github.com/mongoelector/mongoelector/capi/go@latest`
# and `go build` with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig and no CGO_CFLAGS or
# CGO_LDFLAGS, and the program runs WITHOUT LD_LIBRARY_PATH (the .pc's Libs carry an
# rpath to the prefix's lib/): it prints the library version and takes a lock on a SQLite file (no
# server needed). Also checks that the build fails, naming pkg-config and mongoelector,
# when pkg-config cannot find the library. Ends with "go module: N passed, N failed".
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PREFIX="$(cd "${1:?usage: go_module.sh PREFIX}" && pwd)"
MODULE=github.com/mongoelector/mongoelector/capi/go

passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }

PC="$(find "$PREFIX" -name mongoelector.pc | head -1)"
[[ -n "$PC" ]] || { echo "FAIL: no mongoelector.pc under $PREFIX" >&2; exit 1; }
PCDIR="$(dirname "$PC")"
VERSION="v$(PKG_CONFIG_PATH="$PCDIR" pkg-config --modversion mongoelector)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-gomod.XXXXXX")"
# The module cache is read-only (as Go leaves it): make it writable to delete it.
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT

# ---- a file:// module proxy holding capi/go as MODULE@VERSION ------------------------
grep -qx "module $MODULE" "$REPO/capi/go/go.mod" \
  && ok "capi/go/go.mod declares module $MODULE" \
  || bad "capi/go/go.mod declares module $MODULE (got: $(head -1 "$REPO/capi/go/go.mod"))"
AT="$WORK/proxy/$MODULE/@v"
mkdir -p "$AT"
echo "$VERSION" >"$AT/list"
printf '{"Version":"%s","Time":"2024-01-01T00:00:00Z"}\n' "$VERSION" >"$AT/$VERSION.info"
cp "$REPO/capi/go/go.mod" "$AT/$VERSION.mod"
python3 - "$REPO/capi/go" "$MODULE@$VERSION" "$AT/$VERSION.zip" <<'EOF'
import os, sys, zipfile
src, prefix, out = sys.argv[1:]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for root, dirs, files in os.walk(src):
        # Nested modules (capi/go/k8slock) are not part of this one, as on the real proxy.
        dirs[:] = sorted(d for d in dirs if not os.path.isfile(os.path.join(root, d, "go.mod")))
        for f in sorted(files):
            path = os.path.join(root, f)
            z.write(path, prefix + "/" + os.path.relpath(path, src))
EOF

# ---- a fresh main module ---------------------------------------------------------------
APP="$WORK/app"
mkdir -p "$APP"
cat >"$APP/go.mod" <<'EOF'
module example.com/consumer

go 1.22
EOF
cat >"$APP/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
)

func main() {
	fmt.Printf("libmongoelector %s (header %s)\n", mongoelector.Version(), mongoelector.HeaderVersion)
	client, err := mongoelector.NewClient("sqlite://"+os.Args[1], "")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	lock, err := mongoelector.NewLocker(ctx, client, "go-consumer", &mongoelector.LockerOptions{TTL: time.Minute})
	if err != nil {
		panic(err)
	}
	defer lock.Close()
	fence, err := lock.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("lock taken, fence %d\n", fence)
	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
}
EOF

# Only Go's own settings and PKG_CONFIG_PATH: no CGO_* flags, no workspace, no network.
goenv=(env -u CGO_CFLAGS -u CGO_CPPFLAGS -u CGO_LDFLAGS -u GOFLAGS -u LD_LIBRARY_PATH
  GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=1
  GOPROXY="file://$WORK/proxy" GOSUMDB=off GONOSUMDB= GOPRIVATE= GONOPROXY=
  GOMODCACHE="$WORK/modcache" PKG_CONFIG_PATH="$PCDIR")
cd "$APP"
if "${goenv[@]}" go get "$MODULE@latest" >"$WORK/get.log" 2>&1; then
  ok "go get $MODULE@latest ($VERSION from the file proxy)"
else
  cat "$WORK/get.log" >&2
  bad "go get $MODULE@latest"
fi
CACHED="$WORK/modcache/$MODULE@$VERSION"
# (Checked on the mode bits: root may write anyway.)
if [[ -f "$CACHED/cgo.go" && -z "$(find "$CACHED" -perm /222 | head -1)" && ! -e "$CACHED/../include" ]]; then
  ok "module cache holds the module read-only, without the C header next to it"
else
  bad "module cache holds the module read-only ($CACHED)"
fi

start=$SECONDS
if "${goenv[@]}" go build -o "$WORK/consumer" . >"$WORK/build.log" 2>&1; then
  ok "go build with only PKG_CONFIG_PATH=$PCDIR ($((SECONDS - start)) s)"
  LIBDIR="$(cd "$(PKG_CONFIG_PATH="$PCDIR" pkg-config --variable=libdir mongoelector)" && pwd)"
  # No LD_LIBRARY_PATH: cgo links with the .pc's Libs, rpath included.
  if out="$(env -u LD_LIBRARY_PATH timeout 60 "$WORK/consumer" "$WORK/locks.db" 2>&1)"; then
    echo "$out" | sed 's/^/    /'
    want="libmongoelector ${VERSION#v} (header ${VERSION#v})"
    grep -qxF "$want" <<<"$out" && ok "prints the library version: $want" \
      || bad "prints the library version: want '$want'"
    grep -q '^lock taken, fence [1-9]' <<<"$out" && ok "takes a lock (SQLite)" || bad "takes a lock (SQLite)"
    loaded="$(env -u LD_LIBRARY_PATH ldd "$WORK/consumer" | grep libmongoelector || true)"
    [[ "$loaded" == *"$PREFIX"* ]] && ok "loads libmongoelector from the prefix" \
      || bad "loads libmongoelector from the prefix: $loaded"
  else
    echo "$out" | sed 's/^/    /' >&2
    bad "the Go consumer runs"
  fi
else
  cat "$WORK/build.log" >&2
  bad "go build with only PKG_CONFIG_PATH=$PCDIR"
fi

# Without the library on pkg-config's path the build must say what is missing. (A fresh
# GOCACHE: Go's build cache does not key cgo packages on pkg-config's answer.)
mkdir -p "$WORK/empty"
if "${goenv[@]}" PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$WORK/empty" GOCACHE="$WORK/gocache" \
    go build -o "$WORK/consumer2" . >"$WORK/nopc.log" 2>&1; then
  bad "go build fails when pkg-config cannot find mongoelector"
elif grep -q 'pkg-config' "$WORK/nopc.log" && grep -q 'mongoelector' "$WORK/nopc.log"; then
  ok "without the library, go build fails naming pkg-config: $(grep -m1 -i 'not found\|no package' "$WORK/nopc.log" || true)"
else
  cat "$WORK/nopc.log" >&2
  bad "go build's failure names pkg-config and mongoelector"
fi

echo "go module: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
