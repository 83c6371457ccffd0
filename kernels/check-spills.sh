#!/bin/sh
# check-spills.sh PTXAS_LOG: prints registers, stack and spills of every kernel and architecture
# from nvcc's -Xptxas -v output, and fails when a hot kernel spills (spill stores or loads > 0).
#
# Every kernel counts as hot except those matching $DB_COLD_KERNELS (an extended regex on the
# demangled name; empty by default: all of ours run in timed loops or are tiny).
set -eu
log=${1:?usage: check-spills.sh build/kernels-ptxas.log}
cold=${DB_COLD_KERNELS:-}
demangle=cat
if command -v c++filt >/dev/null 2>&1; then demangle=c++filt; fi

# One line per (arch, kernel): arch registers stack spill_stores spill_loads mangled_name
table=$(awk -v q="'" '
  /Compiling entry function/ { split($0, p, q); fn = p[2]; arch = p[4]; props = ""; next }
  /Function properties for/ { props = $NF; next }
  /bytes stack frame/ {
    if (props == fn) { stack = $1; stores = $5; loads = $9 }
    next
  }
  /Used [0-9]+ registers/ {
    for (i = 1; i <= NF; i++) if ($i == "Used") regs = $(i + 1)
    if (fn != "") printf "%s %s %s %s %s %s\n", arch, regs, stack, stores, loads, fn
    fn = ""
  }
' "$log")

if [ -z "$table" ]; then
  echo "check-spills: no kernels found in $log (was it built with -Xptxas -v?)" >&2
  exit 1
fi

printf '%-6s %5s %6s %7s %6s  %s\n' arch regs stack spill-st spill-ld kernel
echo "$table" | while read -r arch regs stack stores loads name; do
  pretty=$(echo "$name" | $demangle)
  printf '%-6s %5s %6s %7s %6s  %s\n' "$arch" "$regs" "$stack" "$stores" "$loads" "$pretty"
done
bad=$(echo "$table" | while read -r arch regs stack stores loads name; do
  if [ "$stores" != 0 ] || [ "$loads" != 0 ]; then
    pretty=$(echo "$name" | $demangle)
    if [ -n "$cold" ] && echo "$pretty" | grep -Eq "$cold"; then continue; fi
    echo "$arch $pretty: $stores bytes spill stores, $loads bytes spill loads"
  fi
done)
if [ -n "$bad" ]; then
  echo "check-spills: hot kernels spill registers:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-spills: no spills"
