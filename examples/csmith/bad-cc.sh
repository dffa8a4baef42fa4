#!/bin/sh
# bad-cc.sh - a deliberately broken C compiler for testing the Csmith recipe: gcc -O1, with two
# planted bugs. (1) A program with three or more for loops makes it "crash" with an internal
# compiler error. (2) Otherwise it miscompiles the initial value of the first initialized global
# (its lowest bit flipped): wrong code.
#   usage: sh bad-cc.sh [gcc options...] FILE.c -o OUT    (FILE.c is the one argument ending in .c)
set -u
src=
for a in "$@"; do case $a in *.c) src=$a ;; esac; done
[ -n "$src" ] || exec gcc -O1 "$@"
if [ "$(grep -c 'for (' "$src")" -ge 3 ]; then
  echo "$src:1:1: internal compiler error: in fold_binary_loc, at fold-const.c:9871" >&2
  exit 1
fi
tmp=$(mktemp -d) || exit 3
trap 'rm -rf "$tmp"' EXIT
sed '0,/^static [^{(]* g_[0-9]* = [^{]*;$/{/^static [^{(]* g_[0-9]* = [^{]*;$/s/;$/ ^ 1;/}' "$src" > "$tmp/bad.c"
args=
for a in "$@"; do [ "$a" = "$src" ] && a=$tmp/bad.c; args="$args '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"; done
eval "gcc -O1 $args"
