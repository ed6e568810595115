#!/bin/sh
# The API conventions of docs/api.md, checked on the headers where a
# script can:
#  - every function of include/cdyn/<module>.h is named cdyn_<module>_...
#    (status.h: cdyn_status_string and cdyn_version*; sundials.h: the
#    cdyn_cvode_ and cdyn_ida_ adapters);
#  - get_ only copies a public struct of the same name:
#    cdyn_<m>_get_<x>(..., cdyn_<m>_<x> *...);
#  - every object with a create function answers cdyn_<object>_size;
#  - value accessors (int, long, double or const char * returned, the
#    object first) and last_ readers take a const object.
# Usage: check_api_conventions.sh SRC
src=${1:-.}
status=0
# Functions that read as queries but change the object, each with its reason.
#   cdyn_network_partition: builds the spanning tree on its first call.
#   cdyn_mbs_last_residuals: evaluates the residuals the last call did not
#     need (an rhs without stabilizer gains) from the model's callbacks.
mutating_queries="cdyn_network_partition cdyn_mbs_last_residuals"

# One line per prototype: "header|prototype" with blanks squeezed.
protos=$(for h in "$src"/include/cdyn/*.h; do
    awk -v h="$(basename "$h" .h)" '
        /^CDYN_API/ { collecting = 1; buf = "" }
        collecting { buf = buf " " $0; if (index($0, ";")) { collecting = 0; gsub(/[ \t]+/, " ", buf); print h "|" buf } }
    ' "$h"
done)
types=$(grep -ho 'typedef struct cdyn_[a-z_]* *{\{0,1\}[a-z_ ]*;\{0,1\}' "$src"/include/cdyn/*.h |
        sed -E 's/typedef struct (cdyn_[a-z_]*).*/\1/' | sort -u)
typedefs=$(grep -ho '} *cdyn_[a-z_]*;' "$src"/include/cdyn/*.h | sed -E 's/[} ;]//g' | sort -u)
all_types=$(printf '%s\n%s\n' "$types" "$typedefs" | sort -u)

checked=0
printf '%s\n' "$protos" | {
while IFS='|' read -r header proto; do
    [ -z "$proto" ] && continue
    checked=$((checked + 1))
    name=$(printf '%s' "$proto" | sed -E 's/^.* \**(cdyn_[a-z_0-9]+) ?\(.*/\1/')
    ret=$(printf '%s' "$proto" | sed -E 's/^ ?CDYN_API (.*[ *])cdyn_[a-z_0-9]+ ?\(.*/\1/; s/ +$//')
    first=$(printf '%s' "$proto" | sed -E 's/^[^(]*\(([^,)]*).*/\1/')
    case $header in
        status) prefix='cdyn_(status_|version)' ;;
        sundials) prefix='cdyn_(cvode|ida)_' ;;
        *) prefix="cdyn_${header}_" ;;
    esac
    if ! printf '%s' "$name" | grep -Eq "^$prefix"; then
        echo "$header.h: $name does not start with $prefix"
        status=1
    fi
    case $name in
        *_get_*)
            module=${name%%_get_*}
            noun=${name#*_get_}
            if ! printf '%s\n' "$all_types" | grep -qx "${module}_$noun" ||
               ! printf '%s' "$proto" | grep -q "${module}_$noun \*"; then
                echo "$header.h: $name is get_ without a public struct ${module}_$noun to fill"
                status=1
            fi ;;
    esac
    object=$(printf '%s' "$first" | sed -nE 's/^ ?(const )?(cdyn_[a-z_]+) \*.*/\2/p')
    value=0
    case $ret in
        int|long|double|"const char *") value=1 ;;
    esac
    case $name in
        *_last_*|*_get_*) value=1 ;;
    esac
    case " $mutating_queries " in
        *" $name "*) value=0 ;;
    esac
    if [ $value -eq 1 ] && [ -n "$object" ] && printf '%s\n' "$all_types" | grep -qx "$object" &&
       ! printf '%s' "$first" | grep -q '^ *const '; then
        echo "$header.h: $name reads $object but takes it without const"
        status=1
    fi
done
# objects with a create function answer _size
for create in $(printf '%s\n' "$protos" | grep -o 'cdyn_[a-z_]*_create' | sort -u); do
    object=${create%_create}
    if ! printf '%s\n' "$protos" | grep -q "int ${object}_size(const ${object} \*"; then
        echo "$object has no int ${object}_size(const $object *)"
        status=1
    fi
done
[ $status -eq 0 ] && echo "the $checked CDYN_API prototypes follow the naming, size and const conventions"
exit $status
}
