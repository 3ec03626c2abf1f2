/* test_isa_confined.c — the library runs on any x86-64: instructions beyond the baseline
 * (VEX/EVEX-encoded ones, ymm/zmm registers, AVX-512 mask registers) appear only in the
 * functions that cpu_path.c selects at run time, which are named *avx2* or *avx512*, and the
 * AVX2 ones use no AVX-512 state. Checked on the disassembly of $FP4_BUILD/libfp4lane.a (objdump
 * from binutils; a missing objdump is a failure). This machine has AVX-512, so the fallback
 * paths' choice rule is checked in test_cpu_paths (fp4_cpu_pick on a CPU without it) and their
 * bits by forcing each path there; this test checks that the fallback code itself needs no
 * more than the baseline ISA. */
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_wide(const char *line) {
    /* the mnemonic follows the address's tab */
    const char *t = strchr(line, '\t');
    if (!t) return 0;
    t++;
    while (*t == ' ')
        t++;
    if (t[0] == 'v' || !strncmp(t, "kmov", 4) || !strncmp(t, "kor", 3) || !strncmp(t, "kand", 4)) return 1;
    return strstr(line, "%ymm") || strstr(line, "%zmm") || strstr(line, "%k");
}

/* zmm registers, mask registers, or xmm/ymm 16..31 (EVEX only) */
static int is_avx512_state(const char *line) {
    if (strstr(line, "%zmm")) return 1;
    for (const char *p = line; (p = strchr(p, '%')) != NULL; p++) {
        if (p[1] == 'k' && p[2] >= '0' && p[2] <= '7') return 1;
        if ((p[1] == 'x' || p[1] == 'y') && p[2] == 'm' && p[3] == 'm' && atoi(p + 4) >= 16) return 1;
    }
    return 0;
}

int main(void) {
#if !defined(__x86_64__)
    printf("not an x86-64 build: no run-time-selected x86 paths to confine\n");
    return check_report();
#endif
    const char *build = getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s/libfp4lane.a' 2>/dev/null", build);
    FILE *f = popen(cmd, "r");
    CHECK_MSG(f != NULL, "cannot run objdump");
    if (!f) return check_report();
    char line[4096], fn[512] = "";
    long insns = 0, wide = 0, wide_outside = 0, avx512_in_avx2 = 0, functions = 0;
    int allowed = 0, avx2_fn = 0;
    while (fgets(line, sizeof line, f)) {
        const char *lt = strchr(line, '<');
        if (lt && strstr(line, ">:\n") && line[0] != ' ') {
            snprintf(fn, sizeof fn, "%s", lt + 1);
            allowed = strstr(fn, "avx2") || strstr(fn, "avx512");
            avx2_fn = strstr(fn, "avx2") != NULL;
            functions++;
            continue;
        }
        if (line[0] != ' ' || !strchr(line, '\t')) continue;
        insns++;
        if (!is_wide(line)) continue;
        wide++;
        if (!allowed) {
            wide_outside++;
            if (wide_outside <= 5) fprintf(stderr, "outside a run-time-selected function: %s %s", fn, line);
        } else if (avx2_fn && is_avx512_state(line)) {
            avx512_in_avx2++;
            if (avx512_in_avx2 <= 5) fprintf(stderr, "AVX-512 state in an AVX2 function: %s %s", fn, line);
        }
    }
    int rc = pclose(f);
    CHECK_MSG(rc == 0, "objdump failed (exit status %d): is binutils installed?", rc);
    CHECK_MSG(insns > 10000, "only %ld instructions disassembled", insns);
    CHECK_MSG(wide > 100, "only %ld wide instructions: the AVX2/AVX-512 paths are missing", wide);
    CHECK_EQ_INT(wide_outside, 0);
    CHECK_EQ_INT(avx512_in_avx2, 0);
    printf("%ld functions, %ld instructions, %ld beyond baseline x86-64, %ld of them outside *avx2*/*avx512* "
           "functions\n",
           functions, insns, wide, wide_outside);
    return check_report();
}
