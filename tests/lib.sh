# Shared steps of tests/demo.sh and tests/run_all.sh: install what the project needs
# (idempotent, fast when already there) and build the native tree.
# Source it; it defines ROOT, BUILD_DIR, CACHE and the functions below.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}"
BUILD_DIR="${MONGOELECTOR_BUILD_DIR:-$ROOT/build}"
export MONGOELECTOR_CACHE="$CACHE"
mkdir -p "$CACHE"

say() { printf '\n==> %s\n' "$*"; }

# Debian packages: the C/C++ toolchain pieces, libmongoc, GoogleTest, abigail (ABI check).
install_apt() {
  # libsqlite3-dev: the embedded backend (core/storage/sqlite_storage.h) links the
  # system's libsqlite3.
  # libclang-dev: bindgen in the Rust binding's header drift check (capi/rust/header-drift).
  local pkgs=(cmake ninja-build pkg-config g++ libmongoc-dev libbson-dev libsqlite3-dev
              googletest libgtest-dev abigail-tools default-jdk-headless maven libclang-dev)
  local missing=()
  for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  # A JDK and Maven may come from elsewhere (the image ships them): accept those.
  if command -v javac >/dev/null && command -v mvn >/dev/null; then
    missing=("${missing[@]/default-jdk-headless}")
    missing=("${missing[@]/maven}")
  fi
  local real=()
  for p in "${missing[@]}"; do [[ -n "$p" ]] && real+=("$p"); done
  if ((${#real[@]})); then
    say "apt-get install ${real[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${real[@]}" >/dev/null
  fi
}

# Python build and test tools (into the current interpreter's environment).
install_pip() {
  python3 -m pip install -q --disable-pip-version-check \
    'pybind11>=2.11' 'scikit-build-core>=0.11' 'pymongo>=4.2' mongomock pytest 2>&1 |
    grep -v -i "running pip as the 'root' user" || true
}

# The real servers the integration tests run against (Maven + Go builds, cached).
install_servers() {
  bash "$ROOT/tests/servers/testserver.sh" install "$@"
}

build_native() {
  say "build (cmake, $BUILD_DIR)"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j2
}
