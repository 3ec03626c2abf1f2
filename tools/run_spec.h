/* run_spec.h — `fp4lane run --draft DRAFT`: speculative decoding of one sequence (fp4_spec, see
 * fp4lane_runtime.h) with the run verb's outputs: the token callback, the logits rows, EOS, -n. */
#ifndef FP4_RUN_SPEC_H
#define FP4_RUN_SPEC_H

#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include "rt_cli.h"
#include <signal.h>

/* Text prompts: the draft's tokenizer must be the target's (the same ids, special tokens, BOS and
 * EOS); prints the refusal naming the first difference and returns 1, else 0. */
int run_spec_same_tokenizer(const char *draft, const fp4_tokenizer *target);

typedef struct run_spec {
    fp4_rt *target, *draft;
    int32_t tseq, dseq;
    int draft_n;
    fp4_sampler *smp;                                    /* the target's, told of the prompt already     */
    int (*token)(void *ctx, int32_t seq, int32_t token); /* run's callback: 1 stop, < 0 fails */
    void *token_ctx;
    rt_npy *npy; /* the target's logits rows, or NULL           */
    const int32_t *eos;
    int n_eos, ignore_eos;
    int64_t n_gen;
    volatile sig_atomic_t *interrupted;
    /* out */
    int64_t n_decode;
    double t_first; /* rt_cli_now() of the first token */
    fp4_spec_stats stats;
} run_spec;

/* Caches the prompt in the draft (the target's prefill is run's own). 0, or 1 (printed). */
int run_spec_prefill(run_spec *r, const int32_t *prompt, int64_t n);
/* Emits `first` (the target's pick after the prompt, as plain decoding does), then rounds until
 * -n, EOS, a stop or an interrupt. Returns the exit code (0, or 1 printed). */
int run_spec_decode(run_spec *r, const int32_t *prompt, int64_t n, int32_t first);

#endif
