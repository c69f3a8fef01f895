#!/usr/bin/env bash
# Out-of-tree consumer test of the INSTALLED C library.
#
#   tests/consumer/run.sh [BUILD_DIR]
#
# Builds libmongoelector in BUILD_DIR (default: build-bindings in the checkout; an
# existing configured tree is reused), `cmake --install`s it into a temporary prefix,
# then builds tests/consumer/consumer.c against that prefix only, both ways:
#   (a) pkg-config:  cc $(pkg-config --cflags --libs mongoelector)
#   (b) CMake:       find_package(mongoelector CONFIG REQUIRED), mongoelector::mongoelector
# runs both (they also take and release a lock on MONGOELECTOR_TEST_URI, or on a
# mongo-java-server started for the run when it is unset), and
# checks the SONAME, the symlinks and the installed files. capi/examples/example.c is
# built the same way (and run when a server is given). Then the bindings as their users
# get them, against the same prefix through pkg-config only (no server needed: SQLite):
#   (c) Go:   tests/consumer/go_module.sh   `go get` of capi/go from a file:// module
#             proxy into a fresh read-only module cache, go build, run
#   (d) Rust: tests/consumer/rust_crate.sh  a fresh `cargo new` project depending on
#             `mongoelector` by git URL (a snapshot of the working tree), cargo build, run
# each skipped, and said so, when `go` / `cargo` is not installed
# (MONGOELECTOR_CONSUMER_BINDINGS=0: skip both). Ends with "N passed, N failed".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="${1:-$REPO/build-bindings}"
mkdir -p "$BUILD" && BUILD="$(cd "$BUILD" && pwd)"
JOBS="${MONGOELECTOR_JOBS:-2}"

passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# Without a server URI, run under a fresh mongo-java-server so that the consumers and
# the example also talk to a server (MONGOELECTOR_NO_SERVER=1: don't).
if [[ -z "${MONGOELECTOR_TEST_URI:-}" && -z "${MONGOELECTOR_NO_SERVER:-}" && -f "$REPO/tests/servers/testserver.sh" ]]; then
  exec bash "$REPO/tests/servers/testserver.sh" run java -- bash "${BASH_SOURCE[0]}" "$@"
fi

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$REPO" -B "$BUILD" -DMONGOELECTOR_BUILD_PYTHON=OFF -DMONGOELECTOR_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$BUILD" -j"$JOBS" --target mongoelector >/dev/null

WORK="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-consumer.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
PREFIX="$WORK/prefix"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null

# Where GNUInstallDirs put the library (lib or lib64 or lib/<multiarch>).
LIBDIR="$(dirname "$(find "$PREFIX" -name 'libmongoelector.so.1' | head -1)")"
[[ -d "$LIBDIR" ]] || { echo "FAIL: no libmongoelector.so.1 installed under $PREFIX" >&2; exit 1; }
echo "installed into $PREFIX (library in ${LIBDIR#"$PREFIX"/})"

# ---- installed tree ------------------------------------------------------------------
check "header installed" test -f "$PREFIX/include/mongoelector.h"
for topic in common log metrics cancel client locker lease elector observer semaphore rwlock deprecated testing; do
  check "topic header mongoelector/$topic.h installed" test -f "$PREFIX/include/mongoelector/$topic.h"
done
REAL="$(readlink -f "$LIBDIR/libmongoelector.so")"
check "libmongoelector.so -> libmongoelector.so.1" test "$(readlink "$LIBDIR/libmongoelector.so")" = "libmongoelector.so.1"
check "libmongoelector.so.1 -> libmongoelector.so.1.<minor>.<patch>" \
  bash -c "[[ \"\$(readlink '$LIBDIR/libmongoelector.so.1')\" =~ ^libmongoelector\.so\.1\.[0-9]+\.[0-9]+$ ]]"
check "the real file is a regular file" test -f "$REAL" -a ! -L "$REAL"
SONAME="$(readelf -d "$REAL" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
check "SONAME is libmongoelector.so.1 (got '$SONAME')" test "$SONAME" = "libmongoelector.so.1"
check "no RPATH/RUNPATH into the build tree" bash -c "! readelf -d '$REAL' | grep -E 'R(UN)?PATH' | grep -q '$BUILD'"
PC="$(find "$PREFIX" -name mongoelector.pc | head -1)"
check "pkg-config file installed" test -n "$PC"
CFG="$(find "$PREFIX" -name mongoelectorConfig.cmake | head -1)"
check "CMake package config installed" test -n "$CFG"
check "CMake package version file installed" test -f "$(dirname "$CFG")/mongoelectorConfigVersion.cmake"

# The consumers must not see the checkout: copy the source out of it.
mkdir -p "$WORK/src/cmake"
cp "$HERE/consumer.c" "$REPO/capi/examples/example.c" "$WORK/src/"
cp "$HERE/cmake/CMakeLists.txt" "$WORK/src/cmake/"

run_consumer() { # name binary [env...]
  local name="$1" bin="$2"; shift 2
  local out
  if out="$(env -u LD_LIBRARY_PATH "$@" "$bin" 2>&1)"; then
    echo "$out" | sed "s/^/    /"
    local loaded
    loaded="$(env -u LD_LIBRARY_PATH "$@" ldd "$bin" | grep libmongoelector || true)"
    if [[ "$loaded" == *"$PREFIX"* ]]; then
      ok "$name consumer runs against the installed library"
    else
      bad "$name consumer loaded libmongoelector from elsewhere: $loaded"
    fi
  else
    echo "$out" | sed "s/^/    /" >&2
    bad "$name consumer failed"
  fi
}

# ---- (a) pkg-config ------------------------------------------------------------------
export PKG_CONFIG_PATH="$(dirname "$PC")"
if pkg-config --exists mongoelector; then
  ok "pkg-config finds mongoelector $(pkg-config --modversion mongoelector)"
  check "pkg-config version matches the header" \
    test "$(pkg-config --modversion mongoelector)" = "$(sed -n 's/^#define MONGOELECTOR_VERSION_STRING "\(.*\)"/\1/p' "$PREFIX/include/mongoelector/common.h")"
  # shellcheck disable=SC2046
  if cc -std=c99 -Wall -Wextra -Werror -o "$WORK/consumer_pc" "$WORK/src/consumer.c" \
      $(pkg-config --cflags --libs mongoelector); then
    ok "consumer builds with pkg-config"
    # The .pc's rpath: it runs without LD_LIBRARY_PATH.
    run_consumer pkg-config "$WORK/consumer_pc"
  else
    bad "consumer builds with pkg-config"
  fi
else
  bad "pkg-config finds mongoelector (PKG_CONFIG_PATH=$PKG_CONFIG_PATH)"
fi
  # The documented example program (capi/examples/example.c), built the documented way.
  # shellcheck disable=SC2046
  if cc -std=c11 -Wall -Wextra -Werror -pedantic -o "$WORK/example" "$WORK/src/example.c" \
      $(pkg-config --cflags --libs mongoelector); then
    ok "capi/examples/example.c builds with pkg-config"
    if [[ -n "${MONGOELECTOR_TEST_URI:-}" ]]; then
      if out="$(env -u LD_LIBRARY_PATH timeout 60 "$WORK/example" "$MONGOELECTOR_TEST_URI" 2>&1)"; then
        echo "$out" | sed "s/^/    /"
        check "example: stale token refused" grep -q "stale token: refused" <<<"$out"
        check "example: elector became leader" grep -q "I am the leader now" <<<"$out"
      else
        echo "$out" | sed "s/^/    /" >&2
        bad "capi/examples/example.c runs"
      fi
    fi
  else
    bad "capi/examples/example.c builds with pkg-config"
  fi
unset PKG_CONFIG_PATH

# ---- (b) CMake -----------------------------------------------------------------------
if cmake -S "$WORK/src/cmake" -B "$WORK/cmake-build" -DCMAKE_PREFIX_PATH="$PREFIX" \
     -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$WORK/cmake.log" 2>&1 \
   && cmake --build "$WORK/cmake-build" >>"$WORK/cmake.log" 2>&1; then
  ok "consumer builds with find_package(mongoelector CONFIG)"
  # CMake puts the imported library's directory in the build RPATH: no LD_LIBRARY_PATH.
  run_consumer CMake "$WORK/cmake-build/consumer_cmake"
  # Installed, the program keeps the package's rpath (CMake drops its build-tree one).
  if cmake --install "$WORK/cmake-build" --prefix "$WORK/consumer-install" >>"$WORK/cmake.log" 2>&1; then
    run_consumer "CMake (installed)" "$WORK/consumer-install/bin/consumer_cmake"
  else
    cat "$WORK/cmake.log" >&2
    bad "cmake --install of the consumer"
  fi
else
  cat "$WORK/cmake.log" >&2
  bad "consumer builds with find_package(mongoelector CONFIG)"
fi

# ---- (c) Go module, (d) Rust crates ---------------------------------------------------------
binding_consumer() { # name tool script
  local name="$1" tool="$2" script="$3" start=$SECONDS
  if [[ "${MONGOELECTOR_CONSUMER_BINDINGS:-1}" == 0 ]]; then
    echo "skipped: $name (MONGOELECTOR_CONSUMER_BINDINGS=0)"
  elif ! command -v "$tool" >/dev/null; then
    echo "skipped: $name ($tool is not installed)"
  elif bash "$HERE/$script" "$PREFIX" 2>&1 | sed 's/^/  /'; then
    ok "$name ($((SECONDS - start)) s)"
  else
    bad "$name"
  fi
}
binding_consumer "Go module from a module cache, via pkg-config" go go_module.sh
binding_consumer "Rust crates from a git dependency, via pkg-config" cargo rust_crate.sh

echo "consumer: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
