/* Sparse networks: the spanning-tree partition (THEORY T1.6) and the
 * completion of a state from its loop flows (T1.6, T1.7). The tree comes
 * from W's pattern alone: junctions are reached breadth first from the
 * ambient (pipes with one entry), and the pipe by which a junction is first
 * reached is its tree pipe. Ordered from the leaves up, the tree block W2
 * of W is triangular. */
#include "network_internal.h"

#include <math.h>
#include <string.h>

cdyn_status cdyn__net_tree(cdyn_network *net)
{
    if (net->tree == 1) return CDYN_OK;
    int n = net->n, m = net->m;
    for (int k = 0; k < n; ++k)
        if (net->colptr[k + 1] - net->colptr[k] > 2)
            return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                              "column %d of W has %d entries: not an incidence pattern, no "
                              "spanning tree", k, net->colptr[k + 1] - net->colptr[k]);
    for (int i = 0; i < m; ++i) net->tree_pipe[i] = -1;
    for (int k = 0; k < n; ++k) net->dependent[k] = 0;
    int *queue = net->tree_order, tail = 0;
    for (int k = 0; k < n; ++k) /* junctions joined to the ambient */
        if (net->colptr[k + 1] - net->colptr[k] == 1) {
            int i = net->rowind[net->colptr[k]];
            if (net->tree_pipe[i] < 0) {
                net->tree_pipe[i] = k;
                queue[tail++] = i;
            }
        }
    for (int head = 0; head < tail; ++head) {
        int i = queue[head];
        for (int q = net->rowptr[i]; q < net->rowptr[i + 1]; ++q) {
            int k = net->rowcol[q];
            if (net->colptr[k + 1] - net->colptr[k] != 2) continue;
            int p = net->colptr[k];
            int other = net->rowind[p] == i ? net->rowind[p + 1] : net->rowind[p];
            if (net->tree_pipe[other] < 0) {
                net->tree_pipe[other] = k;
                queue[tail++] = other;
            }
        }
    }
    if (tail < m) {
        int first = 0;
        while (net->tree_pipe[first] >= 0) ++first;
        net->tree = -1;
        return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                          "junction (row) %d is not connected to the ambient: no spanning tree "
                          "(%d of %d rows reached)", first, tail, m);
    }
    for (int i = 0; i < m; ++i) net->dependent[net->tree_pipe[i]] = 1;
    net->tree = 1;
    return CDYN_OK;
}

int cdyn_network_partition(cdyn_network *net, int *independent, int *dependent)
{
    if (!net) return -1;
    net->msg[0] = '\0';
    if (cdyn__net_tree(net) != CDYN_OK) return -1;
    if (dependent) memcpy(dependent, net->tree_pipe, sizeof(int) * (size_t)net->m);
    if (independent)
        for (int k = 0, c = 0; k < net->n; ++k)
            if (!net->dependent[k]) independent[c++] = k;
    return net->n - net->m;
}

/* W's value at (row i, its tree pipe). */
static double tree_entry(const cdyn_network *net, int i)
{
    int k = net->tree_pipe[i];
    for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
        if (net->rowind[p] == i) return net->Wval[p];
    return 0.0; /* not reached: the tree pipe has an entry in row i */
}

cdyn_status cdyn_network_complete(cdyn_network *net, double *v, const double *b)
{
    if (!net) return CDYN_ERR_ARG;
    net->msg[0] = '\0';
    if (!v) return cdyn__fail(net->msg, CDYN_ERR_ARG, "cdyn_network_complete: v is NULL");
    if (!net->loaded)
        return cdyn__fail(net->msg, CDYN_ERR_ARG,
                          "cdyn_network_complete: no successful cdyn_network_load");
    cdyn_status st = cdyn__net_tree(net);
    if (st != CDYN_OK) return st;
    int n = net->n, m = net->m;
    for (int k = 0; k < n; ++k)
        if (!net->dependent[k] && !isfinite(v[k]))
            return cdyn__fail(net->msg, CDYN_ERR_NONFINITE,
                              "cdyn_network_complete: v[%d] is not finite", k);
    long bad = b && m > 0 ? cdyn__first_nonfinite(m, 1, b, m) : -1;
    if (bad >= 0)
        return cdyn__fail(net->msg, CDYN_ERR_NONFINITE,
                          "cdyn_network_complete: b[%ld] is not finite", bad);
    for (int i = 0; i < m; ++i)
        if (tree_entry(net, i) == 0.0)
            return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                              "cdyn_network_complete: W(%d, %d) on the tree is 0", i,
                              net->tree_pipe[i]);
    /* leaves first: every other pipe of junction i is a loop pipe or the
     * tree pipe of a child, already known; in net->t (n), so that v stays
     * untouched if a flow overflows */
    double *u = net->t;
    memcpy(u, v, sizeof(double) * (size_t)n);
    for (int h = m - 1; h >= 0; --h) {
        int i = net->tree_order[h], e = net->tree_pipe[i];
        double sum = b ? b[i] : 0.0, diag = 0.0;
        for (int q = net->rowptr[i]; q < net->rowptr[i + 1]; ++q) {
            int k = net->rowcol[q];
            double w = net->Wval[net->rowpos[q]];
            if (k == e) diag = w;
            else sum -= w * u[k];
        }
        u[e] = sum / diag;
        if (!isfinite(u[e])) /* finite inputs, but the flow overflows */
            return cdyn__fail(net->msg, CDYN_ERR_NONFINITE,
                              "cdyn_network_complete: v[%d] overflows", e);
    }
    for (int i = 0; i < m; ++i) v[net->tree_pipe[i]] = u[net->tree_pipe[i]];
    return CDYN_OK;
}
