#!/usr/bin/env bash
# Go binding tests: tests/bindings/run_go.sh [BUILD_DIR]
# Builds libmongoelector, then gofmt, `go vet` and `go test -race` in capi/go against a
# real server: MONGOELECTOR_TEST_URI if set, else a mongo-java-server started for the
# run (MONGOELECTOR_NO_SERVER=1: run without one; server tests then skip).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"
with_server "$0" "$@"
cd "$REPO/capi/go"
export CGO_ENABLED=1
export CGO_LDFLAGS="-L$MONGOELECTOR_LIB_DIR ${CGO_LDFLAGS:-}"
export LD_LIBRARY_PATH="$MONGOELECTOR_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unformatted="$(gofmt -l .)"
[[ -z "$unformatted" ]] || { echo "gofmt needed: $unformatted" >&2; exit 1; }
go vet ./...
go test -race -count=1 -v ./...
