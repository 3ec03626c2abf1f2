/* test_abi.c — fp4_abi_layout, the struct layouts the Python binding checks itself against when it
 * loads: every struct of the table is read from the public headers' text and must list the same
 * members in the same order (a member added to a header and not to the table fails here, one
 * added to the table and not to the binding fails the binding's import); offsets rise, members do
 * not overlap, and the closing row is sizeof. */
#include "check.h"
#include "fp4lane_runtime.h"
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *headers; /* the public headers the table's structs come from, concatenated */

static void load_headers(void) {
    static const char *const names[] = {"include/fp4lane.h", "include/fp4lane_runtime.h"};
    size_t total = 0;
    headers = calloc(1, 1);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = 0;
        char *t = (char *)check_slurp(names[i], &len);
        CHECK_MSG(t != NULL, "cannot read %s (run from the repository root)", names[i]);
        if (!t) continue;
        headers = realloc(headers, total + len + 1);
        memcpy(headers + total, t, len);
        total += len;
        headers[total] = 0;
        free(t);
    }
}

/* the member names of `typedef struct NAME { ... } NAME;` in declaration order, comments dropped */
static int header_members(const char *name, char names[][64], int cap) {
    char open[128];
    snprintf(open, sizeof open, "typedef struct %s {", name);
    const char *p = strstr(headers, open);
    if (!p) return -1;
    p += strlen(open);
    char closing[128];
    snprintf(closing, sizeof closing, "} %s;", name);
    const char *end = strstr(p, closing);
    if (!end) return -1;
    char *body = calloc(1, (size_t)(end - p) + 1);
    size_t k = 0;
    for (const char *q = p; q < end; q++) { /* comments and brackets out */
        if (q[0] == '/' && q[1] == '*') {
            const char *c = strstr(q + 2, "*/");
            q = c ? c + 1 : end;
        } else if (*q == '[') {
            while (q < end && *q != ']')
                q++;
        } else
            body[k++] = *q;
    }
    int n = 0;
    for (char *decl = strtok(body, ";"); decl; decl = strtok(NULL, ";")) {
        char *fn = strstr(decl, "(*"); /* a function pointer: the name inside (*...) */
        char *parts[8];
        int np = 0;
        if (fn) {
            parts[np++] = fn + 2;
            *strchr(fn, ')') = 0;
        } else
            for (char *c = decl; np < 8 && c; c = strchr(c, ',')) { /* double a, b */
                if (*c == ',') *c++ = 0;
                parts[np++] = c;
            }
        for (int j = 0; j < np; j++) {
            char *e = parts[j] + strlen(parts[j]);
            while (e > parts[j] && !isalnum((unsigned char)e[-1]) && e[-1] != '_')
                *--e = 0;
            char *s = e;
            while (s > parts[j] && (isalnum((unsigned char)s[-1]) || s[-1] == '_'))
                s--;
            if (!*s) continue;
            if (n < cap) snprintf(names[n], 64, "%s", s);
            n++;
        }
    }
    free(body);
    return n;
}

int main(void) {
    check_test_name = "abi";
    load_headers();
    int64_t n = 0;
    const fp4_abi_field *rows = fp4_abi_layout(&n);
    CHECK(rows != NULL && n > 0);
    int structs = 0;
    for (int64_t i = 0; i < n;) {
        const char *type = rows[i].type;
        char names[64][64];
        const int nh = header_members(type, names, 64);
        CHECK_MSG(nh > 0, "%s: no `typedef struct %s { ... } %s;` in the public headers", type, type, type);
        int k = 0;
        uint64_t end = 0;
        for (; i < n && rows[i].field; i++, k++) {
            CHECK_MSG(!strcmp(rows[i].type, type), "row %lld: %s inside %s", (long long)i, rows[i].type,
                      type);
            CHECK_MSG(k < nh && !strcmp(rows[i].field, names[k]),
                      "%s member %d: %s in the table, %s in the header", type, k, rows[i].field,
                      k < nh ? names[k] : "(none)");
            CHECK_MSG(rows[i].offset >= end && rows[i].size > 0, "%s.%s overlaps the member before it", type,
                      rows[i].field);
            end = rows[i].offset + rows[i].size;
        }
        CHECK_MSG(k == nh, "%s: %d members in the table, %d in the header", type, k, nh);
        CHECK_MSG(i < n && !strcmp(rows[i].type, type) && rows[i].offset >= end,
                  "%s: no closing row, or sizeof below its last member", type);
        i++;
        structs++;
    }
    CHECK(structs >= 13);
    /* the table is what this compiler laid out (spot checks against the compiler itself) */
    for (int64_t i = 0; i < n; i++)
        if (!strcmp(rows[i].type, "fp4_arch") && rows[i].field && !strcmp(rows[i].field, "eos"))
            CHECK_EQ_INT((int)rows[i].offset, (int)offsetof(fp4_arch, eos));
        else if (!strcmp(rows[i].type, "fp4_arch") && !rows[i].field)
            CHECK_EQ_INT((int)rows[i].offset, (int)sizeof(fp4_arch));
    /* the header parser itself sees a member the table would miss: fp4_arch has rope_freq_factors
     * (the member the binding once lacked) and the comma form "rope_low_freq_factor, rope_high..." */
    char names[64][64];
    int na = header_members("fp4_arch", names, 64), seen = 0;
    for (int k = 0; k < na && k < 64; k++)
        seen += !strcmp(names[k], "rope_freq_factors") + !strcmp(names[k], "rope_high_freq_factor");
    CHECK_EQ_INT(seen, 2);
    free(headers);
    return check_report();
}
