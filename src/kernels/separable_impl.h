/* kernels/separable_impl.h - the separable correlation engine, written once for an
 * accumulation type FP_T and included by separable.c for double and for float (names through
 * FP_NAME, row loops through FP_LOOP).  See separable.c for the method. */

typedef struct {
    int ready;
    FP_T *cache[FP_MAXDIM]; /* level d: ntaps[d] slots of slot_len[d] FP_Ts */
    ptrdiff_t *tags[FP_MAXDIM];
    unsigned char *fin[FP_MAXDIM];  /* running levels: slot holds only finite values */
    ptrdiff_t *slot_of[FP_MAXDIM];  /* running levels: input index -> slot, or -1 */
    ptrdiff_t *last_use[FP_MAXDIM]; /* running levels: last extended index a slot served */
    FP_T *top;                      /* level-0 result for one output index: slot_len[0] FP_Ts */
    FP_T *ext;                      /* a gathered row */
    FP_T *row;                      /* a row result (rank 1) */
    ptrdiff_t lo[FP_MAXDIM], hi[FP_MAXDIM];
} FP_NAME(fp_sep_scratch);

typedef struct {
    fp_conv *c;
    ptrdiff_t chunk0, nchunks0, tile1, ntiles1;
    ptrdiff_t slot_len[FP_MAXDIM]; /* max FP_Ts of a level d+1 result */
    FP_T cconst[FP_MAXDIM + 1];    /* value of level-d result on an all-cval slice */
    FP_T *fac[FP_MAXDIM];          /* the factors in FP_T */
    int run[FP_MAXDIM];            /* axis d is a long box: running sums (see fp_sep_level_run) */
    ptrdiff_t maxk;
    int nworkers;
    FP_NAME(fp_sep_scratch) * scratch;
} FP_NAME(fp_sep_job);

/* Frees one worker's scratch.  Returns nothing. */
static void
FP_NAME(fp_sep_free)(FP_NAME(fp_sep_scratch) * s, int ndim)
{
    for (int d = 0; d < ndim; d++) {
        free(s->cache[d]);
        free(s->tags[d]);
        free(s->fin[d]);
        free(s->slot_of[d]);
        free(s->last_use[d]);
    }
    free(s->top);
    free(s->ext);
    free(s->row);
    memset(s, 0, sizeof(*s));
}

/* Allocates one worker's scratch.  Returns 0, or -1 when out of memory. */
static int
FP_NAME(fp_sep_alloc)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t rowlen = R == 1 ? job->tile1 : c->shape[R - 1];
    for (int d = 0; d + 1 < R; d++) {
        ptrdiff_t nslots = c->ntaps[d] + 1; /* running levels keep the slot that leaves too */
        s->cache[d] = (FP_T *)malloc(sizeof(FP_T) * (size_t)(nslots * job->slot_len[d]));
        s->tags[d] = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)nslots);
        s->fin[d] = (unsigned char *)malloc((size_t)nslots);
        s->slot_of[d] = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)c->shape[d]);
        s->last_use[d] = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)nslots);
        if (s->cache[d] == NULL || s->tags[d] == NULL || s->fin[d] == NULL ||
            s->slot_of[d] == NULL || s->last_use[d] == NULL)
            goto error;
        for (ptrdiff_t j = 0; j < c->shape[d]; j++)
            s->slot_of[d][j] = -1;
    }
    s->top = (FP_T *)malloc(sizeof(FP_T) * (size_t)(R > 1 ? job->slot_len[0] : 1));
    s->ext = (FP_T *)malloc(sizeof(FP_T) * (size_t)(rowlen + c->ntaps[R - 1]));
    s->row = (FP_T *)malloc(sizeof(FP_T) * (size_t)(rowlen + 1));
    if (s->top == NULL || s->ext == NULL || s->row == NULL)
        goto error;
    s->ready = 1;
    return 0;
error:
    FP_NAME(fp_sep_free)(s, R);
    return -1;
}

/* Whether all n values are finite.  Returns 1 or 0. */
static int
FP_NAME(fp_sep_finite)(const FP_T *v, ptrdiff_t n)
{
    int bad = 0;
    for (ptrdiff_t i = 0; i < n; i++)
        bad |= !(v[i] - v[i] == 0);
    return !bad;
}

/* The last axis: res[x] = sum_k f[k] * in[prefix, map(lo + x + k)].  Returns nothing. */
static void
FP_NAME(fp_sep_row)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s, ptrdiff_t ioff,
                    FP_T *res)
{
    fp_conv *c = job->c;
    int last = c->ndim - 1;
    ptrdiff_t lo = s->lo[last], n = s->hi[last] - s->lo[last];
    ptrdiff_t K = c->ntaps[last];
    const FP_T *f = job->fac[last];
    ptrdiff_t off[64];
    FP_T w[64];
    int nk = 0, first = 1;
    FP_LOOP(fp_conv_gather_row)(c, ioff, lo, n + K - 1, s->ext);
    if (job->run[last] && FP_NAME(fp_sep_finite)(s->ext, n + K - 1)) {
        /* a long box over finite values: running sum, restarted every FP_RUN_RESTART */
        const FP_T *e = s->ext;
        double sum = 0.0;
        for (ptrdiff_t x = 0; x < n; x++) {
            if (x % FP_RUN_RESTART == 0) {
                sum = 0.0;
                for (ptrdiff_t k = 0; k < K; k++)
                    sum += (double)e[x + k];
            } else {
                sum += (double)e[x + K - 1] - (double)e[x - 1];
            }
            res[x] = (FP_T)(sum * (double)f[0]);
        }
        return;
    }
    for (ptrdiff_t k = 0; k < K; k++) {
        if (f[k] == 0.0)
            continue;
        off[nk] = k;
        w[nk++] = f[k];
        if (nk == 64) {
            FP_LOOP(fp_conv_taps)(res, s->ext, w, off, nk, n, !first);
            first = 0;
            nk = 0;
        }
    }
    if (nk > 0 || first)
        FP_LOOP(fp_conv_taps)(res, s->ext, w, off, nk, n, !first);
}

/* Writes the level-0 result of output index i0 (layout: the tile's axes 1.. in C order) to the
 * output array.  Returns nothing. */
static void
FP_NAME(fp_sep_store)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s, ptrdiff_t i0,
                      const FP_T *src)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t idx[FP_MAXDIM];
    ptrdiff_t rowlen = s->hi[R - 1] - s->lo[R - 1];
    ptrdiff_t nrows = 1;
    for (int d = 1; d + 1 < R; d++)
        nrows *= s->hi[d] - s->lo[d];
    for (int d = 1; d + 1 < R; d++)
        idx[d] = s->lo[d];
    for (ptrdiff_t r = 0; r < nrows; r++) {
        ptrdiff_t ooff = i0 * c->ostride[0] + s->lo[R - 1] * c->ostride[R - 1];
        for (int d = 1; d + 1 < R; d++)
            ooff += idx[d] * c->ostride[d];
        FP_LOOP(fp_conv_store_row)(c, ooff, rowlen, src + r * rowlen);
        for (int d = R - 2; d >= 1; d--) {
            if (++idx[d] < s->hi[d])
                break;
            idx[d] = s->lo[d];
        }
    }
}

/* Level 0 with every tap in one batch: output index i0 = sum_q w[q] * src[q] + add, combined
 * one output row at a time straight into the output where its rows are contiguous and of type
 * FP_T, else into a small buffer that is stored at once.  Returns nothing. */
static void
FP_NAME(fp_sep_top)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s, ptrdiff_t i0,
                    const FP_T *const *src, const FP_T *w, int nk, FP_T add)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t idx[FP_MAXDIM];
    ptrdiff_t rowlen = s->hi[R - 1] - s->lo[R - 1];
    ptrdiff_t nrows = 1;
    const FP_T *rsrc[64];
    /* the output's rows hold FP_Ts side by side: the sums need no second pass to be stored */
    const int direct = c->ostride[R - 1] == (ptrdiff_t)sizeof(FP_T) &&
                       (sizeof(FP_T) == sizeof(double) ? c->odouble : !c->odouble);
    for (int d = 1; d + 1 < R; d++) {
        nrows *= s->hi[d] - s->lo[d];
        idx[d] = s->lo[d];
    }
    for (ptrdiff_t r = 0; r < nrows; r++) {
        ptrdiff_t ooff = i0 * c->ostride[0] + s->lo[R - 1] * c->ostride[R - 1];
        for (int d = 1; d + 1 < R; d++)
            ooff += idx[d] * c->ostride[d];
        for (int q = 0; q < nk; q++)
            rsrc[q] = src[q] + r * rowlen;
        if (direct) {
            FP_LOOP(fp_conv_combine)((FP_T *)(c->odata + ooff), rsrc, w, nk, add, rowlen, 0);
        } else {
            FP_LOOP(fp_conv_combine)(s->row, rsrc, w, nk, add, rowlen, 0);
            FP_LOOP(fp_conv_store_row)(c, ooff, rowlen, s->row);
        }
        for (int d = R - 2; d >= 1; d--) {
            if (++idx[d] < s->hi[d])
                break;
            idx[d] = s->lo[d];
        }
    }
}

/* Level d < ndim-1 of a long box (all factors equal, more than FP_RUN_MIN taps): as
 * fp_sep_level, but while the window holds only finite values each result is the previous one
 * plus the slice that enters minus the slice that leaves (restarted with a direct sum every
 * FP_RUN_RESTART outputs), so the cost does not grow with the box.  Returns nothing. */
static void FP_NAME(fp_sep_level)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s, int d,
                                  ptrdiff_t ioff, FP_T *res);

static void
FP_NAME(fp_sep_level_run)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s, int d,
                          ptrdiff_t ioff, FP_T *res)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t K = c->ntaps[d], nslots = K + 1;
    const FP_T w = job->fac[d][0];
    const ptrdiff_t *m = c->map[d];
    ptrdiff_t S = 1;
    FP_T *cache = s->cache[d];
    ptrdiff_t *tags = s->tags[d];
    unsigned char *fin = s->fin[d];
    const FP_T cc = job->cconst[d + 1];
    const int cc_ok = cc - cc == 0;
    int prev_ok = 0;
    ptrdiff_t since = 0;
    FP_T *prev = NULL;
    for (int e = d + 1; e < R; e++)
        S *= s->hi[e] - s->lo[e];
    ptrdiff_t *slot_of = s->slot_of[d], *last_use = s->last_use[d];
    for (ptrdiff_t t = 0; t < nslots; t++) {
        tags[t] = -2;
        last_use[t] = PTRDIFF_MIN;
    }
    for (ptrdiff_t i = s->lo[d]; i < s->hi[d]; i++) {
        FP_T *dst = d == 0 ? s->top : res + (i - s->lo[d]) * S;
        ptrdiff_t first_e = i > s->lo[d] ? i - 1 : i; /* window of i, and the tap that left */
        int ok = 1;
        const FP_T *pnew = NULL, *pold = NULL;
        /* bring every slice of [first_e, i + K) into a slot: O(1) lookups, and a victim is a
         * slot no extended index of this window has used */
        for (ptrdiff_t e = first_e; e < i + K; e++) {
            ptrdiff_t j = m[e], slot;
            if (j < 0) {
                if (e >= i && !cc_ok)
                    ok = 0;
                continue;
            }
            slot = slot_of[j];
            if (slot < 0) {
                for (ptrdiff_t t = 0; t < nslots; t++)
                    if (last_use[t] < first_e) {
                        slot = t;
                        break;
                    }
                if (tags[slot] >= 0)
                    slot_of[tags[slot]] = -1;
                if (d + 2 == R)
                    FP_NAME(fp_sep_row)(job, s, ioff + j * c->istride[d], cache + slot * S);
                else
                    FP_NAME(fp_sep_level)
                (job, s, d + 1, ioff + j * c->istride[d], cache + slot * S);
                tags[slot] = j;
                slot_of[j] = slot;
                fin[slot] = (unsigned char)FP_NAME(fp_sep_finite)(cache + slot * S, S);
            }
            last_use[slot] = e;
            if (e >= i && !fin[slot])
                ok = 0;
            if (e == i + K - 1)
                pnew = cache + slot * S;
            if (e == i - 1 && e == first_e)
                pold = cache + slot * S;
        }
        if (i > s->lo[d] && prev_ok && ok && since < FP_RUN_RESTART) {
            /* dst = prev + w * (entering - leaving); constant-mode slices are cc */
            for (ptrdiff_t p = 0; p < S; p++) {
                double in_v = pnew != NULL ? (double)pnew[p] : (double)cc;
                double out_v = pold != NULL ? (double)pold[p] : (double)cc;
                dst[p] = (FP_T)((double)prev[p] + (double)w * (in_v - out_v));
            }
            since++;
        } else {
            /* direct sum of the window, in batches of 64 slices */
            const FP_T *src[64];
            FP_T ww[64];
            double add = 0.0;
            int nk = 0, first = 1;
            for (ptrdiff_t e = i; e < i + K; e++) {
                ptrdiff_t j = m[e];
                if (j < 0) {
                    add += (double)w * (double)cc;
                    continue;
                }
                src[nk] = cache + slot_of[j] * S;
                ww[nk++] = w;
                if (nk == 64) {
                    FP_LOOP(fp_conv_combine)(dst, src, ww, nk, (FP_T)0, S, !first);
                    first = 0;
                    nk = 0;
                }
            }
            if (nk > 0 || first)
                FP_LOOP(fp_conv_combine)(dst, src, ww, nk, (FP_T)0, S, !first);
            if (add != 0.0 || add != add)
                for (ptrdiff_t p = 0; p < S; p++)
                    dst[p] += (FP_T)add;
            since = 0;
        }
        prev = dst;
        prev_ok = ok;
        if (d == 0)
            FP_NAME(fp_sep_store)(job, s, i, dst);
    }
    for (ptrdiff_t t = 0; t < nslots; t++)
        if (tags[t] >= 0)
            slot_of[tags[t]] = -1;
}

/* Level d < ndim-1 for the input prefix at byte offset ioff: res[(i - lo) * S + p] for i in
 * [lo[d], hi[d]).  At d == 0 (res == NULL) each result goes to the output.  Returns nothing. */
static void
FP_NAME(fp_sep_level)(FP_NAME(fp_sep_job) * job, FP_NAME(fp_sep_scratch) * s, int d, ptrdiff_t ioff,
                      FP_T *res)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t K = c->ntaps[d];
    const FP_T *f = job->fac[d];
    const ptrdiff_t *m = c->map[d];
    ptrdiff_t S = 1;
    FP_T *cache = s->cache[d];
    ptrdiff_t *tags = s->tags[d];
    ptrdiff_t need[64];
    FP_T w[64];
    const FP_T *src[65];
    if (job->run[d]) {
        FP_NAME(fp_sep_level_run)(job, s, d, ioff, res);
        return;
    }
    for (int e = d + 1; e < R; e++)
        S *= s->hi[e] - s->lo[e];
    for (ptrdiff_t k = 0; k < K; k++)
        tags[k] = -2;
    for (ptrdiff_t i = s->lo[d]; i < s->hi[d]; i++) {
        FP_T add = 0.0;
        int nk = 0;
        int first = 1;
        FP_T *dst = d == 0 ? s->top : res + (i - s->lo[d]) * S;
        ptrdiff_t kstart = 0;
        while (kstart < K) {
            /* a batch of at most 64 taps (every tap when K <= 64) */
            ptrdiff_t kend = kstart + 64 < K ? kstart + 64 : K;
            nk = 0;
            for (ptrdiff_t k = kstart; k < kend; k++) {
                ptrdiff_t j;
                if (f[k] == 0.0)
                    continue;
                j = m[i + k];
                if (j < 0) {
                    add += f[k] * job->cconst[d + 1];
                    continue;
                }
                need[nk] = j;
                w[nk++] = f[k];
            }
            for (int q = 0; q < nk; q++) {
                ptrdiff_t slot = -1;
                for (ptrdiff_t t = 0; t < K; t++)
                    if (tags[t] == need[q]) {
                        slot = t;
                        break;
                    }
                if (slot < 0) {
                    /* evict a slot this batch does not read */
                    for (ptrdiff_t t = 0; t < K && slot < 0; t++) {
                        int used = 0;
                        for (int r = 0; r < nk; r++)
                            if (tags[t] == need[r]) {
                                used = 1;
                                break;
                            }
                        if (!used)
                            slot = t;
                    }
                    if (d + 2 == R)
                        FP_NAME(fp_sep_row)
                    (job, s, ioff + need[q] * c->istride[d], cache + slot * S);
                    else FP_NAME(fp_sep_level)(job, s, d + 1, ioff + need[q] * c->istride[d],
                                               cache + slot * S);
                    tags[slot] = need[q];
                }
                src[q] = cache + slot * S;
            }
            if (d == 0 && K <= 64) {
                /* row by row into a small buffer that goes straight to the output */
                FP_NAME(fp_sep_top)(job, s, i, src, w, nk, add);
                break;
            }
            if (first || nk > 0)
                FP_LOOP(fp_conv_combine)(dst, src, w, nk, 0.0, S, !first);
            first = 0;
            kstart = kend;
        }
        if (d == 0 && K <= 64)
            continue;
        if (add != 0.0 || add != add)
            for (ptrdiff_t p = 0; p < S; p++)
                dst[p] += add;
        if (d == 0)
            FP_NAME(fp_sep_store)(job, s, i, dst);
    }
}

/* Pool callback: one (axis-0 chunk, axis-1 tile) item.  Returns 0, or -1 when out of memory. */
static int
FP_NAME(fp_sep_item)(void *ctx, ptrdiff_t item, int worker)
{
    FP_NAME(fp_sep_job) *job = (FP_NAME(fp_sep_job) *)ctx;
    fp_conv *c = job->c;
    FP_NAME(fp_sep_scratch) *s = &job->scratch[worker];
    int R = c->ndim;
    ptrdiff_t a = item / job->ntiles1, b = item % job->ntiles1;
    if (!s->ready && FP_NAME(fp_sep_alloc)(job, s) < 0)
        return -1;
    for (int d = 0; d < R; d++) {
        s->lo[d] = 0;
        s->hi[d] = c->shape[d];
    }
    if (R == 1) {
        s->lo[0] = b * job->tile1;
        s->hi[0] = s->lo[0] + job->tile1 < c->shape[0] ? s->lo[0] + job->tile1 : c->shape[0];
        FP_NAME(fp_sep_row)(job, s, 0, s->row);
        FP_LOOP(fp_conv_store_row)(c, s->lo[0] * c->ostride[0], s->hi[0] - s->lo[0], s->row);
        return 0;
    }
    s->lo[0] = a * job->chunk0;
    s->hi[0] = s->lo[0] + job->chunk0 < c->shape[0] ? s->lo[0] + job->chunk0 : c->shape[0];
    s->lo[1] = b * job->tile1;
    s->hi[1] = s->lo[1] + job->tile1 < c->shape[1] ? s->lo[1] + job->tile1 : c->shape[1];
    FP_NAME(fp_sep_level)(job, s, 0, 0, NULL);
    return 0;
}

/* fp_conv_separable accumulating in FP_T.  Returns 0, or -1 when out of memory. */
static int
FP_NAME(fp_conv_separable_t)(fp_conv *c)
{
    FP_NAME(fp_sep_job) job;
    int R = c->ndim, result = -1;
    ptrdiff_t inner = 1; /* elements of axes >= 2 */
    memset(&job, 0, sizeof(job));
    job.c = c;
    for (int d = 2; d < R; d++)
        inner *= c->shape[d];
    {
        double cc = c->cval;
        job.cconst[R] = (FP_T)cc;
        for (int d = R - 1; d >= 0; d--) {
            double sum = 0.0;
            for (ptrdiff_t k = 0; k < c->ntaps[d]; k++)
                sum += c->factors[d][k];
            cc *= sum;
            job.cconst[d] = (FP_T)cc;
        }
    }
    for (int d = 0; d < R; d++) {
        job.fac[d] = (FP_T *)malloc(sizeof(FP_T) * (size_t)c->ntaps[d]);
        if (job.fac[d] == NULL)
            goto done;
        for (ptrdiff_t k = 0; k < c->ntaps[d]; k++)
            job.fac[d][k] = (FP_T)c->factors[d][k];
        /* long boxes run as running sums, in double only */
        job.run[d] =
            sizeof(FP_T) == sizeof(double) && c->ntaps[d] > FP_RUN_MIN && c->factors[d][0] != 0.0;
        for (ptrdiff_t k = 1; k < c->ntaps[d] && job.run[d]; k++)
            if (c->factors[d][k] != c->factors[d][0])
                job.run[d] = 0;
    }
    if (R == 1) {
        job.tile1 = 1 << 14;
        job.ntiles1 = (c->shape[0] + job.tile1 - 1) / job.tile1;
        job.chunk0 = 1;
        job.nchunks0 = 1;
    } else {
        ptrdiff_t per_row = inner * (ptrdiff_t)sizeof(FP_T) * c->ntaps[0];
        ptrdiff_t t1 = FP_SEP_CACHE_BYTES / (per_row > 0 ? per_row : 1);
        ptrdiff_t want, n0 = c->shape[0];
        if (t1 < 4 * c->ntaps[1])
            t1 = 4 * c->ntaps[1];
        if (t1 > c->shape[1])
            t1 = c->shape[1];
        if (t1 < 1)
            t1 = 1;
        job.tile1 = t1;
        job.ntiles1 = (c->shape[1] + t1 - 1) / t1;
        want = 16 * (ptrdiff_t)c->nthreads;
        job.nchunks0 = 1;
        if (job.ntiles1 < want) {
            ptrdiff_t min_chunk = 8 * c->ntaps[0];
            job.nchunks0 = (want + job.ntiles1 - 1) / job.ntiles1;
            if (n0 / job.nchunks0 < min_chunk)
                job.nchunks0 = n0 / min_chunk > 0 ? n0 / min_chunk : 1;
        }
        if (job.nchunks0 * job.ntiles1 < (ptrdiff_t)c->nthreads &&
            n0 >= 2 * c->ntaps[0] * (ptrdiff_t)c->nthreads) {
            /* long kernels: one item per thread anyway while the halo stays under half of
             * a chunk (it costs less than a core left idle) */
            job.nchunks0 = ((ptrdiff_t)c->nthreads + job.ntiles1 - 1) / job.ntiles1;
            if (job.nchunks0 > n0)
                job.nchunks0 = n0;
        }
        job.chunk0 = (n0 + job.nchunks0 - 1) / job.nchunks0;
        job.nchunks0 = (n0 + job.chunk0 - 1) / job.chunk0;
        for (int d = 0; d + 1 < R; d++) {
            ptrdiff_t S = 1;
            for (int e = d + 1; e < R; e++)
                S *= (e == 1 ? t1 : c->shape[e]);
            job.slot_len[d] = S;
        }
    }
    job.nworkers = c->nthreads;
    job.scratch =
        (FP_NAME(fp_sep_scratch) *)calloc((size_t)job.nworkers, sizeof(FP_NAME(fp_sep_scratch)));
    if (job.scratch == NULL)
        goto done;
    result = fp_pool_run(job.nchunks0 * job.ntiles1, c->nthreads, FP_NAME(fp_sep_item), &job);
done:
    if (job.scratch != NULL) {
        for (int w = 0; w < job.nworkers; w++)
            FP_NAME(fp_sep_free)(&job.scratch[w], R);
        free(job.scratch);
    }
    for (int d = 0; d < R; d++)
        free(job.fac[d]);
    return result;
}
