/* tu_run_suite (testutil.h): the main() of every Check suite. */
#include "testutil.h"

#include <check.h>
#include <stdlib.h>

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
