/* Status strings and version information. */
#include <cdyn.h>

#include <check.h>

#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(every_status_has_a_distinct_message)
{
    const cdyn_status codes[] = {CDYN_OK,          CDYN_ERR_ARG,    CDYN_ERR_NONFINITE,
                                 CDYN_ERR_SINGULAR, CDYN_ERR_NOCONV, CDYN_ERR_CALLBACK,
                                 CDYN_ERR_NOMEM,    CDYN_ERR_LAPACK};
    const int count = (int)(sizeof codes / sizeof codes[0]);
    for (int i = 0; i < count; ++i) {
        const char *a = cdyn_status_string(codes[i]);
        ck_assert_ptr_nonnull(a);
        ck_assert_int_gt((int)strlen(a), 0);
        for (int j = 0; j < i; ++j) ck_assert_str_ne(a, cdyn_status_string(codes[j]));
    }
    ck_assert_str_eq(cdyn_status_string((cdyn_status)999), "unknown status code");
}
END_TEST

START_TEST(version_matches_the_header)
{
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", CDYN_VERSION_MAJOR, CDYN_VERSION_MINOR,
             CDYN_VERSION_PATCH);
    ck_assert_str_eq(cdyn_version(), expect);
    ck_assert_int_eq(cdyn_version_number(),
                     CDYN_VERSION_MAJOR * 10000 + CDYN_VERSION_MINOR * 100 + CDYN_VERSION_PATCH);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_status_has_a_distinct_message);
    tcase_add_test(tc, version_matches_the_header);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
