/* rt_data.h — test support shared by the CPU runtime tests and the GPU runtime test (linked into
 * both; C, callable from C++): transformers' reference data (.npy logits, token ids) and the W4A4
 * twin of an NVFP4 checkpoint. */
#ifndef RT_DATA_H
#define RT_DATA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* float64 .npy [rows, cols] (C order, format version 1); malloc'd, NULL when absent or another shape */
double *rtd_read_npy_f64(const char *path, int64_t rows, int64_t cols);
/* comma-separated token ids; returns how many were read (at most max) */
int rtd_read_ids(const char *path, int32_t *ids, int max);
/* A W4A4 twin of an NVFP4 checkpoint: every linear gets an input_scale (ModelOpt spelling) and the
 * config says quant_algo NVFP4 with input activations. 0 on success. */
int rtd_add_input_scales(const char *src_dir, const char *dst_dir);

#ifdef __cplusplus
}
#endif

#endif
