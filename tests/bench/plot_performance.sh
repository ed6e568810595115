#!/usr/bin/env bash
# Plot bench_constraint's CSV: time per call (median, with min-max bars)
# against n, log-log, for every T4 formulation with its dgesv baseline and
# the dgemm reference (left panel), and for the mbs layer — projection,
# coordinate partitioning, rhs — with its one-KKT-solve cost unit (right
# panel). A second CSV (for instance from an OpenBLAS build) is drawn in the
# same colours with dashed lines.
#
# usage: plot_performance.sh -o OUT.png [-t TITLE] CSV[=LABEL] [CSV2[=LABEL2]]
#
# LABEL defaults to the BLAS library named in the CSV's "# blas" comment
# line (bench_util.c writes it). Needs bash, awk and gnuplot (pngcairo if
# available, else png).
#
# Example:
#   ./build/tests/bench/bench_constraint --csv ref.csv
#   ./build-openblas/tests/bench/bench_constraint --csv openblas.csv
#   tests/bench/plot_performance.sh -o constraint.png ref.csv=reference openblas.csv=OpenBLAS
set -euo pipefail

usage() {
    echo "usage: $0 -o OUT.png [-t TITLE] CSV[=LABEL] [CSV2[=LABEL2]]" >&2
    exit 2
}

out="" title="cdyn bench_constraint: time per call"
while getopts "o:t:h" opt; do
    case $opt in
    o) out=$OPTARG ;;
    t) title=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ -n $out && $# -ge 1 && $# -le 2 ]] || usage
command -v gnuplot >/dev/null || { echo "$0: gnuplot not found" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Formulations drawn in the left panel (T4 section) and the right panel
# (mbs section); colours are by position in these lists.
t4_paths=(kkt baumgarte gen_baumgarte reactions pseudoinverse penalty export export_dgesv dgesv_baum dgemm)
mbs_paths=(dgesv_mbs mbs_rhs project_mass project_minnorm partition_rhs)
colors=('#9400d3' '#009e73' '#56b4e9' '#e69f00' '#8c510a' '#0072b2' '#e51e10' '#808080' '#000000'
        '#cc79a7')

labels=()
k=0
for arg in "$@"; do
    csv=${arg%%=*}
    label=""
    [[ $arg == *=* ]] && label=${arg#*=}
    [[ -r $csv ]] || { echo "$0: cannot read $csv" >&2; exit 1; }
    if [[ -z $label ]]; then
        label=$(awk -F': ' '/^# blas/ { n = split($2, a, "/"); print a[n]; exit }' "$csv")
        [[ -n $label ]] || label=$(basename "$csv" .csv)
    fi
    labels+=("$label")
    # one data file per (section, path): n, median, min, max in microseconds
    awk -F, -v dir="$tmp" -v k="$k" '
        /^#/ { next }
        !header { for (i = 1; i <= NF; ++i) col[$i] = i; header = 1;
                  if (!("path" in col) || !("median_s" in col)) {
                      print "not a bench_constraint CSV (no path/median_s columns)" > "/dev/stderr"; exit 1 }
                  next }
        $col["median_s"] == "" { next }
        { f = dir "/" k "_" $col["section"] "_" $col["path"] ".dat"
          printf "%s %.6g %.6g %.6g\n", $col["n"], 1e6 * $col["median_s"], 1e6 * $col["min_s"],
                 1e6 * $col["max_s"] > f }' "$csv"
    k=$((k + 1))
done

if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
    term="pngcairo size 1600,1000 enhanced font 'Sans,10'"
else
    term="png size 1600,1000"
fi

# gnuplot script: one "plot" clause per existing data file
plot_clauses() { # section, list of paths
    local section=$1
    shift
    local clauses="" c=1 d=0 f
    for path in "$@"; do
        for ((d = 0; d < k; ++d)); do
            f="$tmp/${d}_${section}_${path}.dat"
            [[ -s $f ]] || continue
            local dt=1 pt=7
            ((d == 1)) && dt=2 pt=6
            local name=$path
            ((k > 1)) && name="$name (${labels[$d]})"
            local lc="rgb '${colors[$(((c - 1) % ${#colors[@]}))]}'"
            local style="yerrorlines lc $lc dt $dt pt $pt ps 0.8 lw 1.5"
            [[ $path == dgemm ]] && style="points lc rgb '#cc79a7' pt $((d == 1 ? 4 : 5)) ps 1.4"
            [[ $path == dgesv_* ]] && style="yerrorlines lc rgb 'black' dt $dt pt $pt ps 0.8 lw 2.5"
            clauses+="${clauses:+, }'$f' using 1:2:3:4 with $style title \"$name\" noenhanced"
        done
        c=$((c + 1))
    done
    echo "$clauses"
}

left=$(plot_clauses T4 "${t4_paths[@]}")
right=$(plot_clauses mbs "${mbs_paths[@]}")
[[ -n $left || -n $right ]] || { echo "$0: no data rows found" >&2; exit 1; }

{
    echo "set terminal $term"
    echo "set output '$out'"
    echo "set multiplot layout 1,2 title \"$title\" noenhanced"
    echo "set logscale xy"
    echo "set xrange [2.5:400]"
    echo "set xtics (3, 6, 12, 30, 100, 300)"
    echo "set format y '10^{%T}'"
    echo "set grid xtics ytics mytics"
    echo "set xlabel 'n (m = n/3; m = 2 at n = 3)'"
    echo "set ylabel 'time per call [{/Symbol m}s], median and min-max'"
    echo "set key below box font ',9' spacing 0.9"
    echo "set bmargin 17"
    if [[ -n $left ]]; then
        echo "set title 'T4: load + formulation; black = bordered dgesv baseline; squares = dgemm (n x n)'"
        echo "plot $left"
    fi
    if [[ -n $right ]]; then
        echo "set title 'mbs layer on the scalable model; black = one bordered dgesv KKT solve'"
        echo "plot $right"
    fi
    echo "unset multiplot"
} >"$tmp/plot.gp"

gnuplot "$tmp/plot.gp"
echo "wrote $out"
