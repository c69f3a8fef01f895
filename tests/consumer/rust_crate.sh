#!/usr/bin/env bash
# The Rust crates as a user gets them: a fresh `cargo new` project that depends on
# `mongoelector` by git URL, built against an INSTALLED libmongoelector found through
# pkg-config alone.
#
#   tests/consumer/rust_crate.sh PREFIX     (PREFIX: a `cmake --install --prefix` tree)
#
# The working tree (tracked and untracked, not ignored, files: what a commit of it would
# hold) is copied into a temporary git repository and committed there; the project's
# Cargo.toml says `mongoelector = { git = "file://<that repository>" }`. `cargo build`
# runs with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig and no MONGOELECTOR_LIB_DIR, and the
# program, whose build.rs adds an rpath to `pkg-config --variable=libdir mongoelector`,
# runs WITHOUT LD_LIBRARY_PATH: it prints the library version, takes a lock and becomes leader on a SQLite file (no
# server), and shows the library's "became leader" message arriving through the `log`
# crate (target "mongoelector") with no setup call. Then the build must fail, naming
# both MONGOELECTOR_LIB_DIR and pkg-config, when neither finds the library, and succeed
# with MONGOELECTOR_LIB_DIR alone.
#
# Third-party crates come from crates.io (or cargo's cache). CARGO_TARGET_DIR if set is
# reused (the mongoelector crates are rebuilt anyway: each snapshot is a new git
# revision); else a fresh one in the temporary directory. Ends with "rust crate: N
# passed, N failed".
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PREFIX="$(cd "${1:?usage: rust_crate.sh PREFIX}" && pwd)"

passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }

PC="$(find "$PREFIX" -name mongoelector.pc | head -1)"
[[ -n "$PC" ]] || { echo "FAIL: no mongoelector.pc under $PREFIX" >&2; exit 1; }
PCDIR="$(dirname "$PC")"
LIBDIR="$(cd "$(PKG_CONFIG_PATH="$PCDIR" pkg-config --variable=libdir mongoelector)" && pwd)"
VERSION="$(PKG_CONFIG_PATH="$PCDIR" pkg-config --modversion mongoelector)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-crate.XXXXXX")"
# Cargo keeps a clone of every git dependency under CARGO_HOME/git, named after the
# URL's last component: make it unique, and remove those clones afterwards.
SNAPNAME="mongoelector-snapshot-$(basename "$WORK" | cut -d. -f2 | tr 'A-Z' 'a-z')"
SNAP="$WORK/$SNAPNAME"
CARGO_HOME_DIR="${CARGO_HOME:-$HOME/.cargo}"
cleanup() {
  rm -rf "$WORK" "$CARGO_HOME_DIR"/git/db/"$SNAPNAME"-* "$CARGO_HOME_DIR"/git/checkouts/"$SNAPNAME"-*
}
trap cleanup EXIT

# ---- a git snapshot of the working tree ------------------------------------------------
mkdir -p "$SNAP"
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
  # Files deleted in the working tree are still listed as cached: skip them.
  (cd "$REPO" && git ls-files -z -co --exclude-standard \
    | while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -xf - -C "$SNAP"
else
  cp -R "$REPO/capi" "$SNAP/"
fi
git -C "$SNAP" init -q
git -C "$SNAP" add -A
git -C "$SNAP" -c user.name=consumer-test -c user.email=consumer-test@localhost \
  commit -q -m "working tree snapshot"
echo "snapshot of the working tree: $SNAP ($(git -C "$SNAP" ls-files | wc -l) files)"

# ---- a fresh project ---------------------------------------------------------------------
APP="$WORK/app"
cargo new -q --vcs none --bin --name mongoelector-consumer "$APP"
cat >>"$APP/Cargo.toml" <<EOF
mongoelector = { git = "file://$SNAP" }
log = "0.4"
EOF
# The one addition a program needs to run without LD_LIBRARY_PATH (cargo passes no link
# arguments from a dependency's build script on to the program): an rpath to the
# library's directory, here the one pkg-config names.
cat >"$APP/build.rs" <<'EOF'
fn main() {
    let out = std::process::Command::new("pkg-config")
        .args(["--variable=libdir", "mongoelector"])
        .output()
        .expect("pkg-config");
    let libdir = String::from_utf8(out.stdout).unwrap();
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", libdir.trim());
}
EOF
cat >"$APP/src/main.rs" <<'EOF'
use mongoelector::{Client, Elector, Locker};
use std::time::Duration;

// A minimal `log` logger: what an application's env_logger would print.
struct Stdout;
impl log::Log for Stdout {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, r: &log::Record) {
        println!("log: {} {}: {}", r.level(), r.target(), r.args());
    }
    fn flush(&self) {}
}

fn main() -> Result<(), mongoelector::Error> {
    log::set_logger(&Stdout).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    println!("libmongoelector {}", mongoelector::version());
    let db = std::env::args().nth(1).expect("path of a SQLite file");
    let client = Client::new(&format!("sqlite://{db}"), "")?;
    let lock = Locker::builder(&client, "rust-consumer").ttl(Duration::from_secs(60)).build()?;
    let guard = lock.acquire(Some(Duration::from_secs(10)))?;
    println!("lock taken, fence {}", guard.fence());
    guard.release()?;
    let elector = Elector::builder(&client, "rust-consumer-leader").build()?;
    elector.poll()?;
    println!("leader: {}", elector.is_leader()?);
    Ok(())
}
EOF

# Only PKG_CONFIG_PATH tells the build where the library is.
cargoenv=(env -u MONGOELECTOR_LIB_DIR -u PKG_CONFIG_LIBDIR -u LD_LIBRARY_PATH -u RUSTFLAGS
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WORK/target}" CARGO_TERM_COLOR=never)
BIN="${CARGO_TARGET_DIR:-$WORK/target}/debug/mongoelector-consumer"
cd "$APP"
start=$SECONDS
if "${cargoenv[@]}" PKG_CONFIG_PATH="$PCDIR" cargo build >"$WORK/build.log" 2>&1; then
  ok "cargo build of a fresh project (git dependency) with only PKG_CONFIG_PATH=$PCDIR ($((SECONDS - start)) s)"
  if out="$(env -u LD_LIBRARY_PATH timeout 60 "$BIN" "$WORK/locks.db" 2>&1)"; then
    echo "$out" | sed 's/^/    /'
    grep -qxF "libmongoelector $VERSION" <<<"$out" && ok "prints the library version $VERSION" \
      || bad "prints the library version $VERSION"
    grep -q '^lock taken, fence [1-9]' <<<"$out" && ok "takes a lock (SQLite)" || bad "takes a lock (SQLite)"
    grep -qxF "log: INFO mongoelector: became leader of rust-consumer-leader" <<<"$out" \
      && ok "library messages reach the log crate (target mongoelector) without a setup call" \
      || bad "library messages reach the log crate (target mongoelector)"
    loaded="$(env -u LD_LIBRARY_PATH ldd "$BIN" | grep libmongoelector || true)"
    [[ "$loaded" == *"$PREFIX"* ]] && ok "loads libmongoelector from the prefix" \
      || bad "loads libmongoelector from the prefix: $loaded"
  else
    echo "$out" | sed 's/^/    /' >&2
    bad "the Rust consumer runs"
  fi
else
  tail -40 "$WORK/build.log" >&2
  bad "cargo build of a fresh project with only PKG_CONFIG_PATH=$PCDIR"
fi

# Neither pkg-config nor MONGOELECTOR_LIB_DIR finds it: a message naming both.
mkdir -p "$WORK/empty"
if "${cargoenv[@]}" PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$WORK/empty" cargo build >"$WORK/nolib.log" 2>&1; then
  bad "cargo build fails when neither pkg-config nor MONGOELECTOR_LIB_DIR finds the library"
elif grep -q 'MONGOELECTOR_LIB_DIR' "$WORK/nolib.log" && grep -q 'pkg-config' "$WORK/nolib.log" \
    && ! grep -q 'unable to find library -lmongoelector' "$WORK/nolib.log"; then
  ok "without the library, cargo build fails naming MONGOELECTOR_LIB_DIR and pkg-config:"
  sed -n '/cannot find the C library/,/docs.rs/p' "$WORK/nolib.log" | sed 's/^/    /'
else
  cat "$WORK/nolib.log" >&2
  bad "cargo build's failure names MONGOELECTOR_LIB_DIR and pkg-config"
fi

# MONGOELECTOR_LIB_DIR alone (pkg-config finding nothing).
if "${cargoenv[@]}" PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$WORK/empty" MONGOELECTOR_LIB_DIR="$LIBDIR" \
    cargo build >"$WORK/libdir.log" 2>&1 \
   && LD_LIBRARY_PATH="$LIBDIR" timeout 60 "$BIN" "$WORK/locks.db" >/dev/null 2>&1; then
  ok "cargo build with MONGOELECTOR_LIB_DIR=$LIBDIR alone"
else
  tail -40 "$WORK/libdir.log" >&2
  bad "cargo build with MONGOELECTOR_LIB_DIR=$LIBDIR alone"
fi

echo "rust crate: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
