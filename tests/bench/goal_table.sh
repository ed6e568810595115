#!/usr/bin/env bash
# The per-step speed goals of issue 16 as a Markdown table, read from the
# benches' CSV files: for every path, the goal, what this run measured
# (reference BLAS and, when given, OpenBLAS with one thread), whether the
# goal is met, and the baseline the ratio is taken against (measured in the
# same run, on the same data). docs/performance.md's table is this script's
# output.
#
# usage: goal_table.sh -m MECH.csv [-o MECH_OPENBLAS.csv] [-d DAE.csv] [-n NULLSPACE.csv]
#
#   MECH.csv       bench_mechanics --csv (reference BLAS build)
#   MECH_OPENBLAS  the same bench from an OpenBLAS build (OPENBLAS_NUM_THREADS=1)
#   DAE.csv        bench_dae --csv;  NULLSPACE.csv  bench_nullspace --csv
#
# Ranges "a–b" are the smallest and largest ratio over the sizes named in
# the row. Only awk is needed.
set -euo pipefail

usage() {
    echo "usage: $0 -m MECH.csv [-o MECH_OPENBLAS.csv] [-d DAE.csv] [-n NULLSPACE.csv]" >&2
    exit 2
}

mech="" mech_ob="" dae="" ns=""
while getopts "m:o:d:n:h" opt; do
    case $opt in
    m) mech=$OPTARG ;;
    o) mech_ob=$OPTARG ;;
    d) dae=$OPTARG ;;
    n) ns=$OPTARG ;;
    *) usage ;;
    esac
done
[[ -n $mech ]] || usage
for f in "$mech" "$mech_ob" "$dae" "$ns"; do
    [[ -z $f || -r $f ]] || { echo "$0: cannot read $f" >&2; exit 1; }
done

# range: the numbers on stdin (one per line) as "a" or "a–b" (smallest and
# largest), "-" when there are none.
range() {
    awk '{ v = $1 + 0; if (!seen || v < a) a = v; if (!seen || v > b) b = v; seen = 1 }
        END {
            if (!seen) { print "-"; exit }
            if (a == b) printf "%.3g\n", a; else printf "%.3g–%.3g\n", a, b
        }'
}

# csv FILE: the data rows of a bench CSV (no comments, no header), or
# nothing for an empty FILE argument.
csv() {
    [[ -n $1 ]] || return 0
    grep -v -e '^#' -e '^section,' -e '^n,' "$1" || true
}

# mech_value FILE KIND SECTION CASE NMIN NMAX: the range over the rows of
# bench_mechanics' CSV (section, case, n, m, median_s, min_s, max_s,
# baseline, ratio, extra_name, extra) with n in [NMIN, NMAX]; KIND picks the
# column: ratio, extra (the extra value) or micro (the median in us).
mech_value() {
    csv "$1" | awk -F, -v kind="$2" -v sec="$3" -v name="$4" -v lo="$5" -v hi="$6" '
        $1 == sec && $2 == name && $3 + 0 >= lo && $3 + 0 <= hi {
            print kind == "ratio" ? $9 : kind == "extra" ? $11 : 1e6 * $5
        }' | range
}

# worst VALUE DIRECTION GOAL: "yes" when the worst end of VALUE ("a" or
# "a–b") meets GOAL (DIRECTION le: at most; ge: at least), "no" otherwise,
# "-" without a value.
meets() {
    awk -v v="$1" -v dir="$2" -v goal="$3" 'BEGIN {
        if (v == "-") { print "-"; exit }
        n = split(v, p, "–")
        worst = dir == "le" ? p[n] + 0 : p[1] + 0
        ok = dir == "le" ? worst <= goal : worst >= goal
        print ok ? "yes" : "no"
    }'
}

# row PATH GOAL_TEXT DIRECTION GOAL REF OPENBLAS BASELINE (GOAL_TEXT
# "report": a figure without a goal)
row() {
    local verdict
    verdict=$(meets "$5" "$3" "$4")
    [[ $2 == report ]] && verdict="-"
    if [[ $6 != "-" && $verdict != "-" && $2 != report ]]; then
        [[ $(meets "$6" "$3" "$4") == yes && $verdict == yes ]] && verdict=yes || verdict=no
    fi
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$5" "$6" "$verdict" "$7"
}

echo "| path | goal | now, reference BLAS | now, OpenBLAS 1 thread | met | same-run baseline |"
echo "| --- | --- | --- | --- | --- | --- |"

r=$(mech_value "$mech" ratio 1 "load+lagrange" 3 3)
o=$(mech_value "$mech_ob" ratio 1 "load+lagrange" 3 3)
row "KKT (load + lagrange), n = 3, m = 2" "≤ 1.3×" le 1.3 "$r" "$o" \
    "hand-written 5 × 5 elimination, no checks"

# KKT against the bordered dgesv at n <= 12: section 1 (n = 3, extra =
# ratio_to_dgesv) and section 5 (n = 6, 12)
small_ratio() {
    csv "$1" | awk -F, '
        $1 == 1 && $2 == "load+lagrange" { print $11 }
        $1 == 5 && $2 == "load+lagrange" && $3 + 0 <= 12 { print $9 }' | range
}
r=$(small_ratio "$mech")
o=$(small_ratio "$mech_ob")
row "KKT vs bordered dgesv, n = 3–12" "≤ 0.35" le 0.35 "$r" "$o" "bordered KKT by dgesv"

r=$(mech_value "$mech" ratio 5 "load+lagrange" 100 300)
o=$(mech_value "$mech_ob" ratio 5 "load+lagrange" 100 300)
row "KKT vs bordered dgesv, n = 100–300" "≤ 0.5" le 0.5 "$r" "$o" "bordered KKT by dgesv"

r=$(mech_value "$mech" ratio 2 "load+lagrange rate/dgemm rate" 300 300)
o=$(mech_value "$mech_ob" ratio 2 "load+lagrange rate/dgemm rate" 300 300)
row "KKT flop rate at n = 300, share of dgemm's" "≥ 0.6 (OpenBLAS)" ge 0.6 "-" "$o" \
    "dgemm C = AB, n = 300 (reference BLAS: $r)"

r=$(mech_value "$mech" micro 4 "RK4+project 10 s; per step" 3 3)
[[ $r == "-" ]] && r=$(mech_value "$mech" micro 4 "RK4+project 1 s; per step" 3 3)
o=$(mech_value "$mech_ob" micro 4 "RK4+project 10 s; per step" 3 3)
[[ $o == "-" ]] && o=$(mech_value "$mech_ob" micro 4 "RK4+project 1 s; per step" 3 3)
row "slider crank, RK4 + projection, per step [µs]" "≤ 2.5 µs" le 2.5 "$r" "$o" \
    "none: an absolute time, on this VM"

r=$(mech_value "$mech" ratio 3 "cdyn_rigid_rhs FREE by set_preset" 6 6)
o=$(mech_value "$mech_ob" ratio 3 "cdyn_rigid_rhs FREE by set_preset" 6 6)
row "cdyn_rigid_rhs, FREE by cdyn_rigid_set_preset" "≤ 3×" le 3 "$r" "$o" \
    "Euler equations by hand, Euler-angle kinematics"
r=$(mech_value "$mech" ratio 3 "cdyn_rigid_rhs FREE preset" 6 6)
o=$(mech_value "$mech_ob" ratio 3 "cdyn_rigid_rhs FREE preset" 6 6)
row "cdyn_rigid_rhs, FREE through a motion callback (general path)" "report" le 1e300 "$r" \
    "$o" "Euler equations by hand, Euler-angle kinematics"

if [[ -n $dae ]]; then
    r=$(csv "$dae" | awk -F, '$1 == "rhs" && $5 == "cdyn_dae_rhs" && $11 != "" { print $11 }' |
        range)
    row "cdyn_dae_rhs, n = 4–100" "report" le 1e300 "$r" "-" \
        "the same rates by hand: LU of the structure-aware system"
fi

if [[ -n $ns ]]; then
    r=$(csv "$ns" | awk -F, '$3 == "nullspace_solve" && $1 + 0 <= 12 { print $7 }' | range)
    row "cdyn_nullspace_solve (cached), n ≤ 12" "report" le 1e300 "$r" "-" \
        "bordered KKT by dgesv"
fi
