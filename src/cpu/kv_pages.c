/* kv_pages.c — the CPU backend's paged KV cache. Each slot owns a range of address space reserved
 * for its whole context (no memory behind it), laid out [pos][layer][NKV*D] halves so that a
 * block of positions is one contiguous run of pages. A sequence commits a block when a step first
 * writes into it and gives every block back to the system when it ends or is cut (kv_trim), so
 * the memory held follows the tokens cached, block by block, not slots x context.
 *
 * Why reserved ranges rather than a pool of scattered blocks with a table: the attention kernels
 * walk a slot's positions at a fixed row stride; the positions stay contiguous in address space,
 * so the kernels (and every output bit) are the unpaged ones, only the stride changed. A block
 * that is not committed is PROT_NONE: a stray access past a sequence faults instead of reading
 * another request's rows. */
#include "cpu/cpu_impl.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define KV_BLOCK_MIN 16 /* positions per block at least (vLLM's default block)                  */

void fp4_kv_pages_free(fp4_kv_pages *p) {
    if (p->k && p->k != MAP_FAILED) munmap(p->k, p->map_bytes);
    if (p->v && p->v != MAP_FAILED) munmap(p->v, p->map_bytes);
    free(p->committed);
    *p = (fp4_kv_pages){0};
}

fp4_status fp4_kv_pages_init(fp4_kv_pages *p, int32_t n_slots, int64_t n_ctx, int64_t row_halves) {
    *p = (fp4_kv_pages){0};
    const long pg = sysconf(_SC_PAGESIZE);
    const uint64_t page = pg > 0 ? (uint64_t)pg : 4096, row_bytes = 2 * (uint64_t)row_halves;
    if (n_slots < 1 || n_ctx < 1 || row_halves < 1 || (page & (page - 1))) return FP4_ERR_INVALID_ARG;
    /* the fewest positions (>= KV_BLOCK_MIN) whose rows fill whole pages: page / gcd(page, row) */
    uint64_t g = page, r = row_bytes;
    while (r) {
        const uint64_t t = g % r;
        g = r, r = t;
    }
    uint64_t block = page / g < KV_BLOCK_MIN ? KV_BLOCK_MIN : page / g, slot_bytes, map;
    const uint64_t n_blocks = ((uint64_t)n_ctx + block - 1) / block;
    if (__builtin_mul_overflow(block, row_bytes, &p->block_bytes) ||
        __builtin_mul_overflow(n_blocks, (uint64_t)p->block_bytes, &slot_bytes) ||
        __builtin_mul_overflow(slot_bytes, (uint64_t)n_slots, &map) || map > SIZE_MAX / 2)
        return FP4_ERR_OVERFLOW;
    p->block = (int64_t)block, p->row = row_halves, p->n_slots = n_slots, p->max_blocks = (int64_t)n_blocks;
    p->slot_bytes = (size_t)slot_bytes, p->map_bytes = (size_t)map;
    p->committed = calloc((size_t)n_slots, sizeof *p->committed);
    p->k = mmap(NULL, p->map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    p->v = mmap(NULL, p->map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!p->committed || p->k == MAP_FAILED || p->v == MAP_FAILED) {
        fp4_kv_pages_free(p);
        return FP4_ERR_NOMEM;
    }
    return FP4_OK;
}

/* blocks [b0, b1) of a slot in both reservations: readable and writable, or back to the system
 * (a fresh PROT_NONE mapping over them drops their pages) */
static int set_blocks(fp4_kv_pages *p, int32_t slot, int64_t b0, int64_t b1, int commit) {
    const size_t off = (size_t)slot * p->slot_bytes + (size_t)b0 * p->block_bytes,
                 len = (size_t)(b1 - b0) * p->block_bytes;
    uint8_t *const bases[2] = {p->k, p->v};
    for (int i = 0; i < 2; i++) {
        void *a = bases[i] + off;
        if (commit ? mprotect(a, len, PROT_READ | PROT_WRITE) != 0
                   : mmap(a, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                          0) != a)
            return -1;
    }
    return 0;
}

fp4_status fp4_kv_pages_commit(fp4_kv_pages *p, int32_t slot, int64_t n_pos) {
    if (slot < 0 || slot >= p->n_slots || n_pos < 0) return FP4_ERR_INVALID_ARG;
    const int64_t want = (n_pos + p->block - 1) / p->block;
    if (want > p->max_blocks) return FP4_ERR_LIMIT;
    if (want <= p->committed[slot]) return FP4_OK;
    if (set_blocks(p, slot, p->committed[slot], want, 1)) return FP4_ERR_NOMEM;
    p->committed[slot] = want;
    return FP4_OK;
}

void fp4_kv_pages_trim(fp4_kv_pages *p, int32_t slot, int64_t n_pos) {
    if (slot < 0 || slot >= p->n_slots || n_pos < 0) return;
    const int64_t keep = (n_pos + p->block - 1) / p->block;
    if (keep >= p->committed[slot]) return;
    /* a failed release keeps the blocks committed (and counted): memory held, never unsafe */
    if (!set_blocks(p, slot, keep, p->committed[slot], 0)) p->committed[slot] = keep;
}

int64_t fp4_kv_pages_used(const fp4_kv_pages *p) {
    int64_t n = 0;
    for (int32_t i = 0; i < p->n_slots; i++)
        n += p->committed[i];
    return n;
}
