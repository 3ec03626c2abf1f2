/* cli_out.c — what the CLI writes: standard output checked to the last byte (every verb's output
 * is flushed and closed before the exit status is chosen: a full disk, a closed descriptor or a
 * vanished reader is exit 1 with the reason, never a silent 0), and untrusted text (tensor names,
 * keys, paths, error messages) escaped so that a file cannot drive the user's terminal. */
#include "cli.h"
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int stdout_was_closed;

void cli_stdio_guard(void) {
    /* a closed descriptor 0/1/2 would be handed to the next open(): an output file would then
     * receive what was meant for stdout. Fill them; a closed stdout gets /dev/full, whose writes
     * fail, so that the final check reports it. */
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int nfd = open(fd == 1 ? "/dev/full" : "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (nfd >= 0 && nfd != fd) {
            dup2(nfd, fd);
            close(nfd);
        }
        if (fd == 1) stdout_was_closed = 1;
    }
}

int cli_stdout_finish(int rc) {
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) bad = 1, e = errno;
    if (!bad) return rc;
    if (stdout_was_closed) fprintf(stderr, "fp4lane: standard output is closed: the output was lost\n");
    else fprintf(stderr, "fp4lane: cannot write to standard output: %s: the output was lost\n", strerror(e));
    return rc ? rc : 1;
}

int cli_stdout_failed(void) { return ferror(stdout) != 0; }

/* Bytes 0x00-0x1F, 0x7F, C1 controls (U+0080-U+009F) and bytes that are not UTF-8 as \xNN;
 * everything else (printable ASCII and valid UTF-8) as it is. */
void cli_put_escaped(FILE *f, const char *s) {
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    while (*u) {
        unsigned char c = *u;
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        int ok = len > 0;
        for (size_t i = 1; ok && i < len; i++) ok = (u[i] & 0xC0) == 0x80;
        if (ok && len == 2 && (c < 0xC2 || (c == 0xC2 && u[1] < 0xA0))) ok = 0; /* overlong, C1 */
        if (ok && len == 1 && (c < 0x20 || c == 0x7F)) ok = 0;
        if (ok && c == '\\') {
            fputs("\\\\", f);
        } else if (ok) {
            fwrite(u, 1, len, f);
        } else {
            fprintf(f, "\\x%02X", c);
            len = 1;
        }
        u += len;
    }
}

const char *cli_escaped(const char *s, char *buf, size_t n) {
    FILE *f = fmemopen(buf, n, "w");
    if (!f) return "?";
    cli_put_escaped(f, s);
    fclose(f);
    buf[n - 1] = 0;
    return buf;
}

/* A JSON object printed as it is made: head's members, then list_key: [item(ctx, 0), ...,
 * item(ctx, n-1)] one element at a time (each built, printed and freed), then tail_key: tail.
 * Memory is one element, whatever n is. ASCII-only output; stops at the first failed write. */
static int put_value(FILE *f, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    int ok = s && fputs(s, f) >= 0;
    free(s);
    return ok;
}

static int put_key(FILE *f, const char *k, int first) {
    json_t *js = json_string(k);
    int ok = fputs(first ? "{\n  " : ",\n  ", f) >= 0 && put_value(f, js) && fputs(": ", f) >= 0;
    json_decref(js);
    return ok;
}

int cli_json_stream(FILE *f, const json_t *head, const char *list_key, json_t *(*item)(const void *ctx,
                                                                                       int64_t i),
                    const void *ctx, int64_t n, const char *tail_key, const json_t *tail) {
    const char *k;
    json_t *v;
    int first = 1, ok = 1;
    json_object_foreach((json_t *)head, k, v) {
        ok = ok && put_key(f, k, first) && put_value(f, v);
        first = 0;
    }
    ok = ok && put_key(f, list_key, first) && fputs("[", f) >= 0;
    for (int64_t i = 0; ok && i < n; i++) {
        json_t *e = item(ctx, i);
        ok = e && fputs(i ? ",\n    " : "\n    ", f) >= 0 && put_value(f, e) && !ferror(f);
        json_decref(e);
    }
    ok = ok && fputs(n ? "\n  ]" : "]", f) >= 0;
    if (tail_key) ok = ok && put_key(f, tail_key, 0) && put_value(f, tail);
    return ok && fputs("\n}\n", f) >= 0 ? 0 : 1;
}
