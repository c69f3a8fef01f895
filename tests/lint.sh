#!/usr/bin/env bash
# The lint step, first in tests/run_all.sh: formatting and static checks, no build, no
# server (about a minute when the tools are installed).
#
#   bash tests/lint.sh [--tidy]
#
#   Python  ruff check + ruff format --check      python/mongoelector, tests (pyproject.toml)
#   Rust    cargo fmt --check + cargo clippy -D warnings   capi/rust (both crates, all targets)
#   Go      gofmt -l + go vet + staticcheck        capi/go and capi/go/k8slock (the
#           in-checkout build tag; k8slock's dependencies are downloaded through GOPROXY)
#   C/C++   clang-format --dry-run (.clang-format)  core, capi, tests
#   --tidy  also clang-tidy (.clang-tidy) over capi/src and capi/cli, with the build
#           tree's compile_commands.json (slow: minutes; not part of the suite)
#
# C/C++ formatting fails the step only once tests/lint-clang-format.enforced exists
# (created in the commit that formats the tree); until then the files that would change
# are counted and the step passes.
#
# Installs what is missing, idempotently: ruff (pinned) into a virtualenv in the cache,
# staticcheck (pinned) with `go install` into the cache, clang-format with apt-get
# (rustfmt and clippy come with rustup's default profile). A tool that cannot be
# installed fails the step: it is never skipped silently.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}"
RUFF_VERSION=0.17.6
# The module version (staticcheck 2025.1.1): the Go module proxy serves module versions.
STATICCHECK_VERSION=v0.6.1
TIDY=0
[[ "${1:-}" == "--tidy" ]] && TIDY=1
mkdir -p "$CACHE"
FAILED=()
step() {  # step NAME CMD...: runs CMD, records a failure, goes on
  local name="$1"; shift
  printf -- '-- %s\n' "$name"
  "$@" || { FAILED+=("$name"); echo "*** lint failed: $name"; }
}

# ---- Python
LINT_VENV="$CACHE/lint-venv"
if [[ "$("$LINT_VENV/bin/ruff" --version 2>/dev/null)" != "ruff $RUFF_VERSION" ]]; then
  [[ -x "$LINT_VENV/bin/python" ]] || python3 -m venv "$LINT_VENV"
  "$LINT_VENV/bin/python" -m pip install -q --disable-pip-version-check "ruff==$RUFF_VERSION"
fi
RUFF="$LINT_VENV/bin/ruff"
cd "$ROOT"
step "ruff check" "$RUFF" check --no-cache python/mongoelector tests
step "ruff format --check" "$RUFF" format --no-cache --check python/mongoelector tests

# ---- Rust (clippy type-checks only: DOCS_RS makes mongoelector-sys skip looking for the
# C library, which is not needed before linking)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/cargo-target}"
step "cargo fmt --check" bash -c 'cd capi/rust && cargo fmt --all --check'
step "cargo clippy -D warnings" bash -c \
  'cd capi/rust && DOCS_RS=1 cargo clippy -q --workspace --all-targets -- -D warnings'

# ---- Go
GOBIN_DIR="$CACHE/bin"
if [[ ! -x "$GOBIN_DIR/staticcheck" ]] ||
   ! "$GOBIN_DIR/staticcheck" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})"; then
  GOBIN="$GOBIN_DIR" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
go_checks() (  # a subshell: its cd and exports stay inside
  cd "$ROOT/capi/go" || return 1
  local unformatted
  unformatted="$(gofmt -l .)"
  [[ -z "$unformatted" ]] || { echo "gofmt would change: $unformatted"; return 1; }
  # The in-checkout build (header from capi/include); nothing is linked.
  export CGO_ENABLED=1
  go vet -tags mongoelector_dev ./... &&
    "$GOBIN_DIR/staticcheck" -tags mongoelector_dev ./...
)
step "gofmt, go vet, staticcheck" go_checks
go_checks_k8slock() (  # the client-go adapter, a module of its own
  cd "$ROOT/capi/go/k8slock" || return 1
  local unformatted
  unformatted="$(gofmt -l .)"
  [[ -z "$unformatted" ]] || { echo "gofmt would change: $unformatted"; return 1; }
  export CGO_ENABLED=1 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"
  go vet -tags mongoelector_dev ./... &&
    "$GOBIN_DIR/staticcheck" -tags mongoelector_dev ./...
)
step "gofmt, go vet, staticcheck (k8slock)" go_checks_k8slock

# ---- C and C++
if ! command -v clang-format >/dev/null; then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang-format >/dev/null
fi
mapfile -t CFILES < <(cd "$ROOT" && git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' |
  grep -v -E '^(capi/rust|third_party)/')
clang_format_check() {
  cd "$ROOT" || return 1
  local changed=()
  for f in "${CFILES[@]}"; do
    [[ -n "$(clang-format --dry-run "$f" 2>&1)" ]] && changed+=("$f")
  done
  if [[ -f "$ROOT/tests/lint-clang-format.enforced" ]]; then
    ((${#changed[@]} == 0)) && return 0
    printf 'clang-format would change: %s\n' "${changed[@]}"
    echo "apply: clang-format -i FILES"
    return 1
  fi
  echo "${#changed[@]} of ${#CFILES[@]} C/C++ files not formatted yet (not enforced until" \
    "tests/lint-clang-format.enforced exists)"
}
step "clang-format" clang_format_check
if ((TIDY)); then
  step "clang-tidy" bash -c "cd '$ROOT' && clang-tidy -p '${MONGOELECTOR_BUILD_DIR:-$ROOT/build}' \
    --quiet capi/src/*.cpp capi/cli/*.cpp"
fi

if ((${#FAILED[@]})); then
  echo "lint: ${#FAILED[@]} failed: ${FAILED[*]}"
  exit 1
fi
echo "lint: all passed"
