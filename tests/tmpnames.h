/* tmpnames.h — test support for atomic outputs: the temporary names a writer leaves beside a path. */
#ifndef FP4_TMPNAMES_H
#define FP4_TMPNAMES_H
/* Entries of the directory of path named ".fp4lane-tmp-<last component of path>-*": the
 * temporary names of a write to path (-1 when the directory cannot be read). */
int tmp_names_beside(const char *path);
/* 1 when the file at path holds exactly n bytes equal to data. */
int file_equals(const char *path, const void *data, long n);
#endif
