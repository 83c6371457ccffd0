#!/bin/sh
# attention-registers.sh PTXAS_LOG [TABLE]: checks the sm_90 register counts that the attention
# planner's emulated occupancy uses (attn_sm90_registers in kernels/attention_instance.cuh) against
# ptxas's (the largest of bf16 and fp16 per kernel, from nvcc -Xptxas -v output, e.g.
# build/kernels-ptxas.log). Prints both and fails on any difference, so a kernel change that
# moves its registers also moves the table (and so the emulator's split choice with the card's).
set -eu
log=${1:?usage: attention-registers.sh build/kernels-ptxas.log [kernels/attention_instance.cuh]}
table=${2:-$(dirname "$0")/attention_instance.cuh}

# ptxas: "variant D GP registers", the largest over the dtypes
got=$(awk -v q="'" '
  /Compiling entry function/ {
    split($0, p, q); fn = p[2]; arch = p[4]; next
  }
  /Used [0-9]+ registers/ {
    if (arch == "sm_90" && match(fn, /attention_decode_(mma_)?kernelI[0-9A-Za-z_]+Li[0-9]+ELi[0-9]+E/)) {
      s = substr(fn, RSTART, RLENGTH)
      v = (s ~ /_mma_/) ? "mma" : "simt"
      n = split(s, parts, "Li")
      d = parts[n - 1]; sub(/E.*/, "", d)
      gp = parts[n]; sub(/E.*/, "", gp)
      for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i + 1)
      k = v " " d " " gp
      if (!(k in regs) || r + 0 > regs[k] + 0) regs[k] = r
    }
    fn = ""
  }
  END { for (k in regs) print k, regs[k] }
' "$log" | sort)

# the table: SIMT rows "{a, b, c, d, e},  /* D n */" (GP 1 2 4 8 16), MMA "gp8[] = {...}" and
# "gp16[] = {...}" (D 64 80 96 128 256)
want=$(awk '
  /constexpr int attn_sm90_registers/ { on = 1 }
  on && /^}/ { on = 0 }
  on && /\/\* D [0-9]+ \*\// {
    line = $0; d = line; sub(/.*\/\* D /, "", d); sub(/ .*/, "", d)
    sub(/^[^{]*\{+/, "", line); sub(/\}.*/, "", line); gsub(/ /, "", line)
    n = split(line, v, ","); split("1 2 4 8 16", gps, " ")
    for (i = 1; i <= n; i++) print "simt", d, gps[i], v[i]
  }
  on && /gp(8|16)\[\] = \{/ {
    line = $0; gp = line; sub(/.*gp/, "", gp); sub(/\[.*/, "", gp)
    sub(/^[^{]*\{/, "", line); sub(/\}.*/, "", line); gsub(/ /, "", line)
    n = split(line, v, ","); split("64 80 96 128 256", ds, " ")
    for (i = 1; i <= n; i++) print "mma", ds[i], gp, v[i]
  }
' "$table" | sort)

if [ -z "$got" ]; then
  echo "attention-registers: no sm_90 attention decode kernels in $log" >&2
  exit 1
fi
if [ "$got" != "$want" ]; then
  echo "attention-registers: attn_sm90_registers ($table) differs from ptxas ($log):" >&2
  echo "variant D GP registers: ptxas vs table" >&2
  printf '%s\n' "$got" > /tmp/attn-regs-got.$$
  printf '%s\n' "$want" > /tmp/attn-regs-want.$$
  diff /tmp/attn-regs-got.$$ /tmp/attn-regs-want.$$ >&2 || true
  rm -f /tmp/attn-regs-got.$$ /tmp/attn-regs-want.$$
  exit 1
fi
echo "attention-registers: the $(printf '%s\n' "$got" | wc -l) sm_90 decode kernels match attn_sm90_registers"
