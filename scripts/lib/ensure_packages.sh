#!/usr/bin/env bash
# Sourced by scripts/*.sh: `ensure_packages pkg...` installs the Debian packages that are missing
# (as root, with apt-get), or warns when not root. Nothing is downloaded outside Debian's archive.
ensure_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) -eq 0 ]]; then
    echo "Installing missing packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "warning: missing Debian packages (not root, not installing): ${missing[*]}" >&2
  fi
}
