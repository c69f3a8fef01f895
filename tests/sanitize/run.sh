#!/usr/bin/env bash
# Sanitizer builds of the core, the C API and their tests, run against a real server.
#
#   tests/sanitize/run.sh asan    ASan + UBSan (+ LeakSanitizer): -fsanitize=address,undefined
#   tests/sanitize/run.sh tsan    ThreadSanitizer:                -fsanitize=thread
#
# Configures its own build tree, ${MONGOELECTOR_CACHE:-~/.cache/mongoelector}/
# build-<kind>-<hash of the checkout path>, with -DMONGOELECTOR_SANITIZE=..., builds
# the libraries and every test program (g++; libmongoc itself is NOT instrumented), then runs
#   1. the unit tests (ctest -L unit: core unit tests on MemoryStorage, C API offline test)
#   2. the integration suites (ctest -L integration: storage conformance, core and C API
#      integration tests) against a fresh mongo-java-server (tests/servers/testserver.sh),
#      or against $MONGOELECTOR_TEST_URI when it is set.
# Any sanitizer report fails the test that triggered it (halt_on_error, no recovery).
# There are no suppression files. Exits non-zero if a step fails. Idempotent.
set -euo pipefail

KIND="${1:-}"
case "$KIND" in
  asan) SANITIZE="address,undefined" ;;
  tsan) SANITIZE="thread" ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac

# ROOT, CACHE and install_apt (the project's Debian packages, idempotent) from tests/lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BUILD="$CACHE/build-$KIND-$(echo "$ROOT" | md5sum | cut -c1-12)"
JOBS="${MONGOELECTOR_JOBS:-2}"
say() { printf '\n==> [%s] %s\n' "$KIND" "$*"; }

install_apt

say "build ($BUILD, -fsanitize=$SANITIZE)"
start=$SECONDS
# Debug info and -O1: readable reports at a bearable speed.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DMONGOELECTOR_SANITIZE="$SANITIZE" >/dev/null
cmake --build "$BUILD" -j"$JOBS"
echo "built in $((SECONDS - start)) s"

# Every report is fatal and names its stack; LeakSanitizer runs at exit (ASan).
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1:strict_init_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# die_after_fork=0: the fork tests (a locker made in a fork()ed child of a threaded
# process, tests/capi/shared_client_test) start threads in the child, which TSan refuses
# by default; the child is checked as well, with that documented TSan caveat.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0"
# capi_test calls functions on freed handles on purpose (the library's best-effort
# detection); that is a use after free by design, so it is skipped here.
export CAPI_TEST_NO_FREED_HANDLES=1

# TSan needs a bounded address-space layout: run under `setarch -R` (no ASLR) when the
# kernel's mmap randomisation is too wide for it (the runtime aborts with
# "unexpected memory mapping" otherwise).
WRAP=()
if [[ "$KIND" == tsan ]] && setarch "$(uname -m)" -R true 2>/dev/null; then
  WRAP=(setarch "$(uname -m)" -R)
fi

CTEST=(ctest --test-dir "$BUILD" --output-on-failure --timeout 900)
status=0
say "unit tests (ctest -L unit)"
start=$SECONDS
"${WRAP[@]}" "${CTEST[@]}" -L unit -j"$JOBS" || status=1
echo "unit tests: $((SECONDS - start)) s"

say "integration suites (ctest -L integration)"
start=$SECONDS
if [[ -n "${MONGOELECTOR_TEST_URI:-}" ]]; then
  "${WRAP[@]}" "${CTEST[@]}" -L integration || status=1
else
  bash "$ROOT/tests/servers/testserver.sh" install java
  bash "$ROOT/tests/servers/testserver.sh" run java -- "${WRAP[@]}" "${CTEST[@]}" -L integration \
    || status=1
fi
echo "integration suites: $((SECONDS - start)) s"

if ((status == 0)); then say "clean: no sanitizer report, every test passed"; fi
exit "$status"
