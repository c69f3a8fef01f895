#!/usr/bin/env bash
# Go + Rust binding tests and the installed-library consumer test, one server for all:
#   tests/bindings/run_all.sh [BUILD_DIR]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"
with_server "$0" "$@"
status=0
"$HERE/run_go.sh" "$BUILD" || status=1
"$HERE/run_rust.sh" "$BUILD" || status=1
"$REPO/tests/consumer/run.sh" "$BUILD" || status=1
exit $status
