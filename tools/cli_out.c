/* cli_out.c — what the CLI writes: standard output checked to the last byte (every verb's output
 * is flushed and closed before the exit status is chosen: a full disk, a closed descriptor or a
 * vanished reader is exit 1 with the reason, never a silent 0), and untrusted text (tensor names,
 * keys, paths, error messages) escaped so that a file cannot drive the user's terminal. */
#include "cli.h"
#include <errno.h>
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
