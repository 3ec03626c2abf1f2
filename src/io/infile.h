/* infile.h — the one way the library opens a file it reads: never blocks on a FIFO, a device or a
 * socket (opened O_NONBLOCK, refused unless fstat says a regular file, then blocking again), and
 * reads at most a cap. Every refusal names the file and the caller's rule. */
#ifndef FP4_IO_INFILE_H
#define FP4_IO_INFILE_H

#include "fp4_impl.h"
#include <stdbool.h>

/* Opens path for reading. *fd: the descriptor (caller closes), *size: the file's bytes. optional:
 * a missing file (ENOENT) is FP4_OK with *fd = -1. Anything but a regular file is refused
 * (FP4_ERR_IO, "not a regular file (a FIFO)") before a byte is read. */
fp4_status fp4_infile_open(const char *path, const char *rule, bool optional, int *fd, uint64_t *size,
                           fp4_error *err);
/* Reads the whole of path (at most cap bytes, else FP4_ERR_LIMIT) into a malloc'd buffer with a NUL
 * after the last byte; the cap is refused under limit_rule (NULL: rule). optional: a missing file is
 * FP4_OK with *out = NULL. */
fp4_status fp4_infile_read(const char *path, size_t cap, const char *rule, const char *limit_rule,
                           bool optional, char **out, size_t *len, fp4_error *err);
/* Reads up to n bytes from the start of a regular file (a magic); *got: how many. A file that cannot
 * be opened or is not regular gives *got = 0 and the status. */
fp4_status fp4_infile_head(const char *path, void *buf, size_t n, size_t *got, const char *rule,
                           fp4_error *err);
/* The full read of n bytes at the descriptor's position (EINTR retried); false on a short read. */
bool fp4_infile_read_fd(int fd, void *buf, size_t n);

#endif
