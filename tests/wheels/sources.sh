# Sourced by tests/wheels/deps.sh: Debian source packages (upstream source plus Debian's
# patches, i.e. its security fixes), fetched with apt-get through a private apt
# configuration in the cache: the machine's sources.list is left untouched.
#
#   debian_source PKG [UPSTREAM_PREFIX]   prints the directory of PKG's extracted source,
#                                         the newest version whose upstream version starts
#                                         with UPSTREAM_PREFIX (e.g. "1.23." or "3.0.")

APT_DIR="$WHEEL_CACHE/apt"

apt_private() {  # apt_private apt-get|apt-cache ARGS...
  "$1" -o Dir::Etc::SourceList="$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache" \
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root "${@:2}"
}

apt_private_update() {
  [[ -f "$APT_DIR/.updated" && -n "$(find "$APT_DIR/.updated" -mmin -1440)" ]] && return 0
  local codename
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  [[ -n "$codename" ]] || { echo "wheels: no VERSION_CODENAME in /etc/os-release (needs Debian)" >&2; return 1; }
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  cat >"$APT_DIR/sources.list" <<EOF
deb-src http://deb.debian.org/debian $codename main
deb-src http://deb.debian.org/debian $codename-updates main
deb-src http://deb.debian.org/debian-security $codename-security main
EOF
  apt_private apt-get -q update >/dev/null
  touch "$APT_DIR/.updated"
}

debian_source() {
  local pkg="$1" want="${2:-}" ver dir tmp
  apt_need dpkg-dev
  mkdir -p "$WHEEL_CACHE/src"
  # Already extracted (any Debian revision of the wanted upstream version): no network.
  dir="$(ls -d "$WHEEL_CACHE/src/$pkg-$want"*/.complete 2>/dev/null | sort -V | tail -1)"
  if [[ -n "$dir" ]]; then dirname "$dir"; return 0; fi
  apt_private_update
  # Newest first; a version the mirror lists but no longer serves is skipped.
  for ver in $(apt_private apt-cache showsrc "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | sort -rV); do
    [[ "${ver#*:}" == "$want"* ]] || continue
    tmp="$(mktemp -d "$WHEEL_CACHE/src/.fetch.XXXXXX")"
    if (cd "$tmp" && apt_private apt-get source --download-only "$pkg=$ver" >fetch.log 2>&1); then
      dir="$WHEEL_CACHE/src/$pkg-${ver#*:}"
      rm -rf "$dir"
      (cd "$tmp" && dpkg-source -x ./*.dsc "$dir" >extract.log 2>&1) ||
        { cat "$tmp/extract.log" >&2; rm -rf "$tmp"; return 1; }
      touch "$dir/.complete"
      rm -rf "$tmp"
      echo "$dir"
      return 0
    fi
    rm -rf "$tmp"
  done
  echo "wheels: apt-get source $pkg ($want*) failed" >&2
  return 1
}
