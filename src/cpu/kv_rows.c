/* kv_rows.c — where the CPU backend keeps each layer's K/V rows in a slot: n_ctx rows for a
 * global layer, 2R for a local layer's ring (backend.h, fp4_rt_kv_ring: position p at rows p % R
 * and p % R + R, so a window is one run of rows and fp4p_attend reads it as it reads a global
 * layer's prefix). Positions keep their order inside the run, so the attention's bits do not
 * depend on the ring. */
#include "cpu/cpu_impl.h"
#include "backend/backend.h"
#include <stdlib.h>
#include <string.h>

fp4_status fp4_kv_rows_init(fp4_kv_rows *r, const fp4_arch *a, int64_t n_ctx, int64_t max_cols) {
    memset(r, 0, sizeof *r);
    r->off = malloc(sizeof *r->off * (size_t)(a->n_layers + 1));
    r->ring = malloc(sizeof *r->ring * (size_t)a->n_layers);
    if (!r->off || !r->ring) return FP4_ERR_NOMEM;
    int64_t rows = 0;
    for (int64_t L = 0; L < a->n_layers; L++) {
        r->off[L] = rows;
        r->ring[L] = fp4_rt_kv_ring(a, L, n_ctx, max_cols);
        if (__builtin_add_overflow(rows, r->ring[L] ? 2 * r->ring[L] : n_ctx, &rows)) return FP4_ERR_OVERFLOW;
    }
    r->off[a->n_layers] = rows;
    r->stride = rows;
    return FP4_OK;
}

void fp4_kv_rows_free(fp4_kv_rows *r) {
    free(r->off), free(r->ring);
    memset(r, 0, sizeof *r);
}

/* the window position pos reads in layer L: its first row (from the slot's start) and length */
void fp4_kv_window(const fp4_kv_rows *r, const fp4_arch *a, int64_t L, int64_t pos, int64_t *row0,
                   int64_t *n) {
    const int64_t first =
        fp4_arch_layer_local(a, L) && pos >= a->sliding_window ? pos - a->sliding_window + 1 : 0;
    *n = pos - first + 1;
    *row0 = r->off[L] + (r->ring[L] ? first % r->ring[L] : first);
}

/* values [i0, i0 + n) of one position's row written to its place(s) */
void fp4_kv_put(const fp4_kv_rows *r, int64_t L, int64_t pos, uint16_t *slot_base, int64_t kvd, int64_t i0,
                const uint16_t *src, int64_t n) {
    const int64_t R = r->ring[L], at = r->off[L] + (R ? pos % R : pos);
    memcpy(slot_base + at * kvd + i0, src, sizeof(uint16_t) * (size_t)n);
    if (R) memcpy(slot_base + (at + R) * kvd + i0, src, sizeof(uint16_t) * (size_t)n);
}

/* positions [0, n_pos) of one slot to / from host rows [layer][pos][kvd]. A ring layer gives its
 * last sliding_window positions (what a later step reads) and zeros before them, and takes back
 * the same positions. */
void fp4_kv_copy(const fp4_kv_rows *r, const fp4_arch *a, uint16_t *slot_base, int64_t n_pos, int64_t kvd,
                 uint16_t *host, int to_host) {
    for (int64_t L = 0; L < a->n_layers; L++) {
        uint16_t *h = host + L * n_pos * kvd;
        const int64_t R = r->ring[L];
        if (!R) {
            uint16_t *c = slot_base + r->off[L] * kvd;
            if (to_host)
                memcpy(h, c, sizeof(uint16_t) * (size_t)(n_pos * kvd));
            else
                memcpy(c, h, sizeof(uint16_t) * (size_t)(n_pos * kvd));
            continue;
        }
        const int64_t first = n_pos > a->sliding_window ? n_pos - a->sliding_window : 0;
        if (to_host) memset(h, 0, sizeof(uint16_t) * (size_t)(first * kvd));
        for (int64_t p = first; p < n_pos; p++) {
            if (to_host)
                memcpy(h + p * kvd, slot_base + (r->off[L] + p % R) * kvd, sizeof(uint16_t) * (size_t)kvd);
            else
                fp4_kv_put(r, L, p, slot_base, kvd, 0, h + p * kvd, kvd);
        }
    }
}
