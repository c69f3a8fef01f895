#!/usr/bin/env bash
# Quick start: installs what the build needs (C++ toolchain, libmongoc, SQLite; no Java,
# no database server), builds the `mongoelector` command and runs `mongoelector demo`
# on the embedded SQLite backend in a temporary directory: three elector processes, the
# leader killed with SIGKILL, another taking over, with the measured failover.
#
#   bash tests/demo.sh                 the demo on embedded SQLite (no server, no network)
#   bash tests/demo.sh --java          the same demo against mongo-java-server (installs
#                                      Java and Maven, starts the server on a free port)
#   bash tests/demo.sh --uri URI       the same demo against your MongoDB (mongodb://...)
#   DEMO_TTL=3 bash tests/demo.sh      another leadership ttl (default 2 s)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODE="${1:-sqlite}"
case "$MODE" in
  sqlite | --java) ;;
  --uri) [[ -n "${2:-}" ]] || { echo "usage: $0 [--java | --uri URI]" >&2; exit 64; } ;;
  *) echo "usage: $0 [--java | --uri URI]" >&2; exit 64 ;;
esac

# Debian packages of the build only (tests/run_all.sh installs the rest: Java, Maven,
# abigail). GoogleTest is there because the build tree it shares with run_all.sh
# configures the tests too; nothing of it is built here.
install_build_deps() {
  local pkgs=(cmake ninja-build pkg-config g++ libmongoc-dev libbson-dev libsqlite3-dev
              googletest libgtest-dev) missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    say "apt-get install ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

install_build_deps
say "build the mongoelector command (cmake, $BUILD_DIR)"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j2 --target mongoelector_cli
MONGOELECTOR="$BUILD_DIR/capi/cli/mongoelector"
DEMO_ARGS=(--ttl "${DEMO_TTL:-2}")

case "$MODE" in
  --java)
    install_apt   # adds Java and Maven
    install_servers java
    URI="$(bash "$ROOT/tests/servers/testserver.sh" start java | tail -n1)"
    trap 'bash "$ROOT/tests/servers/testserver.sh" stop "$URI" >/dev/null 2>&1' EXIT
    DEMO_ARGS+=(--uri "$URI")
    ;;
  --uri) DEMO_ARGS+=(--uri "$2") ;;
esac

say "mongoelector demo ${DEMO_ARGS[*]}"
"$MONGOELECTOR" demo "${DEMO_ARGS[@]}"
cat <<EOF

The command is $MONGOELECTOR (mongoelector --help); install it with
  cmake --install $BUILD_DIR --prefix ~/.local     # bin/mongoelector + the C library
or with the Python package: pip install .          # puts mongoelector in the environment's bin/
EOF
