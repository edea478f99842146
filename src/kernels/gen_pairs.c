/* kernels/gen_pairs.c - the source list of a pair of neighbouring 3-D output rows (axis-1
 * indices y and y + 1) for the general correlation: made once per call, read by the pair loop
 * (gen_rows2.c) for every pair.
 *
 * For each block of the axis-0 taps and each of its ntaps[1] + 1 rows, the taps of the first
 * output row (axis-1 tap e) and of the second (tap e - 1) are merged by offset, so that a source
 * both read is one BOTH source.  Then a run that feeds the first row alone and a run next to it
 * that feeds the second alone are interleaved into one SPLIT run (for the 5x5x5 kernel: the
 * last axis-1 tap row of each axis-0 block with the first of the next), so that the loop always
 * has both rows' accumulators to work on.  Each row keeps its own source order, so its sums are
 * those of the one-row loop. */
#include "kernels/general.h"

#include <stdint.h>
#include <stdlib.h>

/* Appends source s of kind to the list (*n sources) and its runs (*nruns), extending the last
 * run when it is of the same kind.  Returns nothing. */
static void
fp_gen_emit(fp_gen_psrc *list, ptrdiff_t *n, fp_pair_run *runs, ptrdiff_t *nruns,
            const fp_gen_psrc *s, int kind)
{
    list[*n] = *s;
    if (*nruns > 0 && runs[*nruns - 1].kind == kind) {
        runs[*nruns - 1].count++;
    } else {
        runs[*nruns].kind = kind;
        runs[*nruns].first = *n;
        runs[*nruns].count = 1;
        (*nruns)++;
    }
    (*n)++;
}

/* Rewrites the list (n sources in nr runs) into out and oruns, interleaving each run that feeds
 * one row with the next run when that one feeds the other row: a SPLIT run of their first
 * min(count) sources each, the rest of each after it.  Returns the number of runs written. */
static ptrdiff_t
fp_gen_split(const fp_gen_psrc *list, const fp_pair_run *runs, ptrdiff_t nr, fp_gen_psrc *out,
             fp_pair_run *oruns)
{
    ptrdiff_t n = 0, no = 0;
    for (ptrdiff_t r = 0; r < nr; r++) {
        const fp_pair_run *a = &runs[r], *b = r + 1 < nr ? &runs[r + 1] : NULL;
        if (a->kind != FP_PAIR_BOTH && b != NULL && b->kind != FP_PAIR_BOTH && b->kind != a->kind) {
            const fp_pair_run *f = a->kind == FP_PAIR_FIRST ? a : b;
            const fp_pair_run *g = a->kind == FP_PAIR_FIRST ? b : a;
            ptrdiff_t m = a->count < b->count ? a->count : b->count;
            for (ptrdiff_t i = 0; i < m; i++) {
                fp_gen_emit(out, &n, oruns, &no, &list[f->first + i], FP_PAIR_SPLIT);
                fp_gen_emit(out, &n, oruns, &no, &list[g->first + i], FP_PAIR_SPLIT);
            }
            for (ptrdiff_t i = m; i < a->count; i++)
                fp_gen_emit(out, &n, oruns, &no, &list[a->first + i], a->kind);
            for (ptrdiff_t i = m; i < b->count; i++)
                fp_gen_emit(out, &n, oruns, &no, &list[b->first + i], b->kind);
            r++;
            continue;
        }
        for (ptrdiff_t i = 0; i < a->count; i++)
            fp_gen_emit(out, &n, oruns, &no, &list[a->first + i], a->kind);
    }
    return no;
}

/* See general.h. */
int
fp_gen_pairs(fp_gen_job *job)
{
    fp_conv *c = job->c;
    ptrdiff_t K0 = c->ntaps[0], K1 = c->ntaps[1], q = 0, nr = 0;
    ptrdiff_t *tap_of = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)(K0 * K1));
    size_t most = (size_t)(2 * job->nnz + 1);
    fp_gen_psrc *list = (fp_gen_psrc *)malloc(sizeof(fp_gen_psrc) * most);
    fp_pair_run *runs = (fp_pair_run *)malloc(sizeof(fp_pair_run) * most);
    int result = -1;
    job->psrc = (fp_gen_psrc *)malloc(sizeof(fp_gen_psrc) * most);
    job->runs = (fp_pair_run *)malloc(sizeof(fp_pair_run) * most);
    if (tap_of == NULL || list == NULL || runs == NULL || job->psrc == NULL || job->runs == NULL)
        goto error;
    for (ptrdiff_t t = 0; t < K0 * K1; t++)
        tap_of[t] = -1;
    for (ptrdiff_t t = 0; t < job->ntap; t++)
        tap_of[job->taps[t].k[0] * K1 + job->taps[t].k[1]] = t;
    for (ptrdiff_t k0 = 0; k0 < K0; k0++) {
        for (ptrdiff_t e = 0; e <= K1; e++) {
            const fp_gen_tap *ta =
                e < K1 && tap_of[k0 * K1 + e] >= 0 ? &job->taps[tap_of[k0 * K1 + e]] : NULL;
            const fp_gen_tap *tb =
                e >= 1 && tap_of[k0 * K1 + e - 1] >= 0 ? &job->taps[tap_of[k0 * K1 + e - 1]] : NULL;
            ptrdiff_t ia = 0, ib = 0, na = ta != NULL ? ta->nk : 0, nb = tb != NULL ? tb->nk : 0;
            while (ia < na || ib < nb) {
                ptrdiff_t oa = ia < na ? job->off[ta->first + ia] : PTRDIFF_MAX;
                ptrdiff_t ob = ib < nb ? job->off[tb->first + ib] : PTRDIFF_MAX;
                fp_gen_psrc s;
                int kind;
                s.k0 = k0;
                s.e = e;
                s.off = oa < ob ? oa : ob;
                s.w0 = 0.0;
                s.w1 = 0.0;
                if (oa == ob) {
                    kind = FP_PAIR_BOTH;
                    s.w0 = job->w[ta->first + ia++];
                    s.w1 = job->w[tb->first + ib++];
                } else if (oa < ob) {
                    kind = FP_PAIR_FIRST;
                    s.w0 = job->w[ta->first + ia++];
                } else {
                    kind = FP_PAIR_SECOND;
                    s.w1 = job->w[tb->first + ib++];
                }
                fp_gen_emit(list, &q, runs, &nr, &s, kind);
            }
        }
    }
    /* without a source the two rows share (one row of axis-1 taps), pairs save nothing */
    job->npair = 0;
    for (ptrdiff_t r = 0; r < nr; r++)
        if (runs[r].kind == FP_PAIR_BOTH)
            job->npair = q;
    job->nruns = fp_gen_split(list, runs, nr, job->psrc, job->runs);
    result = 0;
error:
    free(tap_of);
    free(list);
    free(runs);
    return result;
}
