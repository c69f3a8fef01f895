#!/usr/bin/env bash
# Rust binding tests: tests/bindings/run_rust.sh [BUILD_DIR]
# Builds libmongoelector, then `cargo test` of the capi/rust workspace (header drift
# check of mongoelector-sys, the safe crate's unit and integration tests) against a real
# server: MONGOELECTOR_TEST_URI if set, else a mongo-java-server started for the run.
# Cargo's target dir: CARGO_TARGET_DIR if set, else capi/rust/target (gitignored).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"
with_server "$0" "$@"
cd "$REPO/capi/rust"
export LD_LIBRARY_PATH="$MONGOELECTOR_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo test --workspace --no-fail-fast
