#!/usr/bin/env bash
# Go binding tests: tests/bindings/run_go.sh [BUILD_DIR]
# Builds libmongoelector, then gofmt, `go vet` and `go test -race` in capi/go against a
# real server: MONGOELECTOR_TEST_URI if set, else a mongo-java-server started for the
# run (MONGOELECTOR_NO_SERVER=1: run without one; server tests then skip). Then the same
# in capi/go/k8slock, the client-go adapter: a module of its own (so that the binding's
# module does not depend on client-go), whose dependencies `go` downloads through
# GOPROXY, checked against the committed go.sum (-mod=readonly).
#
# The package is built the way users build it, through `pkg-config mongoelector` (its
# default, no build tags): this script writes a mongoelector.pc for the BUILD TREE
# (header from capi/include, library from MONGOELECTOR_LIB_DIR) into a temporary
# directory on PKG_CONFIG_PATH, and sets no CGO_CFLAGS/CGO_LDFLAGS. `go vet -tags
# mongoelector_dev` keeps the in-checkout development build compiling too. The module
# built from a copy outside the checkout, against an INSTALLED library:
# tests/consumer/go_module.sh (run by tests/consumer/run.sh).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"
with_server "$0" "$@"
cd "$REPO/capi/go"
export CGO_ENABLED=1
unset CGO_CFLAGS CGO_LDFLAGS

PCDIR="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-go-pc.XXXXXX")"
trap 'rm -rf "$PCDIR"' EXIT
version="$(sed -n 's/^#define MONGOELECTOR_VERSION_STRING "\(.*\)"/\1/p' "$REPO/capi/include/mongoelector/common.h")"
cat >"$PCDIR/mongoelector.pc" <<EOF
Name: mongoelector
Description: libmongoelector build tree $BUILD (written by tests/bindings/run_go.sh)
Version: $version
Libs: -L$MONGOELECTOR_LIB_DIR -lmongoelector
Cflags: -I$REPO/capi/include
EOF
export PKG_CONFIG_PATH="$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The tests (and the helper processes they re-execute) load the build tree's library.
export LD_LIBRARY_PATH="$MONGOELECTOR_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

unformatted="$(gofmt -l .)"
[[ -z "$unformatted" ]] || { echo "gofmt needed: $unformatted" >&2; exit 1; }
go vet ./...
CGO_LDFLAGS="-L$MONGOELECTOR_LIB_DIR" go vet -tags mongoelector_dev ./...
go test -race -count=1 -v ./...

# The client-go adapter (the main module's ./... stops at its go.mod).
cd "$REPO/capi/go/k8slock"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"
unformatted="$(gofmt -l .)"
[[ -z "$unformatted" ]] || { echo "gofmt needed in k8slock: $unformatted" >&2; exit 1; }
go vet ./...
go test -race -count=1 -v ./...
