#!/bin/sh
# plant-unroll1.sh FILE 'LINE': FILE with `#pragma unroll 1` in place of the unroll pragma (or
# before the line) of the first line that is exactly LINE after indentation; fails when none is.
# The static gate's selftest plants its regression with it (kernels.mk, kernels-check-selftest).
awk -v want="$2" '
  function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
  { line[NR] = $0 }
  !done && trim($0) == want {
    if (NR > 1 && (trim(line[NR-1]) == "DB_UNROLL" || trim(line[NR-1]) ~ /^#pragma unroll/)) line[NR-1] = "#pragma unroll 1"
    else line[NR] = "#pragma unroll 1\n" $0
    done = 1
  }
  END {
    if (!done) { print "plant-unroll1.sh: no line of " FILENAME " is \"" want "\": point KERNELS_SELFTEST_LOOP at the GEMV load loop" > "/dev/stderr"; exit 1 }
    for (i = 1; i <= NR; i++) print line[i]
  }' "$1"
