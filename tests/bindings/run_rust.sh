#!/usr/bin/env bash
# Rust binding tests: tests/bindings/run_rust.sh [BUILD_DIR]
# Checks that mongoelector-sys/src/bindings.rs is what bindgen generates from the
# headers now (mongoelector-sys/regenerate.sh --check; bindgen-cli is installed with
# cargo when missing; no library or server needed), builds libmongoelector, then
# `cargo test --workspace` of capi/rust against a real server: MONGOELECTOR_TEST_URI if
# set, else a mongo-java-server started for the run.
#   mongoelector-sys   links the library (MONGOELECTOR_LIB_DIR, exported by common.sh)
#   mongoelector       the safe crate's unit and integration tests, the log bridge, the
#                      README's example and snippets; then its unit tests with --features serde
# Cargo's target dir: CARGO_TARGET_DIR if set, else capi/rust/target (gitignored).
# The crates built from a git snapshot against an INSTALLED library through pkg-config:
# tests/consumer/rust_crate.sh (run by tests/consumer/run.sh).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"
with_server "$0" "$@"
cd "$REPO/capi/rust"
export LD_LIBRARY_PATH="$MONGOELECTOR_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
# The checked-in bindings match the headers. A missing bindgen is installed, never a
# reason to skip: a stale bindings.rs must fail the run.
regen="$REPO/capi/rust/mongoelector-sys/regenerate.sh"
bindgen_version="$(sed -n 's/^BINDGEN_VERSION=//p' "$regen")"
if [[ "$(bindgen --version 2>/dev/null | awk '{print $2}')" != "$bindgen_version" ]]; then
  cargo install -q bindgen-cli --version "$bindgen_version" --locked || status=$?
fi
bash "$regen" --check || status=1
cargo test --workspace --no-fail-fast || status=$?
# The safe crate's optional `serde` feature (Serialize/Deserialize of the status types):
# its unit tests, with the feature on.
cargo test -p mongoelector --features serde --lib || status=$?
exit $status
