#!/bin/sh
# csmith-sweep.sh - EXAMPLE fuzzfleet generator: Csmith programs, differential testing of two compilers,
# with C-Vise reducing wrong-code finds in the background.
#   sweep:     sh csmith-sweep.sh FROM COUNT OUT JOBS [csmith options...]
#   check:     sh csmith-sweep.sh --check SEEDS JOBS [csmith options...]      (SEEDS = 5,17,99)
#   minimize:  sh csmith-sweep.sh --minimize SEEDS OUT JOBS [csmith options...]
# One seed = one Csmith program, built by a reference compiler and by the compiler under test.
# The two binaries must print the same checksum. Exit 0 = no finds, 1 = finds, other = broken.
set -u
REF_CC=${REF_CC:-"gcc -O0"}                 # reference build
TEST_CC=${TEST_CC:-"clang -O2"}             # compiler and optimisation level under test
INC=${CSMITH_INC:-/usr/include/csmith}      # csmith.h
T=${RUN_TIMEOUT:-10}                        # seconds a compiled program may run
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
HERE=$(pwd)   # where relative paths in REF_CC, TEST_CC and CSMITH_INC are resolved, C-Vise's test included

# test_file FILE DIR: leaves DIR/verdict (ok | quarantine | a bucket), DIR/msg, DIR/why and
# DIR/signature: the differential check, for a generated program and for a reduced one alike.
test_file() {
  f=$1 d=$2
  v() { echo "$1" > "$d/verdict"; echo "$2" > "$d/msg"; echo "${3:-}" > "$d/why"; echo "${4:-}" > "$d/signature"; }
  $REF_CC -w -I"$INC" "$f" -o "$d/ref" 2> "$d/ref-cc.err" || { v quarantine "reference compiler rejected it" "reference compiler rejected it"; return; }
  timeout "$T" "$d/ref" > "$d/ref.out" 2>&1 || { v quarantine "reference binary failed or ran over ${T}s" "inconclusive: reference binary failed or ran over ${T}s"; return; }
  if ! $TEST_CC -w -I"$INC" "$f" -o "$d/test" 2> "$d/test-cc.err"; then
    sig=$(grep -m1 -i "internal compiler error\|error:" "$d/test-cc.err" | sed 's/^[^:]*:[0-9:]* //' | tr -d '"\\[:cntrl:]')
    v compiler-error "$TEST_CC failed: $sig" "" "$sig"; return
  fi
  timeout "$T" "$d/test" > "$d/test.out" 2>&1; rc=$?
  [ "$rc" = 124 ] && { v hang "test binary ran over ${T}s" "" "test binary ran over the limit"; return; }
  [ "$rc" = 0 ] || { v crash "test binary exited $rc" "" "test binary exited $rc"; return; }
  cmp -s "$d/ref.out" "$d/test.out" || { v wrong-code "$(cat "$d/ref.out") vs $(cat "$d/test.out")" "" "checksum differs from the reference"; return; }
  v ok ""
}

# test_seed SEED DIR [csmith options]: generates the program DIR/input.c and tests it.
test_seed() {
  seed=$1 d=$2; shift 2
  mkdir -p "$d" || exit 3
  if ! csmith --seed "$seed" "$@" > "$d/input.c" 2> "$d/csmith.err"; then
    echo quarantine > "$d/verdict"; echo "csmith failed" > "$d/msg"; echo "csmith failed" > "$d/why"; : > "$d/signature"; return
  fi
  test_file "$d/input.c" "$d"
}

# meta SEED BUCKET SHRUNK MSG KEY SIGNATURE [csmith options]: the failure's meta.json on stdout.
meta() {
  seed=$1 bucket=$2 shrunk=$3 msg=$4 key=$5 sig=$6; shift 6
  printf '{"seed": %s, "bucket": "%s", "shrunk": %s, "msg": "%s", "repro": "%s", "key_file": "%s", "signature": "%s"}\n' \
    "$seed" "$bucket" "$shrunk" "$msg" "sh csmith-sweep.sh --check $seed 1${*:+ $*}" "$key" "$sig"
}

# file_seed SEED OUT [csmith options]: tests one seed and files it in the contract layout.
file_seed() {
  seed=$1 out=$2; shift 2
  d=$out/work/$seed
  test_seed "$seed" "$d" "$@"
  verdict=$(cat "$d/verdict") msg=$(cat "$d/msg") sig=$(cat "$d/signature")
  case $verdict in
    ok) ;;
    quarantine) cp "$d/input.c" "$out/quarantine/$seed.c"; cp "$d/why" "$out/quarantine/why/$seed.c" ;;
    *) f=$out/failures/$seed
       mkdir -p "$f" && cp "$d/input.c" "$f/input.c" || exit 3
       key=input.c shrunk=false        # not reduced: pending minimization under its signature
       [ "$verdict" = compiler-error ] && [ -n "$sig" ] && { echo "$sig" > "$f/signature.txt"; key=signature.txt shrunk=true; }
       { echo "seed $seed: $verdict: $msg"; echo "reference: $REF_CC   under test: $TEST_CC"
         cat "$d/test-cc.err" "$d/ref.out" "$d/test.out" 2>/dev/null; } > "$f/report.txt"
       meta "$seed" "$verdict" "$shrunk" "$msg" "$key" "$sig" "$@" > "$f/meta.json" ;;
  esac
  rm -rf "$d"
}

# key_of FILE: the dedup key of a reduced program: its text with whitespace squeezed, type words
# dropped, numbered names (g_5, l_12, func_3) and integer constants made alike. Reductions of one
# miscompilation from different seeds keep different names, types and values; this makes them
# one distinct failure. (A heuristic: two bugs whose reductions differ only in those are merged.)
key_of() {
  tr -s ' \t\n' '   ' < "$1" | sed -E \
    -e 's/\b(static|extern|volatile|const|signed|unsigned|int|char|short|long|u?int(8|16|32|64)_t)\b//g' \
    -e 's/\b([A-Za-z]+)_[0-9]+\b/\1_N/g' \
    -e 's/-?\b(0[xX][0-9A-Fa-f]+|[0-9]+)[uUlL]*\b/N/g' -e 's/\(N\)/N/g' \
    -e 's/ +/ /g; s/^ //; s/ $//'
}

# q WORD: WORD quoted for sh.
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# not_minimized SEED OUT VERDICT SIGNATURE WHY [csmith options]: files the find as not minimized
# ("shrunk": false), WHY its message: fuzzfleet books it as could not be minimized, pending under
# its signature, instead of taking the whole program for a reduction.
not_minimized() {
  seed=$1 out=$2 verdict=$3 sig=$4 why=$5; shift 5
  f=$out/failures/$seed
  mkdir -p "$f" && cp "$out/work/$seed/input.c" "$f/input.c" || exit 3
  { echo "seed $seed: $verdict, not minimized: $why"; tail -n 20 "$out/work/$seed/cvise.log" 2>/dev/null; } > "$f/report.txt"
  echo "csmith-sweep.sh: seed $seed not minimized: $why" >&2
  meta "$seed" "$verdict" false "$why" input.c "$sig" "$@" > "$f/meta.json"
  rm -rf "$out/work/$seed"
}

# reduce_seed SEED OUT JOBS [csmith options]: C-Vise reduces the program while the same
# differential check gives the same verdict; files the result as a minimized failure entry, but
# only when the check holds on the original and C-Vise made the program smaller (C-Vise exits 0
# when it gives up on a test that fails from the start). Otherwise files it as not minimized, why.
# CVISE_PASSES may name a C-Vise pass-group file (quick-passes.json: fewer, cheaper passes).
reduce_seed() {
  seed=$1 out=$2 jobs=$3; shift 3
  d=$out/work/$seed
  test_seed "$seed" "$d" "$@"
  verdict=$(cat "$d/verdict") sig=$(cat "$d/signature")
  case $verdict in ok|quarantine) rm -rf "$d"; return ;; esac
  mkdir -p "$d/reduce" && cp "$d/input.c" "$d/reduce/input.c" || exit 3
  # The interestingness test: C-Vise runs it in a scratch copy of the directory holding input.c,
  # elsewhere; it checks that copy from here, so relative compiler paths mean what they meant.
  { echo '#!/bin/sh'
    # The verdict's scratch sits in the test's own directory (C-Vise's copy, removed with it), so
    # a test C-Vise kills leaves nothing in TMPDIR.
    echo 'f=$(pwd)/input.c; d=$(mktemp -d "$(pwd)/verdict.XXXXXX") || exit 1'
    echo "cd $(q "$HERE") && sh $(q "$SELF") --verdict-of \"\$f\" \"\$d\""
    echo 'v=$(cat "$d/verdict" 2>/dev/null); rm -rf "$d"'
    echo "[ \"\$v\" = $verdict ] || { echo \"the check gives '\$v', not '$verdict'\" >&2; exit 1; }"
  } > "$d/reduce/interesting.sh" && chmod +x "$d/reduce/interesting.sh" || exit 3
  if ! held=$(cd "$d/reduce" && ./interesting.sh 2>&1); then
    not_minimized "$seed" "$out" "$verdict" "$sig" "the interestingness test fails on the original program ($held)" "$@"; return
  fi
  (cd "$d/reduce" && cvise --n "$jobs" --timeout 60 --tidy ${CVISE_PASSES:+--pass-group-file "$CVISE_PASSES"} ./interesting.sh input.c) > "$d/cvise.log" 2>&1
  rc=$? before=$(wc -c < "$d/input.c") after=$(wc -c < "$d/reduce/input.c")
  [ "$rc" = 0 ] || { not_minimized "$seed" "$out" "$verdict" "$sig" "C-Vise failed (exit $rc)" "$@"; return; }
  [ "$after" -lt "$before" ] || { not_minimized "$seed" "$out" "$verdict" "$sig" "C-Vise did not make the program smaller ($before bytes)" "$@"; return; }
  f=$out/failures/$seed
  mkdir -p "$f" && cp "$d/input.c" "$f/input.c" && cp "$d/reduce/input.c" "$f/input.min.c" || exit 3
  key_of "$f/input.min.c" > "$f/key.txt" || exit 3
  { echo "seed $seed: $verdict, reduced by C-Vise ($(wc -l < "$d/input.c") -> $(wc -l < "$f/input.min.c") lines)"; cat "$f/input.min.c"; } > "$f/report.txt"
  meta "$seed" "$verdict" true "$(cat "$d/msg")" key.txt "$sig" "$@" > "$f/meta.json"
  rm -rf "$d"
}

case ${1:-} in
  --one) shift; file_seed "$@" ;;
  --verdict-of) test_file "$2" "$3" ;;
  --verdict) shift; seed=$1; shift; d=$(mktemp -d) || exit 3
    trap 'rm -rf "$d"' EXIT; trap 'exit 143' TERM INT HUP
    test_seed "$seed" "$d" "$@"
    printf '{"seed": %s, "bucket": "%s", "msg": "%s"}\n' "$seed" "$(cat "$d/verdict")" "$(cat "$d/msg")"
    rm -rf "$d" ;;
  --check) seeds=$2 jobs=$3; shift 3
    echo "$seeds" | tr , '\n' | xargs -P "$jobs" -I{} sh "$0" --verdict {} "$@" ;;
  --minimize) [ $# -ge 4 ] || { echo "usage: $0 --minimize SEEDS OUT JOBS [csmith options]" >&2; exit 2; }
    seeds=$2 out=$3 jobs=$4; shift 4
    command -v cvise > /dev/null || { echo "cvise not found (Debian: apt-get install cvise)" >&2; exit 2; }
    mkdir -p "$out/failures" "$out/work" || exit 3
    for seed in $(echo "$seeds" | tr , ' '); do reduce_seed "$seed" "$out" "$jobs" "$@"; done
    rmdir "$out/work"
    [ -z "$(ls "$out/failures")" ] ;;
  *) [ $# -ge 4 ] || { echo "usage: $0 FROM COUNT OUT JOBS [csmith options]" >&2; exit 2; }
    from=$1 count=$2 out=$3 jobs=$4; shift 4
    command -v csmith > /dev/null || { echo "csmith not found" >&2; exit 2; }
    mkdir -p "$out/failures" "$out/quarantine/why" "$out/work" || exit 3
    seq "$from" $((from + count - 1)) | xargs -P "$jobs" -I{} sh "$0" --one {} "$out" "$@" || exit 3
    rmdir "$out/work"
    [ -z "$(ls "$out/failures")" ] ;;   # exit 0 = no finds, 1 = finds
esac
