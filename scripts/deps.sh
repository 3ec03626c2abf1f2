#!/bin/sh
# scripts/deps.sh build|test — make sure what the build (or the tests) need is installed.
# Checks by trying the compiler / the command itself, not by package name, so any distribution
# passes when the pieces are there. When something is missing on Debian/Ubuntu: installs it with
# apt-get as root, or prints the exact command to run and fails when not root.
set -u
what=${1:-build}
CC=${CC:-cc}
missing=""
need() { missing="$missing $1"; }
has_header() { printf '#include <%s>\n' "$1" | "$CC" -E -x c - >/dev/null 2>&1; }

command -v "$CC" >/dev/null 2>&1 || need build-essential
has_header jansson.h || need libjansson-dev
printf '#define PCRE2_CODE_UNIT_WIDTH 8\n#include <pcre2.h>\n' | "$CC" -E -x c - >/dev/null 2>&1 || need libpcre2-dev
has_header utf8proc.h || need libutf8proc-dev
has_header openssl/evp.h || need libssl-dev
has_header microhttpd.h || need libmicrohttpd-dev
if [ "$what" = test ]; then
  command -v pkg-config >/dev/null 2>&1 || need pkg-config
  command -v node >/dev/null 2>&1 || need nodejs
  command -v npm >/dev/null 2>&1 || need npm
  /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need python3-numpy
  command -v curl >/dev/null 2>&1 || need curl   # tests/test_serve.sh
  command -v tmux >/dev/null 2>&1 || need tmux   # tests/test_chat_tmux.sh: fp4lane chat in a terminal
fi
[ -z "$missing" ] && exit 0

echo "fp4lane: missing for '$what':$missing" >&2
if ! command -v apt-get >/dev/null 2>&1; then
  echo "fp4lane: install the equivalents of these Debian packages with your package manager:$missing" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "fp4lane: run this, then the same make command again:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "fp4lane: installing with apt-get:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends $missing >&2 || {
  echo "fp4lane: apt-get install failed; run it by hand:  apt-get install -y$missing" >&2; exit 1; }
echo "fp4lane: installed:$missing" >&2
