#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan + LeakSanitizer) and runs each
# for SECONDS seconds (default 60) on a copy of its committed seed corpus.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]   targets: fuzz_capi fuzz_server_docs
#                                             fuzz_document_json
#
# Build tree: ${MONGOELECTOR_CACHE:-~/.cache/mongoelector}/build-fuzz-<hash of checkout>.
# Working corpora (seeds + what the run found) are kept next to it, in corpus/<target>,
# so later runs start from there; the committed seeds in tests/fuzz/corpus/<target> are
# never modified. A crash, leak, timeout (> 10 s for one input) or out-of-memory stops
# the target; its input is written to <build>/artifacts/<target>/ and the script exits
# non-zero. Reproduce one with: <build>/<target> <artifact file>.
# Update the committed seeds after a long run (keeps a handful that cover the most):
#   MONGOELECTOR_FUZZ_UPDATE_SEEDS=1 tests/fuzz/run.sh 600
set -euo pipefail

SECS="${1:-60}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(fuzz_capi fuzz_server_docs)
  # The stored-document codec of the SQLite backend, where the core has it.
  [[ -f "$(dirname "${BASH_SOURCE[0]}")/../../core/storage/document_json.h" ]] &&
    TARGETS+=(fuzz_document_json)
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# ROOT, CACHE and install_apt (the project's Debian packages, idempotent) from tests/lib.sh.
source "$HERE/../lib.sh"
BUILD="$CACHE/build-fuzz-$(echo "$ROOT" | md5sum | cut -c1-12)"
JOBS="${MONGOELECTOR_JOBS:-2}"
say() { printf '\n==> [fuzz] %s\n' "$*"; }

install_apt
# clang with libFuzzer and the sanitizer runtimes: Debian's clang + libclang-rt-N-dev (N =
# clang's major version; older releases ship the runtimes in libclang-common-N-dev).
apt_install() {
  say "apt-get install $*"
  local sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
dpkg -s clang >/dev/null 2>&1 || apt_install clang
rt="libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev"
if ! dpkg -s "$rt" >/dev/null 2>&1 && apt-cache show "$rt" >/dev/null 2>&1; then
  apt_install "$rt"
fi

say "build ($BUILD)"
start=$SECONDS
cmake -S "$HERE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"
echo "built in $((SECONDS - start)) s"

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
status=0
declare -A SUMMARY
for t in "${TARGETS[@]}"; do
  seeds="$HERE/corpus/$t"
  work="$BUILD/corpus/$t"
  art="$BUILD/artifacts/$t"
  mkdir -p "$work" "$art"
  say "$t for $SECS s (seeds $seeds, corpus $work)"
  log="$BUILD/$t.log"
  start=$SECONDS
  # -fork=0: one process; -timeout: an input that runs 10 s is a hang; -rss_limit_mb:
  # an input that needs 2 GB is a leak or an unbounded allocation.
  if "$BUILD/$t" "$work" "$seeds" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
      -max_len=8192 -print_final_stats=1 -artifact_prefix="$art/" >"$log" 2>&1; then
    result="ok"
  else
    result="FAILED"
    status=1
    grep -E "ERROR|runtime error|fuzz property|SUMMARY|Test unit written" "$log" | head -20 || true
    for a in "$art"/*; do [[ -e "$a" ]] && echo "replay: $BUILD/$t $a"; done
  fi
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
  cov="$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo '?')"
  ft="$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || echo '?')"
  SUMMARY[$t]="$result: $execs runs in $((SECONDS - start)) s, coverage $cov edges ($ft features), corpus $(ls "$work" | wc -l) files, log $log"
  echo "$t: ${SUMMARY[$t]}"
  if [[ "${MONGOELECTOR_FUZZ_UPDATE_SEEDS:-0}" == 1 && "$result" == ok ]]; then
    # Minimise into a fresh directory, then commit-sized: the 12 largest-coverage files.
    min="$BUILD/min/$t"
    rm -rf "$min" && mkdir -p "$min"
    "$BUILD/$t" -merge=1 "$min" "$work" >/dev/null 2>&1
    mkdir -p "$seeds"
    ls -S "$min" | head -12 | while read -r f; do cp "$min/$f" "$seeds/"; done
    echo "$t: seeds now $(ls "$seeds" | wc -l) files"
  fi
done

say "summary"
for t in "${TARGETS[@]}"; do echo "  $t: ${SUMMARY[$t]}"; done
exit "$status"
