/* hf_compare.h — test support for the runtime against transformers' reference logits
 * (tests/data/hf/, dev/ref/hf_reference.py): teacher-forced runs, the comparison with its printed
 * figures, and the positions a near routing tie leaves out. Linked into every test. */
#ifndef HF_COMPARE_H
#define HF_COMPARE_H

#include "fp4lane_runtime.h"
#include <stdint.h>

/* Teacher-forced logits of ids[0..n) in steps of `chunk` tokens, one sequence: out [n, vocab]. */
void hfc_run(const fp4_model *m, fp4_mode mode, int threads, int chunk, const int32_t *ids, int n,
             float *out);
/* CHECKs max |got - ref| <= tol x max |ref| over the positions not in skip[] (NULL: all); prints
 * the figures (max and mean |d|, argmax agreement). Returns max |d| / max |ref|. */
double hfc_compare(const char *what, const float *got, const double *ref, int n, int64_t V, double tol,
                   const int *skip);
/* routing_<kind>.json (per sparse layer: "gap" per position): marks in skip[] the positions whose gap
 * is below tie in any layer; returns how many it newly marked (-1: the file does not load). */
int hfc_near_ties(const char *path, int n, double tie, int *skip);
/* 1 when the file exists */
int hfc_exists(const char *path);

#endif
