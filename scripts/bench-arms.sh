# What the arm-against-arm benches share (sourced by bench-exec-gate.sh and
# bench-enforce-fs.sh): rounds that run every arm once, interleaved, through
# the caller's `run ARM` (one number on stdout); the figures kept per arm; the
# ratio of two arms within each round; the verdict against a target; and the
# row for make bench's summary (results.json).

declare -A BENCH_ALL
BENCH_RATIOS=()

# bench_rounds REPS TESTED BASE ARM...: REPS rounds of every ARM, in order;
# each round's TESTED/BASE ratio appended to BENCH_RATIOS.
bench_rounds() {
  local reps=$1 tested=$2 base=$3 r arm t b
  shift 3
  for r in $(seq "$reps"); do
    for arm in "$@"; do BENCH_ALL[$arm]+="$(run "$arm") "; done
    t=$(echo "${BENCH_ALL[$tested]}" | awk '{print $NF}')
    b=$(echo "${BENCH_ALL[$base]}" | awk '{print $NF}')
    BENCH_RATIOS+=("$(awk -v a="$t" -v b="$b" 'BEGIN{printf "%.2f", a/b}')")
  done
}

# bench_stats ARM DIVISOR DECIMALS UNIT: "MEDIAN UNIT [MIN-MAX]" of an arm's figures, each divided.
bench_stats() {
  echo "${BENCH_ALL[$1]}" | tr ' ' '\n' | grep -v '^$' | sort -n |
    awk -v d="$2" -v p="$3" -v u="$4" '{v[NR]=$1} END{f="%." p "f"; printf f " " u " [" f "-" f "]", v[int((NR+1)/2)]/d, v[1]/d, v[NR]/d}'
}

# bench_verdict LABEL TARGET: prints "  LABEL: MEDx [LO-HI] (target <= TARGETx: MET|MISSED)"
# over BENCH_RATIOS and sets BENCH_MED, BENCH_LO, BENCH_HI and BENCH_VERDICT.
bench_verdict() {
  local sorted
  sorted=$(printf '%s\n' "${BENCH_RATIOS[@]}" | sort -n)
  BENCH_MED=$(awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}' <<<"$sorted")
  BENCH_LO=$(head -1 <<<"$sorted")
  BENCH_HI=$(tail -1 <<<"$sorted")
  BENCH_VERDICT=MET
  if awk -v m="$BENCH_MED" -v t="$2" 'BEGIN{exit !(m > t)}'; then BENCH_VERDICT=MISSED; fi
  echo "  $1: ${BENCH_MED}x [${BENCH_LO}-${BENCH_HI}] (target <= ${2}x: $BENCH_VERDICT)"
}

# bench_summary_row STEP CASE ABSOLUTE TARGET: the verdict's row in make bench's summary.
bench_summary_row() {
  [ -n "${BENCH_SUMMARY:-}" ] || return 0
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${BENCH_MED}x [${BENCH_LO}-${BENCH_HI}]" "$4" "$BENCH_VERDICT" \
    >>"$BENCH_SUMMARY"
}
