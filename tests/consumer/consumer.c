/* Smallest useful program against an installed cdyn: one junction, three
 * flows, unit inertances and forces F = (1, 2, 0). By hand (THEORY T1.5):
 * with W = [-1 -1 1], M = I, v' = F + W^T lambda and W v' = 0 give
 * -(1 - lambda) - (2 - lambda) + lambda = 0, so lambda = 1 and
 * v' = (0, 1, 1). */
#include <cdyn.h>

#include <math.h>
#include <stdio.h>

int main(void)
{
    const double W[3] = {-1.0, -1.0, 1.0}, M[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const double F[3] = {1.0, 2.0, 0.0}, expect[3] = {0.0, 1.0, 1.0};
    double vdot[3], lambda;
    cdyn_status st;
    cdyn_nullspace *ns = cdyn_nullspace_create(3, 1, &st);
    if (!ns || cdyn_nullspace_factor(ns, W, 1) != CDYN_OK ||
        cdyn_nullspace_solve(ns, M, 3, F, NULL, vdot, &lambda) != CDYN_OK) {
        fprintf(stderr, "consumer: cdyn call failed\n");
        return 1;
    }
    cdyn_nullspace_free(ns);
    double err = fabs(lambda - 1.0);
    for (int i = 0; i < 3; ++i) err = fmax(err, fabs(vdot[i] - expect[i]));
    printf("cdyn %s: lambda = %g, v' = (%g, %g, %g), error %.1e\n", cdyn_version(), lambda,
           vdot[0], vdot[1], vdot[2], err);
    if (cdyn_version_number() != CDYN_VERSION_NUMBER) { /* the header against the library */
        fprintf(stderr, "consumer: compiled against %d, linked %d\n", CDYN_VERSION_NUMBER,
                cdyn_version_number());
        return 1;
    }
    return err < 1e-14 ? 0 : 1;
}
