#!/bin/sh
# The docs cannot drift from the headers: every function declared CDYN_API
# in include/cdyn/*.h must be named in docs/api.md, and every public
# struct and opaque object type in docs/abi.md. Usage: check_api_docs.sh SRC
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
[ $status -eq 0 ] && echo "api.md names all $(echo "$functions" | wc -w) CDYN_API functions;" \
    "abi.md all $(echo "$types" | wc -w) public types"
exit $status
