/* infile.c — checked opens for every file the library reads (infile.h). A FIFO given where a
 * tokenizer.json, a KV snapshot or a config is expected would otherwise block the process in
 * open(2) or read(2) forever: O_NONBLOCK makes the open return, fstat tells what it is, and only a
 * regular file goes on (with O_NONBLOCK cleared, so that reads behave as on any file). */
#include "io/infile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO"
           : S_ISDIR(m) ? "a directory"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
                                      : "a special file";
}

fp4_status fp4_infile_open(const char *path, const char *rule, bool optional, int *fd, uint64_t *size,
                           fp4_error *err) {
    *fd = -1;
    *size = 0;
    if (!path) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, rule, "NULL path");
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) {
        if (optional && errno == ENOENT) return FP4_OK;
        return fp4_fail(err, FP4_ERR_IO, path, NULL, rule, "cannot open: %s", strerror(errno));
    }
    struct stat sb;
    if (fstat(f, &sb)) {
        int e = errno;
        close(f);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, rule, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, rule, "not a regular file (%s)", kind_of(sb.st_mode));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(f);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, rule, "fcntl: %s", strerror(e));
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return FP4_OK;
}

bool fp4_infile_read_fd(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

fp4_status fp4_infile_read(const char *path, size_t cap, const char *rule, const char *limit_rule,
                           bool optional, char **out, size_t *len, fp4_error *err) {
    *out = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    fp4_status st = fp4_infile_open(path, rule, optional, &fd, &size, err);
    if (st || fd < 0) return st;
    if (size > cap) {
        close(fd);
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, limit_rule ? limit_rule : rule,
                        "%llu bytes, above the cap of %zu", (unsigned long long)size, cap);
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        close(fd);
        return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, rule, "out of memory for %llu bytes",
                        (unsigned long long)size);
    }
    bool ok = fp4_infile_read_fd(fd, buf, (size_t)size);
    close(fd);
    if (!ok) {
        free(buf);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, rule, "short read");
    }
    buf[size] = 0;
    *out = buf;
    *len = (size_t)size;
    return FP4_OK;
}

fp4_status fp4_infile_head(const char *path, void *buf, size_t n, size_t *got, const char *rule,
                           fp4_error *err) {
    *got = 0;
    int fd;
    uint64_t size;
    fp4_status st = fp4_infile_open(path, rule, false, &fd, &size, err);
    if (st) return st;
    size_t want = size < n ? (size_t)size : n;
    bool ok = fp4_infile_read_fd(fd, buf, want);
    close(fd);
    if (!ok) return fp4_fail(err, FP4_ERR_IO, path, NULL, rule, "short read");
    *got = want;
    return FP4_OK;
}
