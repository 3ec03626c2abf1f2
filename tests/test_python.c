/* test_python.c — runs the Python binding's unittest (tests/python/test_fp4lane.py) with Debian's
 * /usr/bin/python3 (python3-numpy) against this build's libfp4lane.so, and counts its tests in
 * this binary's "N passed, N failed" line: passed = run - failed, failed = failures + errors. The
 * test fails (never skips) when python3 or numpy is missing. In an AddressSanitizer build the
 * library needs the ASan runtime first in the process: it is preloaded (leak checks off: the
 * interpreter's own allocations are not ours). */
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FP4_PYTHON
#define FP4_PYTHON "/usr/bin/python3"
#endif

int main(void) {
    check_test_name = "python";
    const char *b = getenv("FP4_BUILD");
    if (!b || !*b) b = "build";
    char pre[700] = "";
#if defined(__SANITIZE_ADDRESS__)
    FILE *p = popen("${CC:-cc} -print-file-name=libasan.so", "r");
    char asan[512] = "";
    if (p) {
        if (!fgets(asan, sizeof asan, p)) asan[0] = 0;
        pclose(p);
    }
    asan[strcspn(asan, "\n")] = 0;
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0 ", asan);
#endif
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "FP4_BUILD='%s' FP4LANE_LIB='%s/libfp4lane.so' PYTHONPATH=python %s%s "
             "tests/python/test_fp4lane.py 2>&1",
             b, b, pre, FP4_PYTHON);
    FILE *f = popen(cmd, "r");
    CHECK_MSG(f != NULL, "cannot run %s", cmd);
    if (!f) return check_report();
    char line[4096];
    long run = -1, failed = -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "PYRESULT run=%ld failed=%ld", &run, &failed) == 2) continue;
        fputs(line, stderr); /* unittest's own report: shown when this test fails */
    }
    int rc = pclose(f);
    CHECK_MSG(run > 0 && failed >= 0, "no PYRESULT line from %s (exit %d): is python3-numpy installed?", cmd,
              rc);
    if (run > 0 && failed >= 0) {
        check_passed += run - failed;
        check_failed += failed;
        CHECK_MSG((rc == 0) == (failed == 0), "exit status %d with %ld failed", rc, failed);
    }
    return check_report();
}
