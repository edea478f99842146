/* kernels/box_fused.c - scipy's uniform_filter on float data, bit for bit, in one pass over
 * memory.
 *
 * scipy filters one axis after the other: each pass extends every line by the boundary mode,
 * sums the first window from 0.0 in double, moves it with sum += (entering - leaving), stores
 * sum / size into the output array (rounded to its dtype), and the next axis reads that.  This
 * file does exactly those operations, in that order, but streams the volume slab by slab along
 * the first filtered axis (the slab axis): that axis' running sums are carried from slab to
 * slab in a state array, and the other axes are filtered inside the slab while it sits in
 * cache, so the input is read once and the output written once.  Lines are filtered eight at
 * a time, one per vector lane, so every lane does the scalar code's operations and the bits
 * are scipy's.  The workers of one call are a gang (kernels/pool.h): each phase of a slab is
 * split among them and a barrier separates phases; two slab buffers alternate, so a worker
 * may start the next slab while another finishes this one. */
#include "common.h"
#include "kernels/conv.h"
#include "kernels/kernels_py.h"
#include "kernels/numpy_api.h"
#include "kernels/pool.h"
#include "kernels/simd.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL fp_kernels_ARRAY_API
#include <numpy/arrayobject.h>

#include <stdlib.h>
#include <string.h>

/* the helpers below take and return vectors by value; they are always inlined, so no call
 * crosses an ABI with them */
#pragma GCC diagnostic ignored "-Wpsabi"

#define FP_LANES 8
/* elements a slab holds at least (its doubles stay in L2/L3 while the other axes run) */
#define FP_SLAB_ELEMS 65536
/* vectors a group of lines spans at most, and the bytes its line buffers may take */
#define FP_GROUP 8
#define FP_GROUP_BYTES (2 << 20)

/* Eight lanes as two vectors of four doubles: one AVX register each (two SSE registers on
 * the baseline build), so the lanes stay in registers. */
typedef double fp_v4d __attribute__((vector_size(4 * sizeof(double))));
typedef float fp_v4f __attribute__((vector_size(4 * sizeof(float))));
typedef struct fp_v8 {
    fp_v4d lo, hi;
} fp_v8;

/* An array as the passes see it: its element (slab, 0, ..., 0), byte strides in the permuted
 * axis order, and its dtype. */
typedef struct fp_bview {
    char *data;
    const ptrdiff_t *stride;
    int dbl; /* float64, else float32 */
} fp_bview;

typedef struct fp_boxjob {
    int nd;
    ptrdiff_t shape[FP_MAXDIM]; /* permuted: axis 0 is the slab axis */
    ptrdiff_t size[FP_MAXDIM];
    ptrdiff_t *map[FP_MAXDIM];   /* extended index -> index on the axis, or -1 for cval */
    ptrdiff_t before[FP_MAXDIM]; /* map[d][e] == e - before[d] for e in [before, before + n) */
    ptrdiff_t istride[FP_MAXDIM], ostride[FP_MAXDIM], sstride[FP_MAXDIM];
    char *idata, *odata;
    int idbl, odbl;
    int pass0;           /* the slab axis is filtered (first) */
    int post[FP_MAXDIM]; /* the other filtered axes, in scipy's order */
    int npost;
    double cval;
    ptrdiff_t plane; /* elements of one index of the slab axis */
    ptrdiff_t slab;  /* indices of the slab axis a slab holds */
    double *buf[2];  /* two slab buffers, C order over the permuted axes */
    double *state;   /* the slab axis' running sums, one per plane element */
    fp_v8 *lines;    /* per worker: an extended line and its results, group vectors wide */
    ptrdiff_t linelen;
    int group; /* vectors a group of contiguous lanes spans (1 .. FP_GROUP) */
    fp_pool_barrier barrier;
} fp_boxjob;

FP_BODY fp_v8
fp_v8_splat(double x)
{
    fp_v8 r = {{x, x, x, x}, {x, x, x, x}};
    return r;
}

FP_BODY fp_v8
fp_v8_add(fp_v8 a, fp_v8 b)
{
    fp_v8 r = {a.lo + b.lo, a.hi + b.hi};
    return r;
}

FP_BODY fp_v8
fp_v8_sub(fp_v8 a, fp_v8 b)
{
    fp_v8 r = {a.lo - b.lo, a.hi - b.hi};
    return r;
}

FP_BODY fp_v8
fp_v8_div(fp_v8 a, fp_v8 b)
{
    fp_v8 r = {a.lo / b.lo, a.hi / b.hi};
    return r;
}

/* The element at p as a double (float64 or float32).  Returns it. */
FP_BODY double
fp_box_get(const char *p, int dbl)
{
    return dbl ? *(const double *)p : (double)*(const float *)p;
}

/* Lane i of the result, for i < n, reads the element at p + i * stride (float64 or float32);
 * the other lanes are 0.  Returns the lanes. */
FP_BODY fp_v8
fp_box_load(const char *p, ptrdiff_t stride, int dbl, int n)
{
    fp_v8 v;
    if (n == FP_LANES && dbl && stride == (ptrdiff_t)sizeof(double)) {
        memcpy(&v.lo, p, sizeof v.lo);
        memcpy(&v.hi, p + sizeof v.lo, sizeof v.hi);
    } else if (n == FP_LANES && !dbl && stride == (ptrdiff_t)sizeof(float)) {
        fp_v4f a, b;
        memcpy(&a, p, sizeof a);
        memcpy(&b, p + sizeof a, sizeof b);
        v.lo = __builtin_convertvector(a, fp_v4d);
        v.hi = __builtin_convertvector(b, fp_v4d);
    } else {
#define FP_LANE(i) (n > (i) ? fp_box_get(p + (i)*stride, dbl) : 0.0)
        v.lo = (fp_v4d){FP_LANE(0), FP_LANE(1), FP_LANE(2), FP_LANE(3)};
        v.hi = (fp_v4d){FP_LANE(4), FP_LANE(5), FP_LANE(6), FP_LANE(7)};
#undef FP_LANE
    }
    return v;
}

/* Stores lanes i < n of v at p + i * stride as float64 or float32 (rounded).  Returns
 * nothing. */
FP_BODY void
fp_box_store(char *p, ptrdiff_t stride, int dbl, int n, fp_v8 v)
{
    if (n == FP_LANES && dbl && stride == (ptrdiff_t)sizeof(double)) {
        memcpy(p, &v.lo, sizeof v.lo);
        memcpy(p + sizeof v.lo, &v.hi, sizeof v.hi);
    } else if (n == FP_LANES && !dbl && stride == (ptrdiff_t)sizeof(float)) {
        fp_v4f a = __builtin_convertvector(v.lo, fp_v4f), b = __builtin_convertvector(v.hi, fp_v4f);
        memcpy(p, &a, sizeof a);
        memcpy(p + sizeof a, &b, sizeof b);
    } else {
#define FP_PUT(i, x)                                                                               \
    do {                                                                                           \
        if (n > (i)) {                                                                             \
            if (dbl)                                                                               \
                *(double *)(p + (i)*stride) = (x);                                                 \
            else                                                                                   \
                *(float *)(p + (i)*stride) = (float)(x);                                           \
        }                                                                                          \
    } while (0)
        FP_PUT(0, v.lo[0]);
        FP_PUT(1, v.lo[1]);
        FP_PUT(2, v.lo[2]);
        FP_PUT(3, v.lo[3]);
        FP_PUT(4, v.hi[0]);
        FP_PUT(5, v.hi[1]);
        FP_PUT(6, v.hi[2]);
        FP_PUT(7, v.hi[3]);
#undef FP_PUT
    }
}

/* Four neighbouring elements at p (float64 or float32) as doubles.  Returns them. */
FP_BODY fp_v4d
fp_box_load4(const char *p, int dbl)
{
    fp_v4d v;
    if (dbl) {
        memcpy(&v, p, sizeof v);
    } else {
        fp_v4f f;
        memcpy(&f, p, sizeof f);
        v = __builtin_convertvector(f, fp_v4d);
    }
    return v;
}

/* Stores four doubles as neighbouring float64 or float32 elements at p.  Returns nothing. */
FP_BODY void
fp_box_store4(char *p, int dbl, fp_v4d v)
{
    if (dbl) {
        memcpy(p, &v, sizeof v);
    } else {
        fp_v4f f = __builtin_convertvector(v, fp_v4f);
        memcpy(p, &f, sizeof f);
    }
}

typedef long long fp_v4i __attribute__((vector_size(4 * sizeof(long long))));

/* Transposes the 4x4 block of doubles r[0..3] in place (r[i][k] <-> r[k][i]).  Returns
 * nothing. */
FP_BODY void
fp_box_transpose4(fp_v4d *r)
{
    fp_v4d a = __builtin_shuffle(r[0], r[1], (fp_v4i){0, 4, 2, 6});
    fp_v4d b = __builtin_shuffle(r[0], r[1], (fp_v4i){1, 5, 3, 7});
    fp_v4d c = __builtin_shuffle(r[2], r[3], (fp_v4i){0, 4, 2, 6});
    fp_v4d d = __builtin_shuffle(r[2], r[3], (fp_v4i){1, 5, 3, 7});
    r[0] = __builtin_shuffle(a, c, (fp_v4i){0, 1, 4, 5});
    r[1] = __builtin_shuffle(b, d, (fp_v4i){0, 1, 4, 5});
    r[2] = __builtin_shuffle(a, c, (fp_v4i){2, 3, 6, 7});
    r[3] = __builtin_shuffle(b, d, (fp_v4i){2, 3, 6, 7});
}

/* v rounded to the output's dtype and back: what the next pass reads from scipy's output
 * array.  Returns the lanes. */
FP_BODY fp_v8
fp_box_round(fp_v8 v, int dbl)
{
    if (!dbl) {
        v.lo = __builtin_convertvector(__builtin_convertvector(v.lo, fp_v4f), fp_v4d);
        v.hi = __builtin_convertvector(__builtin_convertvector(v.hi, fp_v4f), fp_v4d);
    }
    return v;
}

/* Where pass `phase` of slab t reads (src) and writes (dst): the input or the slab buffer
 * before, the slab buffer or the output after.  Returns nothing. */
static void
fp_box_views(const fp_boxjob *j, ptrdiff_t t, int phase, fp_bview *src, fp_bview *dst)
{
    int nphase = j->pass0 + j->npost;
    ptrdiff_t i0 = t * j->slab;
    fp_bview in = {j->idata + i0 * j->istride[0], j->istride, j->idbl};
    fp_bview out = {j->odata + i0 * j->ostride[0], j->ostride, j->odbl};
    fp_bview mid = {(char *)j->buf[t & 1], j->sstride, 1};
    *src = phase == 0 ? in : mid;
    *dst = phase == nphase - 1 ? out : mid;
}

/* The slab axis' pass over planes i0 .. i0+nb-1 for worker w of nw: each plane element's
 * running sum over the slab axis, carried in j->state.  Returns nothing. */
FP_BODY void
fp_box_pass0_body(fp_boxjob *j, ptrdiff_t t, int w, int nw)
{
    int nd = j->nd, last = nd - 1;
    ptrdiff_t n0 = j->shape[0], s0 = j->size[0], i0 = t * j->slab;
    ptrdiff_t nb = n0 - i0 < j->slab ? n0 - i0 : j->slab;
    ptrdiff_t rowlen = nd > 1 ? j->shape[last] : 1, rows = j->plane / rowlen;
    ptrdiff_t nchunk = rows >= nw ? 1 : (nw + rows - 1) / rows;
    ptrdiff_t chunk = ((rowlen + nchunk - 1) / nchunk + FP_LANES - 1) / FP_LANES * FP_LANES;
    ptrdiff_t units = rows * nchunk, u0 = units * w / nw, u1 = units * (w + 1) / nw;
    ptrdiff_t istep = nd > 1 ? j->istride[last] : 0;
    fp_bview src, dst;
    const fp_v8 div = fp_v8_splat((double)s0), cv = fp_v8_splat(j->cval);
    int round_mid;
    fp_box_views(j, t, 0, &src, &dst);
    round_mid = dst.data == (char *)j->buf[t & 1];
    for (ptrdiff_t u = u0; u < u1; u++) {
        ptrdiff_t r = u / nchunk, c0 = (u % nchunk) * chunk, c1 = c0 + chunk;
        ptrdiff_t ioff = 0, doff = 0, rem = r;
        if (c1 > rowlen)
            c1 = rowlen;
        for (int d = last - 1; d >= 1; d--) { /* the row's offsets: its index over axes 1..nd-2 */
            ptrdiff_t k = rem % j->shape[d];
            rem /= j->shape[d];
            ioff += k * j->istride[d];
            doff += k * dst.stride[d];
        }
        for (ptrdiff_t c = c0; c < c1; c += FP_LANES) {
            int n = c1 - c < FP_LANES ? (int)(c1 - c) : FP_LANES;
            double *st = j->state + r * rowlen + c;
            const char *ib = j->idata + ioff + c * istep;
            /* lanes past n are neither read nor stored: another row's state */
            fp_v8 acc = fp_box_load((const char *)st, sizeof(double), 1, n);
            for (ptrdiff_t b = 0; b < nb; b++) {
                ptrdiff_t i = i0 + b;
                if (i == 0) {
                    acc = fp_v8_splat(0.0);
                    for (ptrdiff_t k = 0; k < s0; k++) {
                        ptrdiff_t m = j->map[0][k];
                        acc = fp_v8_add(
                            acc,
                            m < 0 ? cv : fp_box_load(ib + m * j->istride[0], istep, j->idbl, n));
                    }
                } else {
                    ptrdiff_t mi = j->map[0][i + s0 - 1], mo = j->map[0][i - 1];
                    fp_v8 vi =
                        mi < 0 ? cv : fp_box_load(ib + mi * j->istride[0], istep, j->idbl, n);
                    fp_v8 vo =
                        mo < 0 ? cv : fp_box_load(ib + mo * j->istride[0], istep, j->idbl, n);
                    acc = fp_v8_add(acc, fp_v8_sub(vi, vo));
                }
                fp_v8 q = fp_v8_div(acc, div);
                if (round_mid)
                    q = fp_box_round(q, j->odbl);
                fp_box_store(dst.data + b * dst.stride[0] + doff +
                                 (nd > 1 ? c * dst.stride[last] : 0),
                             nd > 1 ? dst.stride[last] : 0, dst.dbl, n, q);
            }
            fp_box_store((char *)st, sizeof(double), 1, n, acc);
        }
    }
}

void fp_box_pass0(fp_boxjob *j, ptrdiff_t t, int w, int nw);
FP_DISPATCH(void, fp_box_pass0, (fp_boxjob * j, ptrdiff_t t, int w, int nw), (j, t, w, nw))

/* One pass along axis a (>= 1) of slab t for worker w of nw: lines along a in groups of up to
 * FP_LANES * j->group neighbours along axis c (one vector of FP_LANES lanes per FP_LANES of
 * them), each group extended into the worker's line buffer, then the running sums of every
 * lane.  Where the lanes are neighbours in memory a group spans j->group vectors, so each
 * line position is one long contiguous read; otherwise a group is one vector, filled and
 * written lane by lane (each lane's line is contiguous then).  Returns nothing. */
FP_BODY void
fp_box_post_body(fp_boxjob *j, ptrdiff_t t, int phase, int w, int nw)
{
    int nd = j->nd, a = j->post[phase - j->pass0], c = a == nd - 1 ? nd - 2 : nd - 1;
    ptrdiff_t i0 = t * j->slab, nb = j->shape[0] - i0 < j->slab ? j->shape[0] - i0 : j->slab;
    ptrdiff_t ext[FP_MAXDIM] = {0}, len = j->shape[a], s = j->size[a];
    ptrdiff_t groups, runs, width, others = 1, g0, g1;
    fp_v8 *line = j->lines + (ptrdiff_t)w * 2 * j->linelen * j->group;
    fp_v8 *res = line + j->linelen * j->group;
    fp_v8 acc[FP_GROUP];
    const fp_v8 div = fp_v8_splat((double)s), cv = fp_v8_splat(j->cval);
    fp_bview src, dst;
    int round_mid, vsrc, vdst, G;
    fp_box_views(j, t, phase, &src, &dst);
    round_mid = dst.data == (char *)j->buf[t & 1];
    vsrc = src.stride[c] == (ptrdiff_t)(src.dbl ? sizeof(double) : sizeof(float));
    vdst = dst.stride[c] == (ptrdiff_t)(dst.dbl ? sizeof(double) : sizeof(float));
    G = vsrc ? j->group : 1;
    width = (ptrdiff_t)FP_LANES * G;
    for (int d = 0; d < nd; d++)
        ext[d] = d == 0 ? nb : j->shape[d];
    runs = (ext[c] + width - 1) / width;
    for (int d = 0; d < nd; d++)
        if (d != a && d != c)
            others *= ext[d];
    groups = others * runs;
    g0 = groups * w / nw;
    g1 = groups * (w + 1) / nw;
    for (ptrdiff_t g = g0; g < g1; g++) {
        ptrdiff_t rem = g / runs, k0 = (g % runs) * width, soff, doff;
        ptrdiff_t nl = ext[c] - k0 < width ? ext[c] - k0 : width; /* lanes in this group */
        int nv = (int)((nl + FP_LANES - 1) / FP_LANES);
        soff = k0 * src.stride[c];
        doff = k0 * dst.stride[c];
        for (int d = nd - 1; d >= 0; d--) {
            if (d == a || d == c)
                continue;
            ptrdiff_t k = rem % ext[d];
            rem /= ext[d];
            soff += k * src.stride[d];
            doff += k * dst.stride[d];
        }
        if (vsrc) {
            for (ptrdiff_t e = 0; e < len + s - 1; e++) {
                ptrdiff_t m = j->map[a][e];
                const char *sp = src.data + soff + m * src.stride[a];
                for (int v = 0; v < nv; v++) {
                    int n = nl - v * FP_LANES < FP_LANES ? (int)(nl - v * FP_LANES) : FP_LANES;
                    line[e * G + v] = m < 0 ? cv
                                            : fp_box_load(sp + v * FP_LANES * src.stride[c],
                                                          src.stride[c], src.dbl, n);
                }
            }
        } else { /* lane by lane: each lane's line is read in its own order */
            double *ld = (double *)line;
            ptrdiff_t in0 = 0, in1 = 0; /* the interior [in0, in1): 4x4 blocks, transposed */
            if (nl == FP_LANES &&
                src.stride[a] == (ptrdiff_t)(src.dbl ? sizeof(double) : sizeof(float))) {
                in0 = j->before[a];
                in1 = in0 + len / 4 * 4;
                for (ptrdiff_t e = in0; e < in1; e += 4) {
                    const char *sp = src.data + soff + (e - in0) * src.stride[a];
                    fp_v4d r[FP_LANES];
                    for (int l = 0; l < FP_LANES; l++)
                        r[l] = fp_box_load4(sp + l * src.stride[c], src.dbl);
                    fp_box_transpose4(r);
                    fp_box_transpose4(r + 4);
                    for (int i = 0; i < 4; i++) {
                        line[e + i].lo = r[i];
                        line[e + i].hi = r[4 + i];
                    }
                }
            }
            for (ptrdiff_t l = 0; l < FP_LANES; l++) {
                const char *sp = src.data + soff + l * src.stride[c];
                for (ptrdiff_t e = 0; e < len + s - 1; e++) {
                    if (e == in0 && in1 > in0)
                        e = in1;
                    if (e >= len + s - 1)
                        break;
                    ptrdiff_t m = j->map[a][e];
                    ld[e * FP_LANES + l] = l >= nl ? 0.0
                                           : m < 0 ? j->cval
                                                   : fp_box_get(sp + m * src.stride[a], src.dbl);
                }
            }
        }
        for (int v = 0; v < nv; v++) {
            acc[v] = fp_v8_splat(0.0);
            for (ptrdiff_t k = 0; k < s; k++)
                acc[v] = fp_v8_add(acc[v], line[k * G + v]);
        }
        for (ptrdiff_t k = 0; k < len; k++) {
            for (int v = 0; v < nv; v++) {
                int n = nl - v * FP_LANES < FP_LANES ? (int)(nl - v * FP_LANES) : FP_LANES;
                if (k > 0)
                    acc[v] = fp_v8_add(acc[v],
                                       fp_v8_sub(line[(k + s - 1) * G + v], line[(k - 1) * G + v]));
                fp_v8 q = fp_v8_div(acc[v], div);
                if (round_mid)
                    q = fp_box_round(q, j->odbl);
                if (vdst)
                    fp_box_store(dst.data + doff + k * dst.stride[a] + v * FP_LANES * dst.stride[c],
                                 dst.stride[c], dst.dbl, n, q);
                else
                    res[k * G + v] = q;
            }
        }
        if (!vdst) { /* lane by lane, each lane's line written in its own order */
            const double *rd = (const double *)res;
            ptrdiff_t k1 = 0; /* outputs [0, k1) go out as transposed 4x4 blocks */
            if (G == 1 && nl == FP_LANES &&
                dst.stride[a] == (ptrdiff_t)(dst.dbl ? sizeof(double) : sizeof(float))) {
                k1 = len / 4 * 4;
                for (ptrdiff_t k = 0; k < k1; k += 4) {
                    fp_v4d r[FP_LANES];
                    for (int i = 0; i < 4; i++) {
                        r[i] = res[k + i].lo;
                        r[4 + i] = res[k + i].hi;
                    }
                    fp_box_transpose4(r);
                    fp_box_transpose4(r + 4);
                    for (int l = 0; l < FP_LANES; l++)
                        fp_box_store4(dst.data + doff + l * dst.stride[c] + k * dst.stride[a],
                                      dst.dbl, r[l]);
                }
            }
            for (ptrdiff_t l = 0; l < nl; l++) {
                char *dp = dst.data + doff + l * dst.stride[c];
                if (dst.dbl)
                    for (ptrdiff_t k = k1; k < len; k++)
                        *(double *)(dp + k * dst.stride[a]) = rd[k * width + l];
                else
                    for (ptrdiff_t k = k1; k < len; k++)
                        *(float *)(dp + k * dst.stride[a]) = (float)rd[k * width + l];
            }
        }
    }
}

void fp_box_post(fp_boxjob *j, ptrdiff_t t, int phase, int w, int nw);
FP_DISPATCH(void, fp_box_post, (fp_boxjob * j, ptrdiff_t t, int phase, int w, int nw),
            (j, t, phase, w, nw))

/* The element at extended index e of the single line of j (axis 0, extended by mode): read
 * straight inside the line, through scipy's extension outside it.  Returns it as a double. */
static inline double
fp_box_line_at(const fp_boxjob *j, ptrdiff_t e, int mode)
{
    ptrdiff_t i = e - j->before[0];
    if (i < 0 || i >= j->shape[0])
        i = fp_conv_extend(i, j->shape[0], mode);
    return i < 0 ? j->cval : fp_box_get(j->idata + i * j->istride[0], j->idbl);
}

/* A job of one line filtered along axis 0 in mode (a 1-D signal): scipy's running sum, one
 * dependent add per output, with no lanes to fill and no boundary map (the vector passes
 * would use one lane of eight and their slab machinery per element).  Returns nothing. */
static void
fp_box_line(const fp_boxjob *j, int mode)
{
    ptrdiff_t n = j->shape[0], s = j->size[0];
    double acc = 0.0, div = (double)s;
    for (ptrdiff_t k = 0; k < s; k++)
        acc += fp_box_line_at(j, k, mode);
    for (ptrdiff_t k = 0; k < n; k++) {
        char *dp = j->odata + k * j->ostride[0];
        if (k > 0)
            acc += fp_box_line_at(j, k + s - 1, mode) - fp_box_line_at(j, k - 1, mode);
        if (j->odbl)
            *(double *)dp = acc / div;
        else
            *(float *)dp = (float)(acc / div);
    }
}

/* Worker w of nw: every slab, its share of each phase, a barrier between phases.  Returns 0. */
static int
fp_box_worker(void *ctx, int w, int nw)
{
    fp_boxjob *j = (fp_boxjob *)ctx;
    ptrdiff_t nslabs = (j->shape[0] + j->slab - 1) / j->slab;
    int nphase = j->pass0 + j->npost;
    for (ptrdiff_t t = 0; t < nslabs; t++) {
        for (int ph = 0; ph < nphase; ph++) {
            if (ph > 0)
                fp_pool_barrier_wait(&j->barrier, nw);
            if (ph == 0 && j->pass0)
                fp_box_pass0(j, t, w, nw);
            else
                fp_box_post(j, t, ph, w, nw);
        }
    }
    return 0;
}

/* The axis order the job runs in: perm[0] the slab axis (the axis with the largest input
 * stride when it is not filtered or filtered first, else the first filtered axis), then the
 * others by decreasing input stride, so the vectors run along the most contiguous axis.
 * Returns nothing. */
static void
fp_box_perm(PyArrayObject *a, const long *order, int norder, int *perm)
{
    int nd = PyArray_NDIM(a), outer = 0, first = (int)order[0], slab, k = 1;
    int filtered[FP_MAXDIM] = {0};
    for (int i = 0; i < norder; i++)
        filtered[order[i]] = 1;
    for (int d = 1; d < nd; d++)
        if (llabs((long long)PyArray_STRIDE(a, d)) > llabs((long long)PyArray_STRIDE(a, outer)))
            outer = d;
    slab = !filtered[outer] || outer == first ? outer : first;
    perm[0] = slab;
    for (int d = 0; d < nd; d++)
        if (d != slab)
            perm[k++] = d;
    for (int i = 2; i < nd; i++) { /* insertion sort of perm[1..] by decreasing |stride| */
        int p = perm[i], q = i;
        long long sp = llabs((long long)PyArray_STRIDE(a, p));
        while (q > 1 && llabs((long long)PyArray_STRIDE(a, perm[q - 1])) < sp) {
            perm[q] = perm[q - 1];
            q--;
        }
        perm[q] = p;
    }
}

/* _uniform_filter_exact(input, output, sizes, modes, origins, cval, order): output = scipy's
 * uniform_filter of input, bit for bit (float32/float64 arrays of one shape, any strides, no
 * overlap; one size, mode and origin per axis; order: the filtered axes, sizes > 1, in the
 * order scipy filters them, at least one).  The int sequences are read (tuple copies) before
 * any array is looked at.  Returns None, or NULL with an exception set. */
PyObject *
fp_uniform_filter_exact(FP_UNUSED PyObject *self, PyObject *args)
{
    PyObject *in, *out, *sizes, *modes, *origins, *orderseq, *result = NULL;
    PyArrayObject *a, *o;
    double cval;
    long size_in[FP_MAXDIM], mode_in[FP_MAXDIM], origin_in[FP_MAXDIM], order[FP_MAXDIM];
    int perm[FP_MAXDIM], inv[FP_MAXDIM], nd, nsize, nmode, norigin, norder, nw, rc = 0;
    fp_boxjob j;
    memset(&j, 0, sizeof j);
    if (!PyArg_ParseTuple(args, "OOOOOdO:_uniform_filter_exact", &in, &out, &sizes, &modes,
                          &origins, &cval, &orderseq))
        goto error;
    if (fp_numpy_ready() < 0)
        goto error;
    /* the ints first: their __index__ may run Python code that changes the arrays */
    if ((nsize = fp_kernels_ints(sizes, FP_MAXDIM, 0, "sizes", size_in)) < 0 ||
        (nmode = fp_kernels_ints(modes, FP_MAXDIM, 0, "modes", mode_in)) < 0 ||
        (norigin = fp_kernels_ints(origins, FP_MAXDIM, 0, "origins", origin_in)) < 0 ||
        (norder = fp_kernels_ints(orderseq, FP_MAXDIM, 0, "order", order)) < 0)
        goto error;
    if ((j.idbl = fp_kernels_float_kind(in, "input")) < 0 ||
        (j.odbl = fp_kernels_float_kind(out, "output")) < 0)
        goto error;
    a = (PyArrayObject *)in;
    o = (PyArrayObject *)out;
    nd = PyArray_NDIM(a);
    if (nd < 1 || nd > FP_MAXDIM || PyArray_NDIM(o) != nd ||
        !PyArray_CompareLists(PyArray_DIMS(a), PyArray_DIMS(o), nd)) {
        PyErr_Format(PyExc_ValueError, "input and output must have one shape of 1 to %d axes",
                     FP_MAXDIM);
        goto error;
    }
    if (!PyArray_ISWRITEABLE(o)) {
        PyErr_SetString(PyExc_ValueError, "output must be writeable");
        goto error;
    }
    if (fp_kernels_count(nsize, nd, "sizes") < 0 || fp_kernels_count(nmode, nd, "modes") < 0 ||
        fp_kernels_count(norigin, nd, "origins") < 0)
        goto error;
    if (norder > nd) {
        PyErr_Format(PyExc_ValueError, "order: expected at most %d values, got %d", nd, norder);
        goto error;
    }
    if (norder == 0) {
        PyErr_SetString(PyExc_ValueError, "order: at least one axis to filter");
        goto error;
    }
    for (int i = 0; i < norder; i++) {
        long d = order[i];
        if (d < 0 || d >= nd || size_in[d] < 2 || mode_in[d] < FP_MODE_REFLECT ||
            mode_in[d] > FP_MODE_WRAP || size_in[d] / 2 + origin_in[d] < 0 ||
            size_in[d] / 2 + origin_in[d] >= size_in[d]) {
            PyErr_Format(PyExc_ValueError,
                         "order: axis %ld out of range, or its size, mode or origin invalid", d);
            goto error;
        }
        for (int k = 0; k < i; k++)
            if (order[k] == d) {
                PyErr_Format(PyExc_ValueError, "order: axis %ld given twice", d);
                goto error;
            }
    }
    for (int d = 0; d < nd; d++)
        if (PyArray_DIM(a, d) == 0)
            Py_RETURN_NONE;
    for (int i = 0; i < norder; i++) /* the extended lines' buffers: no size wraps */
        if (size_in[order[i]] > FP_BOX_MAX_EXT - PyArray_DIM(a, (int)order[i]))
            goto nomem;
    j.nd = nd;
    j.cval = cval;
    j.idata = PyArray_BYTES(a);
    j.odata = PyArray_BYTES(o);
    if (norder == 1 && PyArray_SIZE(a) == PyArray_DIM(a, (int)order[0])) {
        /* a lone line along the one filtered axis (the others of length 1) */
        int d = (int)order[0];
        j.shape[0] = PyArray_DIM(a, d);
        j.istride[0] = PyArray_STRIDE(a, d);
        j.ostride[0] = PyArray_STRIDE(o, d);
        j.size[0] = size_in[d];
        j.before[0] = size_in[d] / 2 + origin_in[d];
        Py_BEGIN_ALLOW_THREADS fp_box_line(&j, (int)mode_in[d]);
        Py_END_ALLOW_THREADS result = Py_NewRef(Py_None);
        goto error;
    }
    fp_box_perm(a, order, norder, perm);
    j.plane = 1;
    for (int d = 0; d < nd; d++) {
        int p = perm[d];
        inv[p] = d;
        j.shape[d] = PyArray_DIM(a, p);
        j.size[d] = 1;
        j.istride[d] = PyArray_STRIDE(a, p);
        j.ostride[d] = PyArray_STRIDE(o, p);
        if (d > 0)
            j.plane *= j.shape[d];
    }
    for (int i = 0; i < norder; i++) {
        int d = inv[order[i]];
        ptrdiff_t before = size_in[order[i]] / 2 + origin_in[order[i]];
        ptrdiff_t ext = j.shape[d] + size_in[order[i]] - 1;
        j.size[d] = size_in[order[i]];
        j.before[d] = before;
        if (ext > j.linelen)
            j.linelen = ext;
        if ((j.map[d] = malloc((size_t)ext * sizeof(ptrdiff_t))) == NULL)
            goto nomem;
        for (ptrdiff_t e = 0; e < ext; e++)
            j.map[d][e] = fp_conv_extend(e - before, j.shape[d], (int)mode_in[order[i]]);
        if (d == 0)
            j.pass0 = 1;
        else
            j.post[j.npost++] = d;
    }
    j.slab = (FP_SLAB_ELEMS + j.plane - 1) / j.plane;
    if (j.slab > j.shape[0])
        j.slab = j.shape[0];
    j.sstride[nd - 1] = sizeof(double); /* the slab buffers: C order over the permuted axes */
    for (int d = nd - 2; d >= 0; d--)
        j.sstride[d] = j.sstride[d + 1] * j.shape[d + 1];
    nw = fp_pool_get_threads();
    {
        ptrdiff_t total = j.plane * j.shape[0];
        if (total < 32768)
            nw = 1;
    }
    if (j.pass0 && (j.state = malloc((size_t)j.plane * sizeof(double))) == NULL)
        goto nomem;
    if (j.pass0 + j.npost > 1) {
        for (int k = 0; k < 2; k++)
            if ((j.buf[k] = malloc((size_t)(j.slab * j.plane) * sizeof(double))) == NULL)
                goto nomem;
    }
    j.group = (int)(FP_GROUP_BYTES / (2 * j.linelen * (ptrdiff_t)sizeof(fp_v8)));
    j.group = j.group < 1 ? 1 : j.group > FP_GROUP ? FP_GROUP : j.group;
    if (j.npost > 0 && (j.lines = aligned_alloc(64, (size_t)(nw * 2 * j.linelen * j.group) *
                                                        sizeof(fp_v8))) == NULL)
        goto nomem;
    Py_BEGIN_ALLOW_THREADS rc = fp_pool_gang(nw, fp_box_worker, &j);
    Py_END_ALLOW_THREADS if (rc < 0) goto nomem;
    result = Py_NewRef(Py_None);
    goto error;
nomem:
    PyErr_NoMemory();
error:
    for (int d = 0; d < FP_MAXDIM; d++)
        free(j.map[d]);
    free(j.state);
    free(j.buf[0]);
    free(j.buf[1]);
    free(j.lines);
    return result;
}
