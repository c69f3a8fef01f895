#!/usr/bin/env bash
# Start/stop real MongoDB-wire-protocol servers on free loopback ports for the
# mongoelector tests (MongoDB itself cannot be installed on the test machines).
#
# Servers ("kinds"):
#   java      mongo-java-server 1.47.0 (in-memory backend) via java/MongoTestServer.java
#   ferretdb  FerretDB v1.24.0 with the SQLite handler on a fresh temp directory
#
# Usage:
#   testserver.sh install [java|ferretdb ...]  build/install (idempotent, fast when cached)
#   testserver.sh start java|ferretdb          start one; last stdout line is its URI
#                                              (mongodb://127.0.0.1:PORT/)
#   testserver.sh stop <uri-or-port>|--all     stop one server, or all those this checkout's
#                                              script started (another checkout's, e.g. a
#                                              CI run in a clone, keeps its own)
#   testserver.sh run java|ferretdb -- CMD...  start, run CMD with MONGOELECTOR_TEST_URI and
#                                              MONGOELECTOR_TEST_SERVER exported, always stop,
#                                              exit with CMD's exit code
#   testserver.sh list                         list running servers (port kind pid uri)
#   testserver.sh log <uri-or-port>            print a running server's log
#
# Environment:
#   MONGOELECTOR_CACHE                  cache root (default: $HOME/.cache/mongoelector)
#   MONGOELECTOR_TESTSERVER_TIMEOUT     seconds to wait for a server to listen (default 60)
#   MONGOELECTOR_JAVA_OPTS              extra JVM options for mongo-java-server
#   MONGOELECTOR_JAVA_WIRE_VERSION      maxWireVersion mongo-java-server advertises (default 13,
#                                       as real MongoDB 5.0; 0 = its own 8, which PyMongo >= 4.18
#                                       refuses to talk to)
#   MONGOELECTOR_FERRETDB_LOG_LEVEL     FerretDB --log-level (default error; info/warn log every
#                                       connection / every error reply, e.g. each E11000)
#   MONGOELECTOR_M2_REPO                Maven local repository (default: Maven's, ~/.m2/repository)
#
# Cache layout ($MONGOELECTOR_CACHE):
#   java-server/<hash>/{classes,lib}    compiled launcher + dependency jars, keyed on the
#                                       sha256 of MongoTestServer.java and pom.xml
#   bin/ferretdb                        FerretDB v1.24.0 binary
#   build/                              scratch space for builds
#   run/<port>/                         state of running servers: pid, kind, uri, tmpdir, log
# Data directories of running servers are mktemp dirs under ${TMPDIR:-/tmp}.

set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Who started a server (stop --all): this checkout, by its physical path, so that the same
# checkout reached through a symlink is still itself.
OWNER="$(cd "$SCRIPT_DIR" && pwd -P)"
CACHE="${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}"
RUN_DIR="$CACHE/run"
TIMEOUT="${MONGOELECTOR_TESTSERVER_TIMEOUT:-60}"

MONGO_JAVA_SERVER_VERSION="1.47.0" # keep in sync with java/pom.xml
FERRETDB_MODULE="github.com/FerretDB/FerretDB"
FERRETDB_VERSION="v1.24.0"
FERRETDB_BIN="$CACHE/bin/ferretdb"

log() { printf 'testserver: %s\n' "$*" >&2; }
die() { printf 'testserver: error: %s\n' "$*" >&2; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# Environment:/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
}

# Serialise installs (several test processes may call `start` concurrently).
with_install_lock() {
    mkdir -p "$CACHE"
    (
        flock -w 900 9 || die "timed out waiting for the install lock $CACHE/.install.lock"
        "$@"
    ) 9>"$CACHE/.install.lock"
}

# ---------------------------------------------------------------- java ----

java_key() {
    cat "$SCRIPT_DIR/java/MongoTestServer.java" "$SCRIPT_DIR/java/pom.xml" | sha256sum | cut -c1-16
}

java_build_dir() { echo "$CACHE/java-server/$(java_key)"; }

install_java_locked() {
    local dir tmp mvn_args
    dir="$(java_build_dir)"
    [[ -f "$dir/.complete" ]] && return 0
    command -v java >/dev/null || die "java not found (apt-get install openjdk-17-jdk-headless)"
    command -v javac >/dev/null || die "javac not found (apt-get install openjdk-17-jdk-headless)"
    command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
    log "building mongo-java-server $MONGO_JAVA_SERVER_VERSION launcher into $dir"
    mkdir -p "$CACHE/java-server"
    tmp="$(mktemp -d "$CACHE/java-server/.build.XXXXXX")"
    chmod 755 "$tmp"
    cp "$SCRIPT_DIR/java/pom.xml" "$SCRIPT_DIR/java/MongoTestServer.java" "$tmp/"
    mvn_args=(-q -B -Dstyle.color=never -f "$tmp/pom.xml"
        dependency:copy-dependencies -DoutputDirectory="$tmp/lib" -DincludeScope=runtime)
    if [[ -n "${MONGOELECTOR_M2_REPO:-}" ]]; then
        mvn_args=(-Dmaven.repo.local="$MONGOELECTOR_M2_REPO" "${mvn_args[@]}")
    fi
    # Offline first (no network when everything is in the local repository),
    # then online.
    if ! mvn -o "${mvn_args[@]}" >"$tmp/mvn-offline.log" 2>&1; then
        if ! mvn "${mvn_args[@]}" >"$tmp/mvn.log" 2>&1; then
            cat "$tmp/mvn.log" >&2
            rm -rf "$tmp"
            die "maven could not fetch the mongo-java-server dependencies"
        fi
    fi
    if ! javac --release 11 -nowarn -d "$tmp/classes" -cp "$tmp/lib/*" \
        "$tmp/MongoTestServer.java" >"$tmp/javac.log" 2>&1; then
        cat "$tmp/javac.log" >&2
        rm -rf "$tmp"
        die "javac failed for MongoTestServer.java"
    fi
    rm -rf "$tmp/target"
    touch "$tmp/.complete"
    rm -rf "$dir"
    mv "$tmp" "$dir"
    # Drop builds of other versions of the launcher unused for a week (not
    # sooner: a running server may still be using one).
    find "$CACHE/java-server" -mindepth 1 -maxdepth 1 -type d ! -path "$dir" -mtime +7 \
        -exec rm -rf {} + 2>/dev/null || true
}

install_java() { with_install_lock install_java_locked; }

# ------------------------------------------------------------ ferretdb ----

ferretdb_ok() {
    local out
    [[ -x "$FERRETDB_BIN" ]] || return 1
    out="$("$FERRETDB_BIN" --version 2>/dev/null)" || return 1
    [[ $'\n'"$out"$'\n' == *$'\n'"version: $FERRETDB_VERSION"$'\n'* ]]
}

# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.0` is not usable:
# it needs the module's version list (which the proxy refuses here: "loading
# deprecation ... 403"), and any build whose main module is FerretDB panics at
# start-up ("Invalid build/version/version.txt") because that file, generated
# by FerretDB's release tooling, is not in the module zip. So: download the exact module version, copy it to a scratch
# dir, add version.txt, and `go build` there with the module's own go.sum.
install_ferretdb_locked() {
    ferretdb_ok && return 0
    command -v go >/dev/null || die "go not found (needs Go >= 1.22)"
    log "building FerretDB $FERRETDB_VERSION into $FERRETDB_BIN"
    local src tmp
    src="$(cd / && GOFLAGS= go mod download -json "$FERRETDB_MODULE@$FERRETDB_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -n "$src" && -d "$src/cmd/ferretdb" ]] || die "could not download $FERRETDB_MODULE@$FERRETDB_VERSION"
    mkdir -p "$CACHE/build" "$CACHE/bin"
    tmp="$(mktemp -d "$CACHE/build/ferretdb.XXXXXX")"
    cp -R "$src/." "$tmp/"
    chmod -R u+w "$tmp"
    printf '%s\n' "$FERRETDB_VERSION" >"$tmp/build/version/version.txt"
    printf '%s\n' "testserver" >"$tmp/build/version/package.txt"
    if ! (cd "$tmp" && CGO_ENABLED=0 GOFLAGS= go build -buildvcs=false -trimpath \
        -o "$FERRETDB_BIN.tmp" ./cmd/ferretdb) >"$CACHE/build/ferretdb-build.log" 2>&1; then
        cat "$CACHE/build/ferretdb-build.log" >&2
        rm -rf "$tmp" "$FERRETDB_BIN.tmp"
        die "go build of FerretDB failed"
    fi
    rm -rf "$tmp"
    mv -f "$FERRETDB_BIN.tmp" "$FERRETDB_BIN"
    ferretdb_ok || die "built $FERRETDB_BIN but '--version' does not report $FERRETDB_VERSION"
}

install_ferretdb() { with_install_lock install_ferretdb_locked; }

install_kind() {
    case "$1" in
        java) install_java ;;
        ferretdb) install_ferretdb ;;
        *) die "unknown server kind '$1' (expected java or ferretdb)" ;;
    esac
}

# --------------------------------------------------------------- state ----

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# mongo-java-server listens before it has warmed up; it prints READY once it has.
said_ready() {
    [[ "$1" != java ]] || grep -q '^READY ' "$2/log" 2>/dev/null
}

pid_alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }

# Accepts 27017, mongodb://127.0.0.1:27017/, 127.0.0.1:27017, ...
parse_port() {
    local arg="$1" port
    port="${arg##*:}"
    port="${port%%/*}"
    port="${port%%\?*}"
    [[ "$port" =~ ^[0-9]+$ ]] || die "cannot find a port in '$arg'"
    echo "$port"
}

# ---------------------------------------------------------- start/stop ----

# Start a server of the given kind on a given port; sets STARTED_PID, STARTED_TMP.
launch() {
    local kind="$1" port="$2" state="$3" tmp
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-$kind-$port.XXXXXX")"
    STARTED_TMP="$tmp"
    echo "$tmp" >"$state/tmpdir"
    case "$kind" in
        java)
            local dir
            dir="$(java_build_dir)"
            # shellcheck disable=SC2086
            setsid java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k \
                -Djava.io.tmpdir="$tmp" ${MONGOELECTOR_JAVA_OPTS:-} \
                -cp "$dir/classes:$dir/lib/*" MongoTestServer "$port" \
                --wire-version="${MONGOELECTOR_JAVA_WIRE_VERSION:-13}" \
                </dev/null >"$state/log" 2>&1 &
            ;;
        ferretdb)
            mkdir -p "$tmp/data" "$tmp/state"
            setsid "$FERRETDB_BIN" \
                --handler=sqlite --sqlite-url="file:$tmp/data/" \
                --listen-addr="127.0.0.1:$port" \
                --debug-addr=- --telemetry=disable \
                --state-dir="$tmp/state" --log-level="${MONGOELECTOR_FERRETDB_LOG_LEVEL:-error}" \
                </dev/null >"$state/log" 2>&1 &
            ;;
    esac
    STARTED_PID=$!
    echo "$STARTED_PID" >"$state/pid"
}

# Is $1 a server process we started (guards against a recycled pid)?
is_server_pid() {
    local cmdline
    cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
    [[ "$cmdline" == *MongoTestServer* || "$cmdline" == *ferretdb* ]]
}

# Kill the process group led by $1 (setsid made the server a group leader).
kill_group() {
    local pid="$1" i
    pid_alive "$pid" || return 0
    if [[ -d /proc/$pid ]] && ! is_server_pid "$pid"; then
        log "pid $pid is no longer a test server, not killing it"
        return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do # 10 s
        pid_alive "$pid" || return 0
        sleep 0.1
    done
    log "pid $pid did not exit after SIGTERM, sending SIGKILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
    log "pid $pid is still alive"
    return 1
}

cleanup_state() {
    local state="$1" pid="" tmp=""
    [[ -d "$state" ]] || return 0
    [[ -f "$state/pid" ]] && pid="$(<"$state/pid")"
    [[ -f "$state/tmpdir" ]] && tmp="$(<"$state/tmpdir")"
    kill_group "$pid" || true
    if [[ -n "$tmp" && "$tmp" == */mongoelector-* ]]; then rm -rf "$tmp"; fi
    rm -rf "$state"
}

cmd_start() {
    local kind="${1:-}"
    [[ "$kind" == java || "$kind" == ferretdb ]] || die "usage: testserver.sh start java|ferretdb"
    install_kind "$kind"
    mkdir -p "$RUN_DIR"
    local attempt port state deadline uri
    for attempt in 1 2 3; do
        port="$(free_port)"
        state="$RUN_DIR/$port"
        if [[ -e "$state" ]]; then
            # Left over from a server that is gone (the port was free).
            cleanup_state "$state"
        fi
        mkdir -p "$state"
        echo "$kind" >"$state/kind"
        echo "$OWNER" >"$state/owner"
        launch "$kind" "$port" "$state"
        deadline=$((SECONDS + TIMEOUT))
        while ((SECONDS < deadline)); do
            if ! pid_alive "$STARTED_PID"; then
                break
            fi
            if port_open "$port" && said_ready "$kind" "$state"; then
                uri="mongodb://127.0.0.1:$port/"
                echo "$uri" >"$state/uri"
                log "$kind listening on $uri (pid $STARTED_PID, log $state/log)"
                echo "$uri"
                return 0
            fi
            sleep 0.1
        done
        if pid_alive "$STARTED_PID"; then
            log "$kind did not accept connections on 127.0.0.1:$port within ${TIMEOUT}s; log tail:"
            tail -n 30 "$state/log" >&2 || true
            cleanup_state "$state"
            die "$kind failed to start (timeout)"
        fi
        log "$kind exited before listening on port $port (attempt $attempt); log tail:"
        tail -n 30 "$state/log" >&2 || true
        cleanup_state "$state"
    done
    die "$kind failed to start"
}

cmd_stop() {
    local arg="${1:-}"
    [[ -n "$arg" ]] || die "usage: testserver.sh stop <uri-or-port>|--all"
    if [[ "$arg" == --all ]]; then
        local s
        for s in "$RUN_DIR"/*/; do
            [[ -d "$s" ]] || continue
            # A state without an owner is from before owners were recorded: stopped too.
            if [[ -f "$s/owner" && "$(cat "$s/owner")" != "$OWNER" ]]; then continue; fi
            cleanup_state "${s%/}"
        done
        return 0
    fi
    local port state
    port="$(parse_port "$arg")"
    state="$RUN_DIR/$port"
    [[ -d "$state" ]] || die "no server started by testserver.sh on port $port"
    cleanup_state "$state"
}

cmd_list() {
    local s port pid
    for s in "$RUN_DIR"/*/; do
        [[ -d "$s" ]] || continue
        port="$(basename "$s")"
        pid="$(cat "$s/pid" 2>/dev/null || true)"
        if pid_alive "$pid"; then
            printf '%s %s %s %s\n' "$port" "$(cat "$s/kind" 2>/dev/null)" "$pid" "$(cat "$s/uri" 2>/dev/null || echo starting)"
        else
            printf '%s %s %s %s\n' "$port" "$(cat "$s/kind" 2>/dev/null)" "${pid:--}" dead
        fi
    done
}

cmd_log() {
    local port
    port="$(parse_port "${1:-}")"
    cat "$RUN_DIR/$port/log"
}

RUN_URI=""
RUN_CHILD=""
run_cleanup() {
    if [[ -n "$RUN_URI" ]]; then
        cmd_stop "$RUN_URI" || true
        RUN_URI=""
    fi
}

run_signalled() {
    local sig="$1" code="$2"
    if [[ -n "$RUN_CHILD" ]] && pid_alive "$RUN_CHILD"; then
        kill "-$sig" "$RUN_CHILD" 2>/dev/null || true
        wait "$RUN_CHILD" 2>/dev/null || true
    fi
    run_cleanup
    trap - EXIT
    exit "$code"
}

cmd_run() {
    local kind="${1:-}"
    shift || true
    [[ "${1:-}" == -- ]] && shift
    [[ -n "$kind" && $# -gt 0 ]] || die "usage: testserver.sh run java|ferretdb -- CMD [ARGS...]"
    trap run_cleanup EXIT
    trap 'run_signalled INT 130' INT
    trap 'run_signalled TERM 143' TERM
    trap 'run_signalled HUP 129' HUP
    RUN_URI="$(cmd_start "$kind" | tail -n 1)"
    [[ -n "$RUN_URI" ]] || die "$kind failed to start"
    export MONGOELECTOR_TEST_URI="$RUN_URI" MONGOELECTOR_TEST_SERVER="$kind"
    # In the background (with our stdin) so that a signal to this script is
    # handled at once rather than after CMD exits.
    local rc=0
    "$@" <&0 &
    RUN_CHILD=$!
    wait "$RUN_CHILD" || rc=$?
    RUN_CHILD=""
    run_cleanup
    trap - EXIT INT TERM HUP
    exit "$rc"
}

main() {
    local cmd="${1:-}"
    shift || true
    case "$cmd" in
        install)
            if [[ $# -eq 0 ]]; then set -- java ferretdb; fi
            local k
            for k in "$@"; do install_kind "$k"; done
            ;;
        start) cmd_start "$@" ;;
        stop) cmd_stop "$@" ;;
        run) cmd_run "$@" ;;
        list) cmd_list ;;
        log) cmd_log "$@" ;;
        -h | --help | help) usage ;;
        *) usage; exit 2 ;;
    esac
}

main "$@"; exit $?
