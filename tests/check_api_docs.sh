#!/bin/sh
# The docs cannot drift from the headers:
#  - every function declared CDYN_API in include/cdyn/*.h is named in
#    docs/api.md, and every public struct and opaque object type in
#    docs/abi.md;
#  - every call written in docs/api.md as `cdyn_name(a, b, &c)` has the
#    header's parameters, by name and in order (& marks an output), so a
#    signature that changes in a header fails until the docs follow.
# Prototypes start a line with CDYN_API and end at the first ';'.
# Usage: check_api_docs.sh SRC
src=${1:-.}
status=0
functions=$(grep -ho 'CDYN_API[^(]*(' "$src"/include/cdyn/*.h |
            sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | grep '^cdyn_' | sort -u)
for f in $functions; do
    if ! grep -q "\`$f[(\`]" "$src/docs/api.md"; then
        echo "docs/api.md does not name $f"
        status=1
    fi
done
types=$(grep -ho 'typedef struct cdyn_[a-z_]*' "$src"/include/cdyn/*.h |
        sed 's/typedef struct //' | sort -u)
for t in $types; do
    if ! grep -q "\`$t\`" "$src/docs/abi.md"; then
        echo "docs/abi.md does not name $t"
        status=1
    fi
done

# name(param,param,...) for every prototype: the parameter names in order
protos=$(awk '
    /^CDYN_API/ { collecting = 1; buf = "" }
    collecting { buf = buf " " $0; if (index($0, ";")) { collecting = 0; print buf } }
' "$src"/include/cdyn/*.h | awk '{
    if (!match($0, /cdyn_[a-z_0-9]+[ \t]*\(/)) next
    name = substr($0, RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
    rest = substr($0, RSTART + RLENGTH); sub(/\).*/, "", rest)
    n = split(rest, part, ","); out = ""
    for (i = 1; i <= n; i++) {
        p = part[i]; gsub(/\[[^]]*\]/, "", p); gsub(/[ \t]+$/, "", p)
        if (p ~ /^[ \t]*(void)?$/) continue
        match(p, /[A-Za-z_0-9]+$/)
        out = out (out == "" ? "" : ",") substr(p, RSTART, RLENGTH)
    }
    print name "(" out ")"
}')
calls=$(grep -o '`cdyn_[a-z_0-9]*([^`]*)`' "$src/docs/api.md" | tr -d '`& ' | sort -u)
checked=0
for c in $calls; do
    name=${c%%(*}
    want=$(printf '%s\n' "$protos" | grep "^$name(" | head -n 1)
    checked=$((checked + 1))
    if [ -z "$want" ]; then
        echo "docs/api.md writes $c, but no header declares $name"
        status=1
    elif [ "$c" != "$want" ]; then
        echo "docs/api.md writes $c, the header declares $want"
        status=1
    fi
done
[ $status -eq 0 ] && echo "api.md names all $(echo "$functions" | wc -w) CDYN_API functions" \
    "and matches the headers' parameters in all $checked calls it writes;" \
    "abi.md names all $(echo "$types" | wc -w) public types"
exit $status
