/* prefix.c — the prefix cache (fp4lane_runtime.h, "Generation"): the KV rows of prompt prefixes,
 * kept in blocks of the engine's KV block size, reused by a later request whose prompt starts with
 * the same tokens. A block's key is SHA-256 over the engine's KV identity (kv.c: weights, lane,
 * mode, KV dtype, RoPE, and device and revision in native mode), the block size, the previous
 * block's key and the block's token ids: a key names the whole prefix up to the block's end, and
 * two engines whose caches would hold other numbers never share a key (one cache may serve
 * several engines). Rows at positions below p depend only on the tokens below p, and exact mode's
 * rows do not depend on the chunking or the batch that computed them (docs/SPEC.md), so a request
 * whose prefix is loaded computes the same bits as one that prefills it.
 *
 * A load copies the blocks into the request's sequence (kv_write) and leaves at least the prompt's
 * last token to compute (its logits start the answer); a store copies a sequence's whole prompt
 * blocks out (kv_read) once its prompt has been fed. Least recently used blocks go first. */
#include "runtime/rt_impl.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pblock {
    uint8_t key[32];
    uint64_t used;   /* the cache's clock at the last load or store that touched it */
    int64_t depth;   /* its index in its prompt: the deeper of two as old goes first   */
    uint16_t *k, *v; /* [layer][block][NKV*D] halves each                             */
    size_t halves;
} pblock;

/* The rows of a load or a store pass through one scratch pair kept for the cache's life, and an
 * evicted block's buffers take the next block stored: a store into a full cache allocates nothing,
 * where fresh buffers each time cost page faults and unmaps (tens of milliseconds a request at an
 * 8B model's 128 KiB a position, every running stream waiting for them). */
struct fp4_prefix_cache {
    pthread_mutex_t mu;  /* the blocks and the stats                                         */
    pthread_mutex_t smu; /* the scratch (taken before mu): one load or store at a time uses it */
    pblock *b;
    int64_t n, cap;
    uint64_t clock;
    fp4_prefix_stats st;
    uint16_t *sk, *sv; /* [layer][position][NKV*D] of the load or store at hand              */
    size_t s_halves;
};

fp4_status fp4_prefix_cache_create(int64_t max_blocks, fp4_prefix_cache **out, fp4_error *err) {
    if (!out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "prefix.arg", "NULL");
    *out = NULL;
    if (max_blocks < 1 || max_blocks > (1 << 24))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "prefix.blocks", "%lld blocks: 1 to 2^24",
                        (long long)max_blocks);
    fp4_prefix_cache *c = calloc(1, sizeof *c);
    if (c) c->b = calloc((size_t)max_blocks, sizeof *c->b);
    if (!c || !c->b) {
        free(c);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "prefix.nomem", "out of memory");
    }
    c->cap = max_blocks;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->smu, NULL);
    *out = c;
    return FP4_OK;
}

void fp4_prefix_cache_free(fp4_prefix_cache *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->n; i++)
        free(c->b[i].k), free(c->b[i].v);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->smu);
    free(c->sk), free(c->sv), free(c->b), free(c);
}

fp4_prefix_stats fp4_prefix_cache_stats(fp4_prefix_cache *c) {
    fp4_prefix_stats st = {0};
    if (!c) return st;
    pthread_mutex_lock(&c->mu);
    st = c->st;
    st.blocks = c->n, st.max_blocks = c->cap;
    pthread_mutex_unlock(&c->mu);
    return st;
}

/* key of block i from the key of block i - 1 (i == 0: none) */
static int block_key(const fp4_rt *rt, int64_t B, const uint8_t *prev, const int32_t *ids, uint8_t key[32]) {
    fp4_sha256 h;
    if (fp4_sha256_init(&h)) return -1;
    uint8_t b[8];
    fp4_sha256_update(&h, "fp4lane-prefix-v1", 17);
    fp4_sha256_update(&h, fp4_rt_identity(rt), 64);
    fp4_wr_le64(b, (uint64_t)B);
    fp4_sha256_update(&h, b, 8);
    static const uint8_t none[32];
    fp4_sha256_update(&h, prev ? prev : none, 32);
    for (int64_t i = 0; i < B; i++) {
        fp4_wr_le32(b, (uint32_t)ids[i]);
        fp4_sha256_update(&h, b, 4);
    }
    fp4_sha256_final(&h, key);
    return 0;
}

static pblock *find(fp4_prefix_cache *c, const uint8_t key[32]) {
    for (int64_t i = 0; i < c->n; i++)
        if (!memcmp(c->b[i].key, key, 32)) return &c->b[i];
    return NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* under smu: the scratch holds at least halves halves each for K and V; 0 or -1 (out of memory) */
static int scratch(fp4_prefix_cache *c, size_t halves) {
    if (halves <= c->s_halves) return 0;
    free(c->sk), free(c->sv);
    c->sk = malloc(sizeof(uint16_t) * halves), c->sv = malloc(sizeof(uint16_t) * halves);
    c->s_halves = c->sk && c->sv ? halves : 0;
    return c->s_halves ? 0 : -1;
}

/* the identity (hashed once per engine) or NULL when it could not be computed */
static int identity_ok(const fp4_rt *rt) {
    return strlen(fp4_rt_identity(rt)) == 64;
}

int64_t fp4_prefix_cache_load(fp4_prefix_cache *c, fp4_rt *rt, int32_t seq, const int32_t *ids, int64_t n) {
    if (!c || !rt || !ids || fp4_rt_seq_pos(rt, seq) != 0 || !identity_ok(rt)) return 0;
    const int64_t B = fp4_rt_kv_blocks(rt, NULL, NULL), kvd = fp4_arch_kv_dim(&rt->arch),
                  nl = rt->arch.n_layers;
    const double t0 = now_s();
    pthread_mutex_lock(&c->smu);
    pthread_mutex_lock(&c->mu);
    c->st.lookups++;
    int64_t nb = 0;
    uint8_t key[32], prev[32];
    pblock **hit = malloc(sizeof *hit * (size_t)(n / B + 1));
    /* whole blocks, the prompt's last token left to compute */
    while (hit && (nb + 1) * B <= n - 1 && !block_key(rt, B, nb ? prev : NULL, ids + nb * B, key)) {
        pblock *p = find(c, key);
        if (!p || p->halves != (size_t)(nl * B * kvd)) break;
        hit[nb++] = p;
        memcpy(prev, key, 32);
    }
    const int64_t m = nb * B;
    const int have = m && !scratch(c, (size_t)(nl * m * kvd));
    uint16_t *k = have ? c->sk : NULL, *v = have ? c->sv : NULL;
    if (k && v) {
        c->clock++;
        for (int64_t j = 0; j < nb; j++) {
            hit[j]->used = c->clock;
            for (int64_t L = 0; L < nl; L++) {
                const size_t at = (size_t)((L * m + j * B) * kvd), from = (size_t)(L * B * kvd);
                memcpy(k + at, hit[j]->k + from, sizeof(uint16_t) * (size_t)(B * kvd));
                memcpy(v + at, hit[j]->v + from, sizeof(uint16_t) * (size_t)(B * kvd));
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    int64_t got = 0;
    if (k && v && rt->be->kv_write(rt->be_state, seq, m, k, v) == FP4_OK) {
        fp4_rt_seq_set_pos(rt, seq, m);
        got = m;
    }
    free(hit);
    pthread_mutex_lock(&c->mu);
    if (got) c->st.hits++, c->st.reused_tokens += got;
    c->st.load_seconds += now_s() - t0;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->smu);
    return got;
}

/* a free entry, or the least recently used one emptied (of those, the deepest: a block is
 * useless without the blocks before it, so a prompt's chain is cut from its end), with buffers of
 * halves halves each for K and V: the evicted block's where they fit, else new ones; NULL when
 * out of memory */
static pblock *take_slot(fp4_prefix_cache *c, size_t halves) {
    pblock *old = NULL;
    if (c->n == c->cap) {
        old = &c->b[0];
        for (int64_t i = 1; i < c->n; i++)
            if (c->b[i].used < old->used || (c->b[i].used == old->used && c->b[i].depth > old->depth))
                old = &c->b[i];
    }
    uint16_t *k = NULL, *v = NULL;
    if (old && old->halves == halves)
        k = old->k, v = old->v, c->st.recycled++;
    else {
        k = malloc(sizeof(uint16_t) * halves), v = malloc(sizeof(uint16_t) * halves);
        if (!k || !v) return free(k), free(v), NULL;
        if (old) free(old->k), free(old->v);
    }
    if (old)
        c->st.evicted++;
    else
        old = &c->b[c->n++];
    memset(old, 0, sizeof *old);
    old->k = k, old->v = v, old->halves = halves;
    return old;
}

void fp4_prefix_cache_store(fp4_prefix_cache *c, fp4_rt *rt, int32_t seq, const int32_t *ids, int64_t n) {
    if (!c || !rt || !ids || fp4_rt_seq_pos(rt, seq) < n || !identity_ok(rt)) return;
    const int64_t B = fp4_rt_kv_blocks(rt, NULL, NULL), kvd = fp4_arch_kv_dim(&rt->arch),
                  nl = rt->arch.n_layers;
    int64_t nb = n / B < c->cap ? n / B : c->cap; /* the blocks past the cache's size would evict its head */
    if (nb < 1) return;
    uint8_t(*keys)[32] = malloc(32 * (size_t)nb);
    if (!keys) return;
    int64_t first = -1;
    const double t0 = now_s();
    pthread_mutex_lock(&c->smu);
    pthread_mutex_lock(&c->mu);
    c->clock++;
    for (int64_t j = 0; j < nb; j++) {
        if (block_key(rt, B, j ? keys[j - 1] : NULL, ids + j * B, keys[j])) {
            nb = j;
            break;
        }
        pblock *p = find(c, keys[j]);
        if (p)
            p->used = c->clock;
        else if (first < 0)
            first = j;
    }
    pthread_mutex_unlock(&c->mu);
    const int64_t m = nb * B;
    const int have = first >= 0 && !scratch(c, (size_t)(nl * m * kvd));
    uint16_t *k = have ? c->sk : NULL, *v = have ? c->sv : NULL;
    if (k && v && rt->be->kv_read(rt->be_state, seq, m, k, v) == FP4_OK) {
        pthread_mutex_lock(&c->mu);
        for (int64_t j = first; j < nb; j++) {
            if (find(c, keys[j])) continue;
            pblock *p = take_slot(c, (size_t)(nl * B * kvd));
            if (!p) break;
            for (int64_t L = 0; L < nl; L++) {
                const size_t at = (size_t)(L * B * kvd), from = (size_t)((L * m + j * B) * kvd);
                memcpy(p->k + at, k + from, sizeof(uint16_t) * (size_t)(B * kvd));
                memcpy(p->v + at, v + from, sizeof(uint16_t) * (size_t)(B * kvd));
            }
            memcpy(p->key, keys[j], 32);
            p->used = c->clock, p->depth = j;
            c->st.stored_blocks++;
        }
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&c->mu);
    c->st.store_seconds += now_s() - t0;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->smu);
    free(keys);
}
