/* upload.cu — the CUDA backend's tensors on the device: their layout computed from the
 * descriptors alone (fp4_cu_step_stub, for the memory plan and the route the runtime is told), the
 * upload, and the fused q/k/v and gate/up tensors (step_impl.cuh declares what create.cu calls). */
#include "cuda/step/step_impl.cuh"
#include <string.h>

/* ---- tensor metadata as the upload will lay it out (no device memory) ---- */
static int64_t rows_of(const fp4_tensor *t) {
    int64_t r = 1;
    for (int i = 1; i < t->n_dims; i++)
        r *= t->ne[i];
    return r;
}
extern "C" {

int fp4_cu_step_stub(const fp4_tensor *t, fp4_cuda_tensor *o, uint64_t *bytes) {
    memset(o, 0, sizeof *o);
    if (!t || t->n_dims < 1) return -1;
    const int64_t n_in = t->ne[0], n_out = rows_of(t);
    o->type = t->type, o->n_in = n_in, o->n_out = n_out, o->k_pad = n_in;
    uint64_t b = 0;
    switch ((int)t->type) {
    case FP4_TYPE_NVFP4_E2M1:
        o->k_pad = (n_in + 255) / 256 * 256;
        o->payload_stride = o->k_pad / 2, o->scale_stride = o->k_pad / 16;
        o->scale2 = t->nvfp4.scale2, o->input_scale_inv = t->nvfp4.input_scale_inv;
        b = FP4_CU_ALIGN((uint64_t)o->payload_stride * n_out) +
            FP4_CU_ALIGN((uint64_t)o->scale_stride * n_out);
        break;
    case FP4_TYPE_F16:
    case FP4_TYPE_BF16:
        o->payload_stride = 2 * n_in, b = FP4_CU_ALIGN((uint64_t)o->payload_stride * n_out);
        break;
    case FP4_TYPE_Q4_K:
        o->payload_stride = n_in / 256 * 144, b = FP4_CU_ALIGN((uint64_t)o->payload_stride * n_out);
        break;
    case FP4_TYPE_F8_E4M3FN: /* widened to bf16 rows + f32 row scales (fp4_cuda_tensor_upload_fp8) */
        o->payload_stride = 2 * n_in, o->scale_stride = 4, o->scale2 = t->fp8.scale;
        b = FP4_CU_ALIGN((uint64_t)o->payload_stride * n_out) + FP4_CU_ALIGN((uint64_t)4 * n_out);
        break;
    case FP4_TYPE_Q6_K:
        o->payload_stride = n_in / 256 * 210, b = FP4_CU_ALIGN((uint64_t)o->payload_stride * n_out);
        break;
    default:
        return -1;
    }
    if (bytes) *bytes = b;
    return 0;
}

/* native mode gives every W4A16 NVFP4 projection its frag copy (fp4_cuda_tensor_make_frag: the
 * tensor-core route at 2..8 columns, another 4.5 bits a weight of device memory) where steps of 2..8
 * columns are expected: engines of more than one sequence, or FP4LANE_CUDA_FRAG=1 (speculative
 * decoding's verify steps, say); FP4LANE_CUDA_NO_FRAG=1 never */
int fp4_cu_step_frag_wanted(const fp4_cu_env *env, fp4_mode mode, int64_t n_slots, int64_t type,
                            float input_scale_inv) {
    return mode == FP4_MODE_NATIVE && type == FP4_TYPE_NVFP4_E2M1 && !(input_scale_inv > 0.0f) &&
           (n_slots > 1 || env->frag) && !env->no_frag;
}

const char *fp4_cu_step_route(const fp4_tensor *w, fp4_mode mode) {
    fp4_cuda_tensor t;
    if (fp4_cu_step_stub(w, &t, NULL)) return NULL;
    if (mode == FP4_MODE_EXACT && (t.type == FP4_TYPE_Q4_K || t.type == FP4_TYPE_Q6_K))
        return NULL; /* ROUTES.md */
    const char *n = fp4_cuda_route_name(&t, mode, 1);
    return strcmp(n, "none") ? n : NULL;
}

/* sg: the engine's staging for NVFP4 views (fp4_cu_stager, device.cu: pinned buffers opened once for
 * the whole upload, the copies overlapped with the host's fills, every scale byte checked on the
 * device as it arrives) */
fp4_status fp4_cu_step_upload(fp4_cu_stager *sg, const fp4_tensor *t, fp4_cuda_tensor *o) {
    if (t->type == FP4_TYPE_NVFP4_E2M1) return fp4_cu_tensor_upload_nvfp4_staged(sg, &t->nvfp4, o);
    if (t->type == FP4_TYPE_F8_E4M3FN) return fp4_cuda_tensor_upload_fp8(t, o);
    return fp4_cu_tensor_upload_staged(sg, t->type, t->data, rows_of(t), t->ne[0], o);
}

/* ---- fused projections: q/k/v (group 0) and gate/up (group 1) share their input; when their
 * tensors have one type, one row length and (NVFP4) the same scale2 and input scale (ModelOpt's
 * fused quantization gives them one), they are uploaded as one tensor whose rows are theirs in
 * order, and one projection through the dispatch table computes all of them: every row's bits are
 * what its own tensor's projection gives (rows are independent in every route), in one launch
 * that fills the GPU where k and v alone do not. FP4LANE_CUDA_NO_FUSE=1 (no_fuse) keeps them apart. ---- */
static const int fuse_slots[2][3] = {{FP4_LW_Q, FP4_LW_K, FP4_LW_V}, {FP4_LW_GATE, FP4_LW_UP, -1}};

int fp4_cu_step_fuse_parts(const fp4_rt_model_desc *d, int no_fuse, int64_t L, int g,
                           const fp4_tensor **parts) {
    if (no_fuse) return 0;
    const int np = g ? 2 : 3;
    for (int i = 0; i < np; i++) {
        parts[i] = d->layer[L * FP4_LW_COUNT_ + fuse_slots[g][i]];
        if (!parts[i] || parts[i]->n_dims < 1) return 0;
    }
    for (int i = 1; i < np; i++) {
        const fp4_tensor *a = parts[0], *b = parts[i];
        if (a->type != b->type || a->ne[0] != b->ne[0]) return 0;
        if (a->type == FP4_TYPE_NVFP4_E2M1 &&
            (memcmp(&a->nvfp4.scale2, &b->nvfp4.scale2, sizeof(float)) ||
             memcmp(&a->nvfp4.input_scale_inv, &b->nvfp4.input_scale_inv, sizeof(float))))
            return 0;
    }
    return np;
}

/* the fused tensor's metadata as the upload will lay it out; 0 when the group is not fused */
int fp4_cu_step_fuse_stub(const fp4_rt_model_desc *d, int no_fuse, int64_t L, int g, fp4_cuda_tensor *o) {
    const fp4_tensor *parts[3];
    const int np = fp4_cu_step_fuse_parts(d, no_fuse, L, g, parts);
    if (!np || fp4_cu_step_stub(parts[0], o, NULL)) return 0;
    o->n_out = 0;
    for (int i = 0; i < np; i++)
        o->n_out += rows_of(parts[i]);
    return np;
}

/* NVFP4 parts go straight into the fused tensor's planes, each at its first row (the stub's layout:
 * one k_pad for every part); other types through a tensor of their own each, then copied */
static fp4_status upload_fused_nvfp4(fp4_cu_stager *sg, const fp4_tensor *const *parts, int np,
                                     fp4_cuda_tensor *o) {
    fp4_cuda_tensor t;
    if (fp4_cu_step_stub(parts[0], &t, NULL)) return FP4_ERR_INVALID_ARG;
    int64_t n_out = 0;
    for (int i = 0; i < np; i++) {
        if (parts[i]->nvfp4.n_out != rows_of(parts[i]) || parts[i]->nvfp4.n_in != t.n_in)
            return FP4_ERR_INVALID_ARG; /* the loader's views have their tensor's shape */
        n_out += rows_of(parts[i]);
    }
    const size_t pb = FP4_CU_ALIGN((size_t)t.payload_stride * (size_t)n_out);
    const size_t sb = FP4_CU_ALIGN((size_t)t.scale_stride * (size_t)n_out);
    void *arena = NULL;
    fp4_status st = FP4_OK;
    cudaError_t e = cudaMalloc(&arena, pb + sb);
    if (e == cudaSuccess) e = cudaMemsetAsync(arena, 0, pb + sb, sg->stream);
    if (e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaMalloc/cudaMemsetAsync(fused projection)");
    uint8_t *p = (uint8_t *)arena, *sc = p + pb;
    for (int64_t i = 0, r = 0; i < np && !st; r += rows_of(parts[i]), i++)
        st =
            fp4_cu_upload_nvfp4_into(sg, &parts[i]->nvfp4, p + r * t.payload_stride, (size_t)t.payload_stride,
                                     sc + r * t.scale_stride, (size_t)t.scale_stride);
    if (st) {
        if (arena) cudaStreamSynchronize(sg->stream), cudaFree(arena);
        return st;
    }
    t.n_out = n_out;
    t.d_payload = p;
    t.d_scales = sc;
    t.d_arena = arena;
    t.arena_bytes = pb + sb;
    *o = t;
    return FP4_OK;
}

fp4_status fp4_cu_step_upload_fused(fp4_cu_stager *sg, const fp4_tensor *const *parts, int np,
                                    fp4_cuda_tensor *o) {
    memset(o, 0, sizeof *o);
    if (parts[0]->type == FP4_TYPE_NVFP4_E2M1) return upload_fused_nvfp4(sg, parts, np, o);
    fp4_cuda_tensor t[3];
    memset(t, 0, sizeof t);
    fp4_status st = FP4_OK;
    int64_t n_out = 0;
    for (int i = 0; i < np && !st; i++)
        if (!(st = fp4_cu_step_upload(sg, parts[i], &t[i]))) n_out += t[i].n_out;
    for (int i = 1; i < np && !st; i++)
        if (t[i].payload_stride != t[0].payload_stride || t[i].scale_stride != t[0].scale_stride ||
            t[i].k_pad != t[0].k_pad || !t[i].d_scales != !t[0].d_scales)
            st = FP4_ERR_INVALID_ARG; /* cannot happen for one type and row length */
    void *arena = NULL;
    const size_t pb = FP4_CU_ALIGN((size_t)t[0].payload_stride * (size_t)n_out);
    const size_t sb = t[0].d_scales ? FP4_CU_ALIGN((size_t)t[0].scale_stride * (size_t)n_out) : 0;
    if (!st) {
        cudaError_t e = cudaMalloc(&arena, pb + sb);
        if (e == cudaSuccess) e = cudaMemset(arena, 0, pb + sb);
        for (int64_t i = 0, r = 0; i < np && e == cudaSuccess; r += t[i].n_out, i++) {
            e = cudaMemcpy((uint8_t *)arena + r * t[0].payload_stride, t[i].d_payload,
                           (size_t)(t[i].n_out * t[0].payload_stride), cudaMemcpyDeviceToDevice);
            if (e == cudaSuccess && sb)
                e = cudaMemcpy((uint8_t *)arena + pb + r * t[0].scale_stride, t[i].d_scales,
                               (size_t)(t[i].n_out * t[0].scale_stride), cudaMemcpyDeviceToDevice);
        }
        if (e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaMalloc/cudaMemcpy(fused projection)");
    }
    if (!st) {
        *o = t[0];
        o->n_out = n_out;
        o->d_payload = (const uint8_t *)arena;
        o->d_scales = sb ? (const uint8_t *)arena + pb : NULL;
        o->d_arena = arena;
        o->arena_bytes = pb + sb;
    } else if (arena)
        cudaFree(arena);
    for (int i = 0; i < np; i++)
        fp4_cuda_tensor_free(&t[i]);
    return st;
}

} /* extern "C" */
