/* attn_stage_emul.cu — a host-only replay of session 12's staged cluster attention (ats_kernel of
 * lab_attn_stage.cuh), block by block and thread by thread, through the kernel's own layout and index
 * helpers (ats_layout_of, ats_pos, ats_tb, ats_kat, ats_vat): which rows each thread requests into
 * which 16-byte chunk of shared memory in which commit group, the waits (a group's copies land when
 * a wait with at most N pending groups is passed; what the barrier after it publishes), the score
 * trips and their teams (the shuffles of stk_score_row), the cluster max, the exps, the o and den
 * chains of thread (r, d) in the V region and then in the dead K region, the butterflies. It needs
 * no GPU (what it cannot check: the hardware's races, cp.async itself, launches, occupancy).
 * Every shared-memory chunk carries a tag (the global row and chunk its last copy came from, and
 * whether a copy into it is still in flight): every read checks that its chunk holds the row the
 * kernel means and that no copy into it is pending (a read before its group's wait, or a copy into
 * the K region while the scores could still read it, is an error); every copy stays inside the
 * K and V regions and never targets a chunk with a copy in flight; every position < n is scored
 * exactly once and its V row read by exactly one chain.
 *   - layout mode: the tags and the coverage only, every position 0..n_ctx-1 at n_ctx 512 and 4096
 *     (and odd ones), clusters of 16, 8, 4, 2 where the shared memory fits;
 *   - value mode: the outputs of every head compared bit for bit with fp4p_attend, at the shapes
 *     and positions of tests/gpu/test_gpu_attention.cu's kind (partial head groups included).
 *   attn_stage_emul [quick]     exit 1 on any error or differing output */
#include "lab_attn_wide.cuh"
#include "fp4_rng.h"
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long n_err;
#define EMU_ERR(...)                                                                                         \
    do {                                                                                                     \
        if (n_err++ < 20) printf(__VA_ARGS__);                                                               \
    } while (0)

typedef struct cpy {
    int64_t dst;    /* chunk index */
    int64_t src;    /* halves offset into K or V */
    int which, grp; /* 0 K, 1 V */
} cpy;

/* one block's shared memory: bytes, a tag per 16-byte chunk (-1: never copied into; else
 * which << 62 | source offset), the group of a copy in flight into it (-1: none) */
typedef struct blk {
    ats_layout L;
    unsigned char *sm;
    int64_t *tag;
    int *pend;
    cpy *q;
    int nq, cap, committed;
    int tma, cur;                               /* TMA: copies go to mbarrier cur */
    int64_t exp_tx[ATS_NBAR], got_tx[ATS_NBAR]; /* TMA: bytes expected, bytes copied */
} blk;

typedef struct emu {
    int D, NH, NKV, values;
    int64_t n_ctx, kvd, slot_stride, q_cs;
    const uint16_t *kc, *vc;
    const float *q;
    float scale;
} emu;

static int64_t tag_of(int which, int64_t src) {
    return ((int64_t)which << 62) | src;
}

static void blk_init(blk *k, const ats_layout *L, int values, int tma) {
    memset(k, 0, sizeof *k);
    k->L = *L, k->tma = tma;
    k->sm = (unsigned char *)malloc(L->bytes);
    if (values) memset(k->sm, 0x7F, L->bytes); /* stale contents: NaN-ish */
    const int64_t nch = (int64_t)(L->bytes / 16);
    k->tag = (int64_t *)malloc(sizeof(int64_t) * (size_t)nch);
    k->pend = (int *)malloc(sizeof(int) * (size_t)nch);
    for (int64_t i = 0; i < nch; i++)
        k->tag[i] = -1, k->pend[i] = -1;
    k->cap = 1024, k->nq = 0, k->committed = 0;
    k->q = (cpy *)malloc(sizeof(cpy) * (size_t)k->cap);
}
static void blk_free(blk *k) {
    free(k->sm), free(k->tag), free(k->pend), free(k->q);
}

/* cp.async of 16 bytes to byte offset dst of the block's shared memory from halves offset src */
static void cp_issue(blk *k, int64_t dst, int which, int64_t src) {
    if (dst % 16 || dst < (int64_t)k->L.kreg || dst + 16 > (int64_t)k->L.bytes) {
        EMU_ERR("copy to byte %lld outside the K and V regions [%zu, %zu)\n", (long long)dst, k->L.kreg,
                k->L.bytes);
        return;
    }
    const int64_t ch = dst / 16;
    if (k->pend[ch] >= 0) EMU_ERR("two copies in flight into chunk %lld\n", (long long)ch);
    if (k->nq == k->cap) k->cap *= 2, k->q = (cpy *)realloc(k->q, sizeof(cpy) * (size_t)k->cap);
    const int grp = k->tma ? k->cur : k->committed;
    k->q[k->nq++] = (cpy){ch, src, which, grp};
    k->pend[ch] = grp;
    if (k->tma) k->got_tx[grp] += 16;
}
/* TMA: a row (D halves) by one bulk copy on mbarrier bar: 16-byte pieces in the model */
static void bulk_issue(blk *k, int bar, int64_t dst, int which, int64_t src, int D) {
    k->cur = bar;
    for (int ch = 0; ch < D / 8; ch++)
        cp_issue(k, dst + 16 * ch, which, src + 8 * ch);
}
/* TMA: every thread waits for mbarrier bar's phase 0: its copies have landed (and it completes only
 * when the bytes copied are the bytes expected) */
static void bar_wait(blk *k, const emu *e, int bar) {
    if (k->got_tx[bar] != k->exp_tx[bar])
        EMU_ERR("mbarrier %d expects %lld bytes, its copies bring %lld\n", bar, (long long)k->exp_tx[bar],
                (long long)k->got_tx[bar]);
    int keep = 0;
    for (int x = 0; x < k->nq; x++) {
        const cpy c = k->q[x];
        if (c.grp == bar) {
            memcpy(k->sm + c.dst * 16, (c.which ? e->vc : e->kc) + c.src, 16);
            k->tag[c.dst] = tag_of(c.which, c.src), k->pend[c.dst] = -1;
        } else {
            k->q[keep++] = c;
        }
    }
    k->nq = keep;
}
static void cp_commit(blk *k) {
    k->committed++;
}
/* cp.async.wait_group<pending> by every thread, then the barrier: the older groups have landed */
static void cp_wait(blk *k, const emu *e, int pending) {
    int keep = 0;
    for (int x = 0; x < k->nq; x++) {
        const cpy c = k->q[x];
        if (c.grp < k->committed - pending) {
            memcpy(k->sm + c.dst * 16, (c.which ? e->vc : e->kc) + c.src, 16);
            k->tag[c.dst] = tag_of(c.which, c.src), k->pend[c.dst] = -1;
        } else {
            k->q[keep++] = c;
        }
    }
    k->nq = keep;
}
/* a read of the halves at byte offset off, which must come from element src of K or V */
static const uint16_t *rd(const blk *k, int64_t off, int which, int64_t src, const char *what) {
    const int64_t ch = off / 16;
    if (off < (int64_t)k->L.kreg || off + 2 > (int64_t)k->L.bytes) {
        EMU_ERR("%s: read of byte %lld outside the regions\n", what, (long long)off);
        return (const uint16_t *)k->sm;
    }
    if (k->pend[ch] >= 0)
        EMU_ERR("%s: read of chunk %lld while a copy into it is in flight\n", what, (long long)ch);
    const int64_t want = tag_of(which, src - (off % 16) / 2);
    if (k->tag[ch] != want)
        EMU_ERR("%s: chunk %lld holds tag %llx, the kernel means %llx\n", what, (long long)ch,
                (unsigned long long)k->tag[ch], (unsigned long long)want);
    return (const uint16_t *)(k->sm + off);
}

static float h2f(uint16_t h) {
    return fp4p_f16_to_f32(h);
}

static float butterfly32(float *v) { /* stk_butterfly32 */
    for (int k = 0; k < 16; k++)
        v[k] = fp4p_add(v[k], v[k + 16]);
    for (int k = 0; k < 8; k++)
        v[k] = fp4p_add(v[k], v[k + 8]);
    for (int k = 0; k < 4; k++)
        v[k] = fp4p_add(v[k], v[k + 4]);
    v[0] = fp4p_add(v[0], v[2]);
    v[1] = fp4p_add(v[1], v[3]);
    return fp4p_add(v[0], v[1]);
}

/* stk_score_row for the team of slot i: kr[t][m] holds team thread t's 8 K halves of piece 4m+t;
 * every team thread's lanes in increasing m from +0.0f, the shuffles xor 2 and xor 1, steps 4, 2, 1
 * in registers; thread t == g stores head g's score; every thread's max (all hold the same value) */
template <int D>
static void emu_team(const emu *e, const float *qs, int nhb, const uint16_t *const (&kr)[4][D / 32],
                     bool valid, int64_t i, float *es, float *mxb) {
    float p[4][STK_GB][8];
    for (int t = 0; t < 4; t++) {
        for (int g2 = 0; g2 < STK_GB; g2++)
            for (int ii = 0; ii < 8; ii++)
                p[t][g2][ii] = 0.0f;
        for (int m = 0; m < D / 32; m++)
            for (int g2 = 0; g2 < nhb; g2++)
                for (int ii = 0; ii < 8; ii++)
                    p[t][g2][ii] =
                        fp4p_add(p[t][g2][ii], fp4p_mul(qs[g2 * D + 32 * m + 8 * t + ii], h2f(kr[t][m][ii])));
    }
    for (int g2 = 0; g2 < nhb; g2++) {
        float a1[4][8], a2[4][8];
        for (int t = 0; t < 4; t++) /* xor 2, then xor 1 */
            for (int ii = 0; ii < 8; ii++)
                a1[t][ii] = fp4p_add(p[t][g2][ii], p[t ^ 2][g2][ii]);
        for (int t = 0; t < 4; t++)
            for (int ii = 0; ii < 8; ii++)
                a2[t][ii] = fp4p_add(a1[t][ii], a1[t ^ 1][ii]);
        for (int t = 0; t < 4; t++) {
            float *v = a2[t];
            for (int ii = 0; ii < 4; ii++)
                v[ii] = fp4p_add(v[ii], v[ii + 4]);
            v[0] = fp4p_add(v[0], v[2]);
            v[1] = fp4p_add(v[1], v[3]);
            const float sc = fp4p_mul(fp4p_add(v[0], v[1]), e->scale);
            if (valid) {
                if (t == g2) es[i * STK_GB + g2] = sc;
                mxb[g2] = fmaxf(mxb[g2], sc);
            }
        }
    }
}

/* ats_issue_vb: the V rows of K-region rows [k0, k1) (ats_vb_rows), one commit group */
template <int LPB, int D, bool EV, bool TMA>
static void vb_issue(blk *k, const emu *e, const ats_layout &L, int b, int64_t n, int64_t kvo, int g,
                     int trips, int nb) {
    int k0, k1;
    ats_vb_rows<EV>(g, trips, nb, &k0, &k1);
    if constexpr (TMA) {
        for (int kk = k0; kk < k1; kk++) {
            const int i = L.va + kk;
            const int64_t j = 32 * (int64_t)(i / LPB) + b * LPB + i % LPB;
            if (j < n)
                bulk_issue(k, ATS_NKG + g, (int64_t)L.kreg + 2 * ats_vat<D, TMA>(L, i), 1, kvo + j * e->kvd,
                           D);
        }
    } else {
        for (int x = 0; x < (k1 - k0) * (D / 8); x++) {
            const int i = L.va + k0 + x / (D / 8), ch = x % (D / 8);
            const int64_t j = 32 * (int64_t)(i / LPB) + b * LPB + i % LPB;
            if (j < n)
                cp_issue(k, (int64_t)L.kreg + 2 * (ats_vat<D, TMA>(L, i) + 8 * ch), 1,
                         kvo + j * e->kvd + 8 * ch);
        }
        cp_commit(k);
    }
}

/* one cluster (column c at position pos in slot `slot`, group y): the outputs into o (values mode);
 * cnt_s / cnt_v count how often each position is scored / its V row read (one chain, d = 0) */
template <int CS, int D, bool EV, bool TMA>
static void emu_cluster(const emu *e, int y, int64_t pos, int64_t slot, float *o, int *cnt_s, int *cnt_v) {
    constexpr int LPB = 32 / CS, NDL = D / 32, PER = D / 8, T = ATT_CL_THREADS;
    const ats_layout L = ats_layout_of(e->n_ctx, D, CS);
    const int G = e->NH / e->NKV, ngb = (G + STK_GB - 1) / STK_GB, gb = y % ngb, hk = (y / ngb) % e->NKV;
    const int h0 = hk * G + gb * STK_GB, nhb = G - gb * STK_GB < STK_GB ? G - gb * STK_GB : STK_GB;
    const int64_t n = pos + 1, kvd = e->kvd, kvo = slot * e->slot_stride + hk * D;
    const int ni = (int)((n + 31) / 32 * LPB), trips = (ni + ATS_TS - 1) / ATS_TS;
    blk bk[CS];
    float bmv[CS][STK_GB];
    for (int b = 0; b < CS; b++) {
        blk *k = &bk[b];
        blk_init(k, &L, e->values, TMA);
        float *qs = (float *)(k->sm + L.qs), *es = (float *)(k->sm + L.es);
        /* the naive position of slot i: lane b*LPB + i % LPB, round i / LPB */
#define POS(i) ((int64_t)((i) / LPB) * 32 + b * LPB + (i) % LPB)
        const int nv = ats_nvalid<LPB>(n, b);
        for (int i = 0; i < ni; i++)
            if ((POS(i) < n) != (i < nv))
                EMU_ERR("ats_nvalid(%lld, %d) = %d: slot %d\n", (long long)n, b, nv, i);
        if (TMA)
            for (int x = 0; x < ATS_NBAR; x++)
                k->exp_tx[x] = ats_tx<LPB, D>(x, L, ni, nv, trips);
        for (int g = 0; g < ATS_NKG; g++) {
            const int i0 = std::min(ats_tb(g, trips) * ATS_TS, ni),
                      i1 = std::min(ats_tb(g + 1, trips) * ATS_TS, ni);
            for (int x = 0; x < (i1 - i0) * PER; x++) { /* every thread's x, in any order */
                const int i = i0 + x / PER, ch = x % PER;
                if (ats_pos<LPB>(i, b) != POS(i))
                    EMU_ERR("ats_pos(%d, %d) != %lld\n", i, b, (long long)POS(i));
                const int64_t j = POS(i) < n ? POS(i) : n - 1;
                if (TMA) { /* the row's bulk copy, once */
                    if (ch == 0)
                        bulk_issue(k, g, (int64_t)L.kreg + 2 * ats_kat<D, TMA>(i, 0, L.nimax), 0,
                                   kvo + j * kvd, D);
                } else {
                    cp_issue(k, (int64_t)L.kreg + 2 * ats_kat<D, TMA>(i, ch, L.nimax), 0,
                             kvo + j * kvd + 8 * ch);
                }
            }
            if (!TMA) cp_commit(k);
        }
        const int na = std::min(L.va, ni);
        if (TMA)
            for (int i = 0; i < std::min(L.va, nv); i++)
                bulk_issue(k, ATS_NKG, (int64_t)L.kreg + 2 * ats_vat<D, TMA>(L, i), 1, kvo + POS(i) * kvd, D);
        for (int x = 0; x < na * PER && !TMA; x++) {
            const int i = x / PER, ch = x % PER;
            if (POS(i) < n)
                cp_issue(k, (int64_t)L.kreg + 2 * (ats_vat<D, TMA>(L, i) + 8 * ch), 1,
                         kvo + POS(i) * kvd + 8 * ch);
        }
        if (!TMA) cp_commit(k);
        for (int i = 0; i < STK_GB * D; i++)
            qs[i] = i < nhb * D ? e->q[h0 * D + i] : 0.0f;
        float mxb[STK_GB];
        for (int g = 0; g < STK_GB; g++)
            mxb[g] = -INFINITY;
        const int nb = ni - L.va;
        for (int g = 0; g < ATS_NKG; g++) {
            if (TMA)
                bar_wait(k, e, g);
            else
                cp_wait(k, e, ats_pend_k<EV>(g));
            if (EV && g >= 1) vb_issue<LPB, D, EV, TMA>(k, e, L, b, n, kvo, g, trips, nb);
            for (int s = ats_tb(g, trips); s < ats_tb(g + 1, trips); s++)
                for (int w = 0; w < T / 32; w++) {
                    if (s * ATS_TS + 8 * w >= ni) continue; /* this warp is done */
                    for (int tm = 0; tm < 8; tm++) {        /* the warp's teams */
                        const int i = s * ATS_TS + 8 * w + tm, ri = i < ni ? i : ni - 1;
                        const int64_t jr = POS(ri) < n ? POS(ri) : n - 1;
                        const bool valid = i < ni && POS(i) < n;
                        const uint16_t *kr[4][NDL];
                        for (int t = 0; t < 4; t++)
                            for (int m = 0; m < NDL; m++)
                                kr[t][m] =
                                    rd(k, (int64_t)L.kreg + 2 * ats_kat<D, TMA>(ri, 4 * m + t, L.nimax), 0,
                                       kvo + jr * kvd + 8 * (4 * m + t), "K");
                        if (valid && cnt_s) cnt_s[POS(i)]++;
                        if (e->values) emu_team<D>(e, qs, nhb, kr, valid, i, es, mxb);
                    }
                }
        }
        for (int g = 0; g < STK_GB; g++)
            bmv[b][g] = mxb[g];
        /* past the block-max barrier: the rest of the K region's V rows */
        vb_issue<LPB, D, EV, TMA>(k, e, L, b, n, kvo, ATS_NKG, trips, nb);
#undef POS
    }
    float ms[STK_GB]; /* the cluster's max (order-free) */
    for (int g = 0; g < STK_GB; g++) {
        ms[g] = -INFINITY;
        for (int b = 0; b < CS; b++)
            ms[g] = fmaxf(ms[g], bmv[b][g]);
    }
    const int ua = L.va / LPB;
    for (int b = 0; b < CS; b++) {
        blk *k = &bk[b];
        float *es = (float *)(k->sm + L.es), *part = (float *)(k->sm + L.part),
              *denp = (float *)(k->sm + L.denp);
        if (e->values)
            for (int i = 0; i < ni; i++)
                if (ats_pos<LPB>(i, b) < n)
                    for (int g = 0; g < nhb; g++)
                        es[i * STK_GB + g] = fp4p_exp(fp4p_sub(es[i * STK_GB + g], ms[g]));
        /* thread (r, dimension pair d/2): the kernel's sets cover every r < LPB; both halves behind
         * their barriers; the den strips from the exps alone */
        float *pa = (float *)calloc((size_t)(LPB * D * STK_GB), sizeof(float));
        float *da = (float *)calloc((size_t)(LPB * STK_GB), sizeof(float));
        for (int half = 0; half < 2; half++) {
            if (TMA) {
                if (half == 0) bar_wait(k, e, ATS_NKG);
                for (int x = ATS_NKG + 1; half && x < ATS_NBAR; x++)
                    bar_wait(k, e, x);
            } else {
                cp_wait(k, e, ats_pend_v<EV>(half));
            }
            for (int r = 0; r < LPB; r++) {
                const int nu = n > b * LPB + r ? (int)((n - b * LPB - r + 31) / 32) : 0;
                if (half == 0 && e->values)
                    for (int g = 0; g < nhb; g++)
                        for (int u = 0; u < nu; u++)
                            da[r * STK_GB + g] = fp4p_add(da[r * STK_GB + g], es[(u * LPB + r) * STK_GB + g]);
                const int u0 = half ? ua : 0, u1 = half ? nu : std::min(nu, ua);
                for (int d = 0; d < D; d++) {
                    if (!(e->values || d == 0 || d == 7 || d == 8 || d == D - 1)) continue;
                    float *p = pa + (r * D + d) * STK_GB;
                    for (int u = u0; u < u1; u++) {
                        const int i = u * LPB + r;
                        const int64_t j = 32 * (int64_t)u + b * LPB + r;
                        const int64_t at = ats_vat<D, TMA>(L, u0 * LPB + r) + 2 * (d / 2) +
                                           (int64_t)(u - u0) * ats_vstride<D, TMA>(LPB, half == 1) + d % 2;
                        const uint16_t *vp = rd(k, (int64_t)L.kreg + 2 * at, 1, kvo + j * kvd + d, "V");
                        if (at != ats_vat<D, TMA>(L, i) + d)
                            EMU_ERR("V row of slot %d: the chain's stride misses it\n", i);
                        if (d == 0 && cnt_v) cnt_v[j]++;
                        if (!e->values) continue;
                        const float v = h2f(*vp), *e4 = es + (int64_t)i * STK_GB;
                        for (int g = 0; g < nhb; g++)
                            p[g] = fp4p_add(p[g], fp4p_mul(e4[g], v));
                    }
                }
            }
        }
        for (int r = 0; r < LPB; r++) {
            for (int d = 0; d < D; d++)
                for (int g = 0; g < STK_GB; g++)
                    part[(r * STK_GB + g) * D + d] = pa[(r * D + d) * STK_GB + g];
            for (int g = 0; g < STK_GB; g++)
                denp[r * STK_GB + g] = g < nhb ? da[r * STK_GB + g] : 0.0f;
        }
        free(pa), free(da);
    }
    if (e->values)
        for (int idx = 0; idx < nhb * D; idx++) {
            const int g = idx / D, d = idx - g * D;
            float v[STK_LANES], w[STK_LANES];
            for (int l = 0; l < STK_LANES; l++) {
                const blk *k = &bk[l / LPB];
                v[l] = ((const float *)(k->sm + L.part))[((l % LPB) * STK_GB + g) * D + d];
                w[l] = ((const float *)(k->sm + L.denp))[(l % LPB) * STK_GB + g];
            }
            o[(h0 + g) * D + d] = fp4p_div(butterfly32(v), butterfly32(w));
        }
    for (int b = 0; b < CS; b++)
        blk_free(&bk[b]);
}

static uint16_t f16_of(uint64_t *s, float sd, size_t i) {
    const uint64_t x = fp4_splitmix64(s);
    const float u = (float)(x & 0xFFFF) + (float)((x >> 16) & 0xFFFF) + (float)((x >> 32) & 0xFFFF);
    float f = (u - 98302.5f) / 32768.0f * sd;
    if (i % 97 == 0) f = -0.0f;
    if (i % 89 == 0) f = 3e-6f * (float)(i % 7) - 1e-5f;
    return fp4p_f32_to_f16(f);
}

/* one column at pos in slot 1: values mode compares every head with fp4p_attend, layout mode
 * checks the coverage (one group: the others differ only by kvo) */
template <int CS, int D, bool EV = true, bool TMA = false>
static int64_t emu_case(const emu *e0, int64_t pos, int values) {
    emu e = *e0;
    e.values = values;
    const ats_layout L = ats_layout_of(e.n_ctx, D, CS);
    if (L.bytes > ATS_MAX_SMEM) return 0;
    const int64_t slot = 1;
    const int NH = e.NH, G = NH / e.NKV, ngb = (G + STK_GB - 1) / STK_GB;
    float *o = (float *)malloc(sizeof(float) * (size_t)(NH * D));
    int *cs = (int *)calloc((size_t)e.n_ctx, sizeof(int)), *cv = (int *)calloc((size_t)e.n_ctx, sizeof(int));
    const long long err0 = n_err;
    const int ny = values ? e.NKV * ngb : 1;
    for (int y = 0; y < ny; y++)
        emu_cluster<CS, D, EV, TMA>(&e, y, pos, slot, o, y == 0 ? cs : NULL, y == 0 ? cv : NULL);
    for (int64_t j = 0; j < e.n_ctx; j++)
        if (cs[j] != (j <= pos) || cv[j] != (j <= pos))
            EMU_ERR("ctx %lld cs %d pos %lld: position %lld scored %d times, its V row read %d times\n",
                    (long long)e.n_ctx, CS, (long long)pos, (long long)j, cs[j], cv[j]);
    int64_t bad = 0;
    if (values) {
        float *want = (float *)malloc(sizeof(float) * (size_t)D),
              *sb = (float *)malloc(sizeof(float) * (size_t)e.n_ctx);
        for (int h = 0; h < NH; h++) {
            const int64_t at = slot * e.slot_stride + (h / G) * D;
            fp4p_attend(e.q + h * D, e.kc + at, e.vc + at, e.kvd, pos + 1, D, e.scale, sb, want);
            for (int d = 0; d < D; d++)
                bad += fp4p_bits(want[d]) != fp4p_bits(o[h * D + d]);
        }
        free(want), free(sb);
        printf("d %3d heads %2d/%d ctx %5lld cluster %2d%s pos %5lld smem %6zu: %lld of %d differ%s\n", D, NH,
               e.NKV, (long long)e.n_ctx, CS,
               TMA  ? " TMA"
               : EV ? ""
                    : " late V",
               (long long)pos, L.bytes, (long long)bad, NH * D, n_err > err0 ? " (layout errors)" : "");
    }
    free(o), free(cs), free(cv);
    return bad + (n_err > err0);
}

static void emu_make(emu *e, int D, int NH, int NKV, int64_t n_ctx, uint16_t **kc, uint16_t **vc, float **q,
                     int nslots = 2, int ncol = 1) {
    memset(e, 0, sizeof *e);
    e->D = D, e->NH = NH, e->NKV = NKV, e->n_ctx = n_ctx, e->kvd = (int64_t)NKV * D;
    e->slot_stride = n_ctx * e->kvd, e->scale = (float)(1.0 / sqrt((double)D));
    const size_t ss = (size_t)(nslots * e->slot_stride); /* slots 0 .. nslots-1 */
    *kc = (uint16_t *)malloc(ss * 2), *vc = (uint16_t *)malloc(ss * 2),
    *q = (float *)malloc(sizeof(float) * NH * D * ncol);
    uint64_t s = (uint64_t)(D + NH * 100 + n_ctx);
    const float ksd = 2.5f / sqrtf(sqrtf((float)D));
    for (size_t x = 0; x < ss; x++)
        (*kc)[x] = f16_of(&s, ksd, x), (*vc)[x] = f16_of(&s, 1.0f, x + 13);
    for (int i = 0; i < NH * D * ncol; i++)
        (*q)[i] = (float)((int64_t)(fp4_splitmix64(&s) >> 40) - (1 << 23)) / (float)(1 << 22);
    e->kc = *kc, e->vc = *vc, e->q = *q, e->q_cs = (int64_t)NH * D;
}

/* layout mode at every position of n_ctx for the cluster sizes that fit; returns failures */
template <int D> static int64_t layout_all(int64_t n_ctx, int step) {
    emu e;
    uint16_t *kc, *vc;
    float *q;
    emu_make(&e, D, 8, 2, n_ctx, &kc, &vc, &q);
    int64_t bad = 0, cases = 0;
    for (int64_t p = 0; p < n_ctx; p += (p < 300 || p > n_ctx - 300 ? 1 : step)) {
        bad += emu_case<16, D>(&e, p, 0) + emu_case<8, D>(&e, p, 0) + emu_case<4, D>(&e, p, 0) +
               emu_case<2, D>(&e, p, 0) + emu_case<16, D, false>(&e, p, 0) +
               emu_case<16, D, true, true>(&e, p, 0) + emu_case<8, D, true, true>(&e, p, 0);
        cases++;
    }
    printf("layout: d %3d ctx %5lld, %lld positions x clusters 16/8/4/2, 16 late V, 16 and 8 by TMA (where "
           "they fit: "
           "%zu/%zu/%zu/%zu "
           "bytes): "
           "%lld failed\n",
           D, (long long)n_ctx, (long long)cases, ats_layout_of(n_ctx, D, 16).bytes,
           ats_layout_of(n_ctx, D, 8).bytes, ats_layout_of(n_ctx, D, 4).bytes,
           ats_layout_of(n_ctx, D, 2).bytes, (long long)bad);
    free(kc), free(vc), free(q);
    return bad;
}

template <int D>
static int64_t values_at(int NH, int NKV, int64_t n_ctx, const int64_t *ps, int np, int cs_mask) {
    emu e;
    uint16_t *kc, *vc;
    float *q;
    emu_make(&e, D, NH, NKV, n_ctx, &kc, &vc, &q);
    int64_t bad = 0;
    for (int k = 0; k < np; k++) {
        const int64_t p = ps[k] < n_ctx ? ps[k] : n_ctx - 1;
        if (cs_mask & 16) bad += emu_case<16, D>(&e, p, 1);
        if (cs_mask & 1) bad += emu_case<16, D, false>(&e, p, 1);      /* the late V rows */
        if (cs_mask & 1) bad += emu_case<16, D, true, true>(&e, p, 1); /* TMA */
        if (cs_mask & 8) bad += emu_case<8, D>(&e, p, 1);
        if (cs_mask & 4) bad += emu_case<4, D>(&e, p, 1);
        if (cs_mask & 2) bad += emu_case<2, D>(&e, p, 1);
    }
    free(kc), free(vc), free(q);
    return bad;
}

/* ---- wide mode: the bounded ring of lab_attn_wide.cuh (atw_kernel), 1 to 8 columns ---------------- */

/* one cluster of atw_kernel (block row y of a launch whose column c has position poss[c] in slot
 * slots[c]); the outputs into o [col][NH][D] (values mode); cnt_s / cnt_v as emu_cluster's */
template <int CS, int D, int NR>
static void emu_wide(const emu *e, int y, const int64_t *slots, const int64_t *poss, float *o, int *cnt_s,
                     int *cnt_v) {
    constexpr int LPB = 32 / CS, NDL = D / 32, PER = D / 8, RC = ATW_RC, RPC = RC / LPB;
    const atw_layout W = atw_layout_of(e->n_ctx, D, CS, NR);
    const int64_t ring_end = (int64_t)W.ring + 2 * (int64_t)NR * RC * D;
    ats_layout L; /* the emulator's block: copies and reads inside [kreg, bytes): the ring */
    memset(&L, 0, sizeof L);
    L.kreg = W.ring, L.bytes = W.bytes;
    if ((int64_t)W.bytes < ring_end || W.es < W.qs + 16 * D || W.denp < W.es + 16 * (size_t)W.nimax ||
        W.ring % 16 || W.part != W.ring || W.bytes < W.part + 16 * (size_t)LPB * D)
        EMU_ERR("atw_layout_of(%lld, %d, %d, %d): regions overlap\n", (long long)e->n_ctx, D, CS, NR);
    int c, hk, h0, nhb;
    atw_group(y, e->NH, e->NKV, &c, &hk, &h0, &nhb);
    const int64_t pos = poss[c], n = pos + 1, kvd = e->kvd, kvo = slots[c] * e->slot_stride + hk * D;
    const int ni = (int)((n + 31) / 32 * LPB), nc = atw_chunks(ni);
    blk bk[CS];
    float bmv[CS][STK_GB];
#define POS(i) ((int64_t)((i) / LPB) * 32 + b * LPB + (i) % LPB)
    /* atw_issue: item `it` of block b, one commit group */
    auto issue = [&](blk *k, int b, int it) {
        if (it < 2 * nc) {
            const bool isk = it < nc;
            const int i0 = (isk ? it : it - nc) * RC, cnt = std::min(RC, ni - i0);
            for (int x = 0; x < cnt * PER; x++) { /* every thread's x, in any order */
                const int i = i0 + x / PER, ch = x % PER;
                if (ats_pos<LPB>(i, b) != POS(i))
                    EMU_ERR("ats_pos(%d, %d) != %lld\n", i, b, (long long)POS(i));
                const int64_t j = POS(i);
                const int64_t at = isk ? atw_kat<D>(it, NR, i, ch) : atw_vat<D>(it, NR, i) + 8 * ch;
                if (2 * at + 16 > ring_end - (int64_t)W.ring || at < 0)
                    EMU_ERR("item %d: a copy to halves %lld outside the ring\n", it, (long long)at);
                if (isk)
                    cp_issue(k, (int64_t)W.ring + 2 * at, 0, kvo + (j < n ? j : n - 1) * kvd + 8 * ch);
                else if (j < n)
                    cp_issue(k, (int64_t)W.ring + 2 * at, 1, kvo + j * kvd + 8 * ch);
            }
        }
        cp_commit(k);
    };
    for (int b = 0; b < CS; b++) {
        blk *k = &bk[b];
        blk_init(k, &L, e->values, 0);
        float *qs = (float *)(k->sm + W.qs), *es = (float *)(k->sm + W.es);
        for (int it = 0; it < atw_ahead(NR); it++)
            issue(k, b, it);
        for (int i = 0; i < STK_GB * D; i++)
            qs[i] = i < nhb * D ? e->q[c * e->q_cs + h0 * D + i] : 0.0f;
        float mxb[STK_GB];
        for (int g = 0; g < STK_GB; g++)
            mxb[g] = -INFINITY;
        for (int kk = 0; kk < nc; kk++) {
            cp_wait(k, e, atw_pend(NR));
            issue(k, b, atw_next(kk, NR));
            for (int w = 0; w < ATT_CL_THREADS / 32; w++) {
                if (kk * RC + 8 * w >= ni) continue; /* this warp has no slot of the item */
                for (int tm = 0; tm < 8; tm++) {
                    const int i = kk * RC + 8 * w + tm, ri = i < ni ? i : ni - 1;
                    if (ri / RC != kk) EMU_ERR("item %d: team slot %d is another item's\n", kk, ri);
                    const int64_t jr = POS(ri) < n ? POS(ri) : n - 1;
                    const bool valid = i < ni && POS(i) < n;
                    const uint16_t *kr[4][NDL];
                    for (int t = 0; t < 4; t++)
                        for (int m = 0; m < NDL; m++)
                            kr[t][m] = rd(k, (int64_t)W.ring + 2 * atw_kat<D>(kk, NR, ri, 4 * m + t), 0,
                                          kvo + jr * kvd + 8 * (4 * m + t), "K");
                    if (valid && cnt_s) cnt_s[POS(i)]++;
                    if (e->values) emu_team<D>(e, qs, nhb, kr, valid, i, es, mxb);
                }
            }
        }
        for (int g = 0; g < STK_GB; g++)
            bmv[b][g] = mxb[g];
    }
    float ms[STK_GB]; /* the cluster's max over atw_max_ranks(CS) ranks */
    for (int g = 0; g < STK_GB; g++) {
        ms[g] = -INFINITY;
        for (int b = 0; b < atw_max_ranks(CS); b++)
            ms[g] = fmaxf(ms[g], bmv[b][g]);
    }
    for (int b = 0; b < CS; b++) {
        blk *k = &bk[b];
        float *es = (float *)(k->sm + W.es);
        if (e->values)
            for (int i = 0; i < ni; i++)
                if (POS(i) < n)
                    for (int g = 0; g < nhb; g++)
                        es[i * STK_GB + g] = fp4p_exp(fp4p_sub(es[i * STK_GB + g], ms[g]));
        float *pa = (float *)calloc((size_t)(LPB * D * STK_GB), sizeof(float));
        float *da = (float *)calloc((size_t)(LPB * STK_GB), sizeof(float));
        for (int kk = nc; kk < 2 * nc; kk++) {
            cp_wait(k, e, atw_pend(NR));
            issue(k, b, atw_next(kk, NR));
            const int u0 = (kk - nc) * RPC;
            for (int r = 0; r < LPB; r++) { /* the threads (r, dp) of every set: r < LPB */
                const int nu = n > b * LPB + r ? (int)((n - b * LPB - r + 31) / 32) : 0;
                const int nw = std::min(nu - u0, RPC);
                for (int w = 0; w < nw && e->values; w++) /* den strip (r, g): thread (r, dp = g) */
                    for (int g = 0; g < nhb; g++)
                        da[r * STK_GB + g] =
                            fp4p_add(da[r * STK_GB + g], es[((u0 + w) * LPB + r) * STK_GB + g]);
                for (int d = 0; d < D; d++) {
                    if (!(e->values || d == 0 || d == 7 || d == 8 || d == D - 1)) continue;
                    float *p = pa + (r * D + d) * STK_GB;
                    for (int w = 0; w < nw; w++) {
                        const int u = u0 + w, i = u * LPB + r;
                        const int64_t j = 32 * (int64_t)u + b * LPB + r;
                        const int64_t at = atw_vat<D>(kk, NR, 0) + atw_vrow(w, r, LPB) * D + d;
                        const uint16_t *vp = rd(k, (int64_t)W.ring + 2 * at, 1, kvo + j * kvd + d, "V");
                        if (d == 0 && cnt_v) cnt_v[j]++;
                        if (!e->values) continue;
                        const float v = h2f(*vp), *e4 = es + (int64_t)i * STK_GB;
                        for (int g = 0; g < nhb; g++)
                            p[g] = fp4p_add(p[g], fp4p_mul(e4[g], v));
                    }
                }
            }
        }
        if (k->nq) /* the strips go over the ring's first bytes: no copy may still be in flight */
            EMU_ERR("cs %d pos %lld: the strips written over the ring with %d copies in flight\n", CS,
                    (long long)pos, k->nq);
        float *part = (float *)(k->sm + W.part), *denp = (float *)(k->sm + W.denp);
        for (int r = 0; r < LPB; r++) {
            for (int d = 0; d < D; d++)
                for (int g = 0; g < STK_GB; g++)
                    part[(r * STK_GB + g) * D + d] = pa[(r * D + d) * STK_GB + g];
            for (int g = 0; g < STK_GB; g++)
                denp[r * STK_GB + g] = g < nhb ? da[r * STK_GB + g] : 0.0f;
        }
        free(pa), free(da);
    }
#undef POS
    if (e->values)
        for (int idx = 0; idx < nhb * D; idx++) {
            const int g = idx / D, d = idx - g * D;
            float v[STK_LANES], w[STK_LANES];
            for (int l = 0; l < STK_LANES; l++) {
                const blk *k = &bk[l / LPB];
                v[l] = ((const float *)(k->sm + W.part))[((l % LPB) * STK_GB + g) * D + d];
                w[l] = ((const float *)(k->sm + W.denp))[(l % LPB) * STK_GB + g];
            }
            o[((int64_t)c * e->NH + h0 + g) * D + d] = fp4p_div(butterfly32(v), butterfly32(w));
        }
    for (int b = 0; b < CS; b++)
        blk_free(&bk[b]);
}

/* the kernel's o-strip threads (r, DPT dimensions) over their sets cover every (lane r < LPB, dimension)
 * once; the den threads (r, dp < STK_GB) every (r, g); the block rows of ncol columns every (column,
 * head) once */
template <int CS, int D, int DPT = 2> static int64_t wide_threads(int NH, int NKV, int ncol) {
    constexpr int LPB = 32 / CS, NDT = D / DPT, PR = ATT_CL_THREADS / NDT, NSET = (LPB + PR - 1) / PR;
    int cov[32][D] = {}, dcov[32][STK_GB] = {};
    for (int tid = 0; tid < ATT_CL_THREADS; tid++) {
        const int pr = tid / NDT, dp = tid - pr * NDT;
        for (int q2 = 0; q2 < NSET; q2++) {
            const int r = pr + q2 * PR;
            if (r >= LPB) continue;
            for (int x = 0; x < DPT; x++)
                cov[r][DPT * dp + x]++;
            if (dp < STK_GB) dcov[r][dp]++;
        }
    }
    int64_t bad = 0;
    for (int r = 0; r < LPB; r++) {
        for (int d = 0; d < D; d++)
            bad += cov[r][d] != 1;
        for (int g = 0; g < STK_GB; g++)
            bad += dcov[r][g] != 1;
    }
    const int G = NH / NKV, ngb = (G + STK_GB - 1) / STK_GB;
    int *hc = (int *)calloc((size_t)(ncol * NH), sizeof(int));
    for (int y = 0; y < (int)stk_att_groups(ncol, NH, NKV); y++) {
        int c, hk, h0, nhb;
        atw_group(y, NH, NKV, &c, &hk, &h0, &nhb);
        if (c < 0 || c >= ncol || nhb < 1 || h0 + nhb > NH || ngb < 1) {
            bad++;
            continue;
        }
        for (int g = 0; g < nhb; g++)
            hc[c * NH + h0 + g] += (h0 + g) / G == hk;
    }
    for (int x = 0; x < ncol * NH; x++)
        bad += hc[x] != 1;
    free(hc);
    if (bad)
        EMU_ERR(
            "wide: clusters of %d, d %d, %d a thread, %d/%d heads, %d columns: thread or group coverage\n",
            CS, D, DPT, NH, NKV, ncol);
    return bad;
}

/* one launch of ncol columns (slot c + 1 each, positions ps): values mode compares every head of every
 * column with fp4p_attend; layout mode replays group 0 of column 0 only, with the coverage counts */
template <int CS, int D, int NR>
static int64_t wide_case(const emu *e0, int ncol, const int64_t *ps, int values) {
    emu e = *e0;
    e.values = values;
    const atw_layout W = atw_layout_of(e.n_ctx, D, CS, NR);
    if (W.bytes > ATS_MAX_SMEM) return 0;
    const int NH = e.NH, G = NH / e.NKV;
    int64_t slots[8], poss[8];
    for (int c = 0; c < ncol; c++)
        slots[c] = c + 1, poss[c] = ps[c] < e.n_ctx ? ps[c] : e.n_ctx - 1;
    float *o = (float *)malloc(sizeof(float) * (size_t)(ncol * NH * D));
    for (int x = 0; x < ncol * NH * D; x++)
        o[x] = NAN;
    int *cs = (int *)calloc((size_t)e.n_ctx, sizeof(int)), *cv = (int *)calloc((size_t)e.n_ctx, sizeof(int));
    const long long err0 = n_err;
    const int ny = values ? (int)stk_att_groups(ncol, NH, e.NKV) : 1;
    for (int y = 0; y < ny; y++)
        emu_wide<CS, D, NR>(&e, y, slots, poss, o, y == 0 ? cs : NULL, y == 0 ? cv : NULL);
    for (int64_t j = 0; j < e.n_ctx; j++)
        if (cs[j] != (j <= poss[0]) || cv[j] != (j <= poss[0]))
            EMU_ERR("wide ctx %lld cs %d nr %d pos %lld: position %lld scored %d times, its V row read %d "
                    "times\n",
                    (long long)e.n_ctx, CS, NR, (long long)poss[0], (long long)j, cs[j], cv[j]);
    int64_t bad = 0;
    if (values) {
        float *want = (float *)malloc(sizeof(float) * (size_t)D),
              *sb = (float *)malloc(sizeof(float) * (size_t)e.n_ctx);
        for (int c = 0; c < ncol; c++)
            for (int h = 0; h < NH; h++) {
                const int64_t at = slots[c] * e.slot_stride + (h / G) * D;
                fp4p_attend(e.q + c * e.q_cs + h * D, e.kc + at, e.vc + at, e.kvd, poss[c] + 1, D, e.scale,
                            sb, want);
                for (int d = 0; d < D; d++)
                    bad += fp4p_bits(want[d]) != fp4p_bits(o[((int64_t)c * NH + h) * D + d]);
            }
        free(want), free(sb);
        printf("wide: d %3d heads %2d/%d ctx %5lld cluster %2d ring %d smem %6zu, %d columns at", D, NH,
               e.NKV, (long long)e.n_ctx, CS, NR, W.bytes, ncol);
        for (int c = 0; c < ncol; c++)
            printf(" %lld", (long long)poss[c]);
        printf(": %lld of %d differ%s\n", (long long)bad, ncol * NH * D,
               n_err > err0 ? " (layout errors)" : "");
    }
    free(o), free(cs), free(cv);
    return bad + (n_err > err0);
}

/* layout mode of every wide instance at every position of n_ctx (step past the ends) */
template <int D> static int64_t wide_layout_all(int64_t n_ctx, int step) {
    emu e;
    uint16_t *kc, *vc;
    float *q;
    emu_make(&e, D, 8, 2, n_ctx, &kc, &vc, &q, 2, 1);
    int64_t bad = 0, cases = 0;
    for (int64_t p = 0; p < n_ctx; p += (p < 300 || p > n_ctx - 300 ? 1 : step)) {
        bad += wide_case<2, D, 4>(&e, 1, &p, 0) + wide_case<4, D, 5>(&e, 1, &p, 0) +
               wide_case<8, D, 6>(&e, 1, &p, 0) + wide_case<16, D, 6>(&e, 1, &p, 0) +
               wide_case<4, D, 3>(&e, 1, &p, 0);
        cases++;
    }
    printf("wide layout: d %3d ctx %5lld, %lld positions x (cluster, ring) 2/4, 4/5, 8/6, 16/6, 4/3 "
           "(%zu/%zu/%zu/%zu/%zu bytes): %lld failed\n",
           D, (long long)n_ctx, (long long)cases, atw_layout_of(n_ctx, D, 2, 4).bytes,
           atw_layout_of(n_ctx, D, 4, 5).bytes, atw_layout_of(n_ctx, D, 8, 6).bytes,
           atw_layout_of(n_ctx, D, 16, 6).bytes, atw_layout_of(n_ctx, D, 4, 3).bytes, (long long)bad);
    free(kc), free(vc), free(q);
    return bad;
}

/* the wide mode: thread and group coverage, layouts at every position, values of 1-8 columns */
static int64_t wide_main(int quick) {
    int64_t bad = 0;
    const size_t two = (228 * 1024) / 2 - 1024 - 128; /* 2 blocks per SM */
    static const int cfg[5][2] = {{2, 4}, {4, 5}, {8, 6}, {16, 6}, {4, 3}};
    for (int x = 0; x < 5; x++) {
        int64_t top = 0;
        for (int64_t c = 32; c <= 65536; c += 32)
            if (atw_layout_of(c, 128, cfg[x][0], cfg[x][1]).bytes <= two) top = c;
        printf(
            "wide: d 128, clusters of %2d, ring %d: 2 blocks per SM up to n_ctx %lld (%zu bytes at 4096, %zu "
            "at 512)\n",
            cfg[x][0], cfg[x][1], (long long)top, atw_layout_of(4096, 128, cfg[x][0], cfg[x][1]).bytes,
            atw_layout_of(512, 128, cfg[x][0], cfg[x][1]).bytes);
    }
    for (int ncol = 1; ncol <= 8; ncol *= 2)
        bad += wide_threads<2, 128>(32, 8, ncol) + wide_threads<4, 128>(32, 8, ncol) +
               wide_threads<8, 128>(32, 8, ncol) + wide_threads<16, 128>(32, 8, ncol) +
               wide_threads<4, 64>(28, 4, ncol) + wide_threads<2, 64>(4, 2, ncol) +
               wide_threads<4, 128, 4>(32, 8, ncol) + wide_threads<2, 128, 4>(32, 8, ncol);
    bad += wide_layout_all<128>(512, 1);
    bad += wide_layout_all<128>(4096, quick ? 61 : 7);
    if (!quick) {
        bad += wide_layout_all<128>(1300, 1);
        bad += wide_layout_all<128>(8192, 29);
        bad += wide_layout_all<64>(700, 1);
    }
    { /* values, the lab's shape: 8 KV heads of 4 query heads, head_dim 128, n_ctx 4096, 8 slots */
        emu e;
        uint16_t *kc, *vc;
        float *q;
        emu_make(&e, 128, 32, 8, 4096, &kc, &vc, &q, 9, 8);
        static const int64_t p8a[8] = {0, 1, 31, 32, 63, 64, 511, 767},
                             p8b[8] = {1023, 2047, 2111, 3967, 4095, 255, 256, 100},
                             p8c[8] = {511, 512, 513, 514, 515, 516, 517, 518}, p4a[4] = {0, 33, 511, 4095},
                             p4b[4] = {1023, 2047, 3967, 64}, p2a[2] = {511, 3967}, p2b[2] = {0, 4095},
                             p1[1] = {2049};
        bad += wide_case<4, 128, 5>(&e, 8, p8a, 1) + wide_case<2, 128, 4>(&e, 8, p8a, 1);
        if (!quick)
            bad += wide_case<4, 128, 5>(&e, 8, p8b, 1) + wide_case<2, 128, 4>(&e, 8, p8b, 1) +
                   wide_case<4, 128, 3>(&e, 8, p8c, 1) + wide_case<8, 128, 6>(&e, 8, p8c, 1) +
                   wide_case<8, 128, 6>(&e, 4, p4a, 1) + wide_case<8, 128, 6>(&e, 4, p4b, 1) +
                   wide_case<4, 128, 5>(&e, 4, p4b, 1) + wide_case<16, 128, 6>(&e, 2, p2a, 1) +
                   wide_case<16, 128, 6>(&e, 2, p2b, 1) + wide_case<8, 128, 6>(&e, 2, p2a, 1) +
                   wide_case<16, 128, 6>(&e, 1, p1, 1) + wide_case<4, 128, 3>(&e, 4, p4b, 1);
        free(kc), free(vc), free(q);
    }
    if (!quick) { /* a partial head group (G 7), head_dim 64, n_ctx 8192 */
        emu e;
        uint16_t *kc, *vc;
        float *q;
        static const int64_t pa[3] = {5, 700, 1299}, pb[4] = {0, 64, 1298, 1299}, pc[2] = {4097, 8191};
        emu_make(&e, 128, 28, 4, 1300, &kc, &vc, &q, 4, 3);
        bad += wide_case<4, 128, 5>(&e, 3, pa, 1) + wide_case<8, 128, 6>(&e, 3, pa, 1);
        free(kc), free(vc), free(q);
        emu_make(&e, 64, 4, 2, 1300, &kc, &vc, &q, 5, 4);
        bad += wide_case<4, 64, 5>(&e, 4, pb, 1) + wide_case<2, 64, 4>(&e, 4, pb, 1);
        free(kc), free(vc), free(q);
        emu_make(&e, 128, 8, 2, 8192, &kc, &vc, &q, 3, 2);
        bad += wide_case<4, 128, 5>(&e, 2, pc, 1);
        free(kc), free(vc), free(q);
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "wide")) { /* attn_stage_emul wide [quick] */
        const int64_t bad = wide_main(argc > 2 && !strcmp(argv[2], "quick"));
        printf(bad || n_err
                   ? "FAIL: %lld wide cases failed, %lld layout errors\n"
                   : "wide: all outputs bit-identical to fp4p_attend, every read as meant (%lld, %lld)\n",
               (long long)bad, n_err);
        return bad || n_err;
    }
    const int quick = argc > 1 && !strcmp(argv[1], "quick");
    int64_t bad = 0;
    /* 2 blocks per SM: 228 KB a SM, 1 KB reserved a block, 128 bytes of static shared memory */
    const size_t two = (228 * 1024) / 2 - 1024 - 128;
    for (int cs = 16; cs >= 2; cs /= 2) {
        int64_t top = 0;
        for (int64_t c = 32; c <= 65536; c += 32)
            if (ats_layout_of(c, 128, cs).bytes <= two) top = c;
        printf("d 128, clusters of %2d: 2 blocks per SM up to n_ctx %lld (%zu bytes at 4096, %zu at 512)\n",
               cs, (long long)top, ats_layout_of(4096, 128, cs).bytes, ats_layout_of(512, 128, cs).bytes);
    }
    /* layout: every position at n_ctx 512 and 4096 (d 128), odd n_ctx and head dims */
    bad += layout_all<128>(512, 1);
    bad += layout_all<128>(4096, quick ? 61 : 1);
    if (!quick) {
        bad += layout_all<128>(1024, 1); /* attn_lab's variant 15 sizes by these buckets */
        bad += layout_all<128>(2048, 1);
        bad += layout_all<128>(4100, 7);
        bad += layout_all<128>(8192, 13);
        bad += layout_all<128>(100, 1);
        bad += layout_all<64>(4096, 3);
        bad += layout_all<64>(1300, 1);
        bad += layout_all<32>(2100, 1);
    }
    /* values: every head against fp4p_attend */
    static const int64_t ps[] = {0,   1,   31,   32,   33,   63,   64,   65,  255,
                                 256, 511, 1023, 1024, 2047, 2111, 3967, 4095};
    static const int64_t pq[] = {0, 33, 2111, 4095};
    bad += values_at<128>(32, 8, 4096, quick ? pq : ps, quick ? 4 : 17, quick ? 16 | 1 : 16 | 8 | 1);
    if (!quick) {
        static const int64_t p2[] = {0, 5, 64, 700, 1299};
        bad += values_at<128>(28, 4, 1300, p2, 5, 16 | 8 | 4); /* G 7: a partial head group */
        bad += values_at<64>(4, 2, 1300, p2, 5, 16 | 8 | 4 | 2);
        bad += values_at<32>(2, 2, 700, p2, 5, 16 | 2);
        static const int64_t p3[] = {4097, 8191};
        bad += values_at<128>(8, 2, 8192, p3, 2, 16);
    }
    printf(bad || n_err ? "FAIL: %lld cases failed, %lld layout errors\n"
                        : "all outputs bit-identical to fp4p_attend, every read as meant (%lld, %lld)\n",
           (long long)bad, n_err);
    return bad || n_err;
}
