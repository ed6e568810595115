#!/usr/bin/env bash
# Plot bench_network's CSV: median time per step against the problem size,
# log-log, with min-max bars. Left: grid networks against n (cdyn load +
# solve, cdyn solve with a loaded factor, the hand-written CHOLMOD step and
# its solve alone, the dense null space). Right: chains against the number
# of links N (cdyn load + solve, the hand-written CHOLMOD step, CHOLMOD with
# S formed explicitly, the dense null space). A dotted line of slope 1
# marks linear growth.
#
# usage: plot_network.sh -o OUT.png CSV
# Needs bash, awk and gnuplot (pngcairo if available, else png).
#
# Example:
#   ./build/tests/bench/bench_network --csv network.csv
#   tests/bench/plot_network.sh -o docs/figures/network.png network.csv
set -euo pipefail

out=""
while getopts "o:h" opt; do
    case $opt in
    o) out=$OPTARG ;;
    *) echo "usage: $0 -o OUT.png CSV" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$out" ] && [ $# -eq 1 ] || { echo "usage: $0 -o OUT.png CSV" >&2; exit 2; }
csv=$1
command -v gnuplot > /dev/null || { echo "gnuplot is not installed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one data file per (model, path): size-column value, median, min, max
awk -F, -v dir="$tmp" '
    /^#/ || $1 == "model" { next }
    {
        x = ($1 == "grid") ? $3 : $2   # grids against n, chains against N
        name = $1 "_" $5
        gsub(/[^A-Za-z0-9_]/, "_", name)
        print x, $6, $7, $8 > (dir "/" name ".dat")
    }' "$csv"

terminal="pngcairo size 1200,520 font ',10'"
gnuplot -e "set terminal pngcairo" > /dev/null 2>&1 || terminal="png size 1200,520"

series() { # model path title style
    local f="$tmp/$(printf '%s_%s' "$1" "$2" | sed 's/[^A-Za-z0-9_]/_/g').dat"
    [ -s "$f" ] && printf "'%s' using 1:2:3:4 with yerrorlines title '%s' %s, " "$f" "$3" "$4"
    return 0
}

grid=$(series grid "net_load+solve" "cdyn load + solve" "lw 2 lc rgb '#1f77b4'")
grid+=$(series grid "net_solve" "cdyn solve (factor loaded)" "lw 2 dt 2 lc rgb '#1f77b4'")
grid+=$(series grid "chol_factor+solve (base)" "CHOLMOD by hand: factor + solve" "lw 2 lc rgb '#d62728'")
grid+=$(series grid "chol_solve" "CHOLMOD by hand: solve" "lw 2 dt 2 lc rgb '#d62728'")
grid+=$(series grid "dense_nullspace" "dense null space (cdyn\\_nullspace)" "lw 2 lc rgb '#7f7f7f'")
chain=$(series chain "net_load+solve" "cdyn load + solve" "lw 2 lc rgb '#1f77b4'")
chain+=$(series chain "chol_factor+solve (base)" "CHOLMOD by hand: factor + solve" "lw 2 lc rgb '#d62728'")
chain+=$(series chain "chol_S+factor+solve" "CHOLMOD by hand, S formed" "lw 2 dt 3 lc rgb '#d62728'")
chain+=$(series chain "dense_nullspace" "dense null space (cdyn\\_nullspace)" "lw 2 lc rgb '#7f7f7f'")

gnuplot <<GP
set terminal $terminal
set output '$out'
set multiplot layout 1,2 title "cdyn bench\\\\_network: median time per step (min-max bars), $(sed -n 's/^# date: //p' "$csv")"
set logscale xy
set format y '10^{%L}'
set format x '10^{%L}'
set grid
set key bottom right
set ylabel 'seconds per step'
set xlabel 'pipes n (k x k grid)'
set title 'hydraulic grid networks'
plot ${grid} 1e-7*x title 'slope 1' dt 3 lc rgb '#2ca02c'
set xlabel 'links N (n = 3N, m = 2N)'
set title 'chains in absolute coordinates'
plot ${chain} 4e-7*x title 'slope 1' dt 3 lc rgb '#2ca02c'
unset multiplot
GP
echo "wrote $out"
