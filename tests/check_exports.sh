#!/bin/sh
# libcdyn.so exports exactly its API: the defined dynamic symbols are the
# functions declared CDYN_API in the core headers (include/cdyn/*.h but
# network.h and sundials.h, which belong to the optional libraries), each
# in the version node of src/cdyn.map, and nothing else (no
# internal cdyn__ helper, no libc or LAPACK symbol).
# Usage: check_exports.sh LIBCDYN_SO SRC
lib=$1
src=$2
status=0
node=$(sed -n 's/^\(CDYN_[0-9.]*\) {$/\1/p' "$src/src/cdyn.map")
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' |
           grep -vxF "$node" | sort -u)
headers=$(ls "$src"/include/cdyn/*.h | grep -v -e '/network\.h$' -e '/sparse_dae\.h$' -e '/sundials\.h$')
declared=$(grep -ho '^CDYN_API[^(]*(' $headers | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
extra=$(printf '%s\n' "$exported" | grep -vxF "$declared")
missing=$(printf '%s\n' "$declared" | grep -vxF "$exported")
if [ -n "$extra" ]; then
    echo "exported but not declared CDYN_API:"; echo "$extra"; status=1
fi
if [ -n "$missing" ]; then
    echo "declared CDYN_API but not exported:"; echo "$missing"; status=1
fi
unversioned=$(readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $8 ~ /^cdyn_/ && $8 !~ ("@@?" n "$") {print $8}' n="$node")
if [ -n "$unversioned" ]; then
    echo "not in the version node $node:"; echo "$unversioned"; status=1
fi
[ $status -eq 0 ] && echo "libcdyn exports exactly the $(echo "$declared" | wc -w) API functions, all in $node"
exit $status
