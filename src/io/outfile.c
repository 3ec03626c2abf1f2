/* outfile.c — atomic outputs: temporary name in the target's directory, fsync, rename; directories
 * built beside their target and swapped in; same-file detection. Contract: outfile.h. */
#include "io/infile.h"
#include "io/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OUT_PATH_MAX 4096
#define JOIN_MAX (OUT_PATH_MAX + 300) /* dir + "/" + one entry name */

/* ---- names ---- */

static uint64_t name_seed(void) {
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
                 (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* dir (without the trailing slash; "." when path has none) and the last component of path */
static fp4_status split_path(const char *path, char *dir, const char **base, fp4_error *err) {
    size_t n = strlen(path);
    if (n == 0 || n >= OUT_PATH_MAX - 64)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "out.path", "empty or too long output path");
    while (n > 1 && path[n - 1] == '/') n--; /* "out/" names the directory out */
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    if (b == 0) {
        strcpy(dir, ".");
    } else {
        size_t dl = b > 1 ? b - 1 : 1; /* "/x" -> "/" */
        memcpy(dir, path, dl);
        dir[dl] = 0;
    }
    *base = path + b;
    if (n - b == 0 || (n - b == 1 && path[b] == '.') || (n - b == 2 && !strncmp(path + b, "..", 2)))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "out.path",
                        "the output must name a file or directory");
    return FP4_OK;
}

/* dir/.fp4lane-tmp-<base>-XXXXXXXXXXXX into buf; base is cut at 64 bytes (and at a '/') */
static void tmp_name(char *buf, const char *dir, const char *base) {
    size_t bl = strcspn(base, "/");
    if (bl > 64) bl = 64;
    snprintf(buf, OUT_PATH_MAX, "%s/" FP4_TMP_PREFIX "%.*s-%012llx", dir, (int)bl, base,
             (unsigned long long)(name_seed() & 0xFFFFFFFFFFFFull));
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* some filesystems refuse fsync on a directory: the rename stands anyway */
        close(fd);
    }
}

/* The missing directories above an output: created (like mkdir -p) and remembered, so that a run
 * that fails removes the ones it made (rmdir: only while they are empty). */
#define MADE_MAX 32
typedef struct made_dirs {
    char path[OUT_PATH_MAX];
    size_t cut[MADE_MAX];
    int n;
} made_dirs;

static void unmake_dirs(made_dirs *m) {
    char p[OUT_PATH_MAX];
    for (int k = m->n - 1; k >= 0; k--) {
        memcpy(p, m->path, m->cut[k]);
        p[m->cut[k]] = 0;
        if (rmdir(p) != 0) break;
    }
    m->n = 0;
}

static fp4_status make_dirs(const char *out, const char *dir, made_dirs *m, fp4_error *err) {
    struct stat sb;
    m->n = 0;
    snprintf(m->path, sizeof m->path, "%s", dir);
    if (stat(dir, &sb) == 0) return FP4_OK; /* not a directory: the create below says so */
    size_t n = strlen(m->path);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && m->path[i] != '/') continue;
        char c = m->path[i];
        m->path[i] = 0;
        int ok = mkdir(m->path, 0777) == 0, e = errno;
        m->path[i] = c;
        if (ok && m->n < MADE_MAX) m->cut[m->n++] = i;
        else if (!ok && e != EEXIST) {
            unmake_dirs(m);
            return fp4_fail(err, FP4_ERR_IO, out, NULL, "out.io", "cannot create the directory %.*s: %s",
                            (int)i, m->path, strerror(e));
        }
    }
    return FP4_OK;
}

/* Output names that say "one file": a directory is never given them. */
static fp4_status dir_name_ok(const char *path, fp4_error *err) {
    static const char *const file_ext[] = {".gguf", ".safetensors"};
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    for (size_t i = 0; i < sizeof file_ext / sizeof file_ext[0]; i++) {
        size_t k = strlen(file_ext[i]);
        if (n >= k && !strncmp(path + n - k, file_ext[i], k))
            return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "out.dir-name",
                            "this layout writes a directory (config.json and model*.safetensors), and "
                            "a name ending in %s is kept for one file: name the directory without it, "
                            "or write one GGUF file (--layout gguf)", file_ext[i]);
    }
    return FP4_OK;
}

int fp4_out_checkpoint_name(const char *s) {
    static const char *const fixed[] = {"model.safetensors", "model.safetensors.index.json", "config.json",
                                        "hf_quant_config.json"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (!strcmp(s, fixed[i])) return 1;
    if (!strncmp(s, FP4_TMP_PREFIX, strlen(FP4_TMP_PREFIX))) return 1;
    unsigned a, b;
    int end = 0;
    return sscanf(s, "model-%5u-of-%5u.safetensors%n", &a, &b, &end) == 2 && end > 0 && s[end] == 0;
}

/* The target as it is now: 0 absent, 1 regular file, 2 directory; refusals for the rest. */
static fp4_status target_kind(const char *path, int want_dir, int *kind, fp4_error *err) {
    struct stat sb;
    *kind = 0;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return FP4_OK;
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.io", "cannot examine the output path: %s",
                        strerror(errno));
    }
    if (S_ISLNK(sb.st_mode))
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.symlink",
                        "the output path is a symbolic link: give the path it points to "
                        "(nothing was written)");
    if (S_ISREG(sb.st_mode) && !want_dir) return *kind = 1, FP4_OK;
    if (S_ISDIR(sb.st_mode) && want_dir) return *kind = 2, FP4_OK;
    return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.not-regular",
                    "the output path exists and is %s, not %s (nothing was written)",
                    S_ISDIR(sb.st_mode)   ? "a directory"
                    : S_ISREG(sb.st_mode) ? "a regular file"
                                          : "a special file",
                    want_dir ? "a directory" : "a regular file");
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                      */

struct fp4_outfile {
    char path[OUT_PATH_MAX], tmp[OUT_PATH_MAX], dir[OUT_PATH_MAX];
    made_dirs made;
    FILE *f;
    fp4_out_check_fn check;
    void *check_ctx;
    int noreplace; /* commit refuses (out.exists) a target that exists by then */
};

fp4_status fp4_outfile_open(const char *path, fp4_outfile **out, fp4_error *err) {
    *out = NULL;
    if (!path) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "out.path", "NULL output path");
    fp4_outfile *o = calloc(1, sizeof *o);
    if (!o) return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "out.nomem", "out of memory");
    const char *base;
    int kind;
    fp4_status st = split_path(path, o->dir, &base, err);
    if (!st) st = target_kind(path, 0, &kind, err);
    if (!st) st = make_dirs(path, o->dir, &o->made, err);
    if (st) {
        free(o);
        return st;
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 64; tries++) {
        tmp_name(o->tmp, o->dir, base);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    struct stat old;
    if (fd >= 0 && kind == 1 && stat(path, &old) == 0) /* a replaced file keeps its permissions */
        (void)fchmod(fd, old.st_mode & 07777);
    if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        unmake_dirs(&o->made);
        free(o);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.io",
                        "cannot create a temporary file beside the output: %s",
                        strerror(e));
    }
    *out = o;
    return FP4_OK;
}

const char *fp4_outfile_path(const fp4_outfile *o) { return o ? o->path : NULL; }

void fp4_outfile_set_check(fp4_outfile *o, fp4_out_check_fn fn, void *ctx) {
    o->check = fn;
    o->check_ctx = ctx;
}

void fp4_outfile_set_noreplace(fp4_outfile *o) { o->noreplace = 1; }

/* rename(2) that never replaces: RENAME_NOREPLACE, or where the filesystem lacks it a hard link
 * (which fails with EEXIST just the same) and the temporary name's removal, or where it has no hard
 * links either (vfat, some FUSE) a check of the name and a plain rename (a file that appears between
 * the two is replaced: docs/RELIABILITY.md, "Not covered"). 0 or an errno. */
static int noreplace_fallback; /* tests: 1 as if RENAME_NOREPLACE were missing, 2 hard links too */
void fp4_outfile_test_fallback(int level) { noreplace_fallback = level; }

static int rename_noreplace(const char *from, const char *to) {
    if (noreplace_fallback >= 1) errno = EINVAL;
    else if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return errno;
    if (noreplace_fallback >= 2) errno = EPERM;
    else if (link(from, to) == 0) {
        unlink(from);
        return 0;
    }
    if (errno != EPERM && errno != EOPNOTSUPP && errno != EMLINK) return errno;
    struct stat sb;
    if (lstat(to, &sb) == 0) return EEXIST;
    return rename(from, to) == 0 ? 0 : errno;
}

fp4_status fp4_outfile_write(fp4_outfile *o, const void *data, size_t n, fp4_error *err) {
    if (n && fwrite(data, 1, n, o->f) != n)
        return fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.io", "write failed: %s", strerror(errno));
    return FP4_OK;
}

fp4_status fp4_outfile_write_at(fp4_outfile *o, uint64_t off, const void *data, size_t n, fp4_error *err) {
    const uint8_t *p = data;
    if (fflush(o->f) != 0)
        return fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.io", "write failed: %s", strerror(errno));
    while (n) {
        ssize_t w = pwrite(fileno(o->f), p, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.io", "write failed: %s",
                            w < 0 ? strerror(errno) : "no progress");
        p += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return FP4_OK;
}

void fp4_outfile_abort(fp4_outfile *o) {
    if (!o) return;
    if (o->f) fclose(o->f);
    unlink(o->tmp); /* the temporary name is ours (O_EXCL); the target was never touched */
    unmake_dirs(&o->made);
    free(o);
}

fp4_status fp4_outfile_commit(fp4_outfile *o, fp4_error *err) {
    FILE *f = o->f;
    o->f = NULL;
    int e = 0;
    errno = 0;
    if (fflush(f) != 0 || ferror(f)) e = errno ? errno : EIO;
    if (!e && fsync(fileno(f)) != 0) e = errno;
    if (fclose(f) != 0 && !e) e = errno;
    fp4_status st = FP4_OK;
    if (e) st = fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.io", "flush/fsync/close failed: %s",
                         strerror(e));
    if (!st && o->check) st = o->check(o->check_ctx, o->tmp, o->path, err);
    int kind;
    if (!st) st = target_kind(o->path, 0, &kind, err); /* still a regular file or nothing */
    if (!st && !o->noreplace && rename(o->tmp, o->path) != 0)
        st = fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.io", "rename into place failed: %s",
                      strerror(errno));
    if (!st && o->noreplace && (e = rename_noreplace(o->tmp, o->path)) != 0)
        st = e == EEXIST ? fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.exists",
                                    "the output file appeared while this run wrote it: not replaced "
                                    "(the new bytes were discarded)")
                         : fp4_fail(err, FP4_ERR_IO, o->path, NULL, "out.io", "rename into place failed: %s",
                                    strerror(e));
    if (st) {
        unlink(o->tmp);
        unmake_dirs(&o->made);
    } else {
        fsync_dir(o->dir);
    }
    free(o);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Directories                                                                                */

struct fp4_outdir {
    char path[OUT_PATH_MAX], tmp[OUT_PATH_MAX], parent[OUT_PATH_MAX];
    made_dirs made;
    int force;
    fp4_out_check_fn check;
    void *check_ctx;
};

/* Entries of dir other than "." and "..": calls fn for each; stops at the first nonzero result. */
typedef int (*entry_fn)(void *ctx, const char *dir, const char *name);
static int for_entries(const char *dir, entry_fn fn, void *ctx) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int r = 0;
    struct dirent *de;
    while (!r && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) r = fn(ctx, dir, de->d_name);
    closedir(d);
    return r;
}

static int count_one(void *ctx, const char *dir, const char *name) {
    (void)dir, (void)name;
    ++*(int *)ctx;
    return 0;
}

/* With force: every entry is a checkpoint file (replaced) or a regular file (carried over). */
typedef struct force_scan { char bad[256]; } force_scan;
static int force_ok(void *ctx, const char *dir, const char *name) {
    char p[JOIN_MAX];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) return 0;
    snprintf(((force_scan *)ctx)->bad, sizeof ((force_scan *)ctx)->bad, "%s", name);
    return 1;
}

static fp4_status dir_state_of(const char *path, int force, int *kind, fp4_error *err) {
    fp4_status st = target_kind(path, 1, kind, err);
    if (st || *kind != 2) return st;
    int n = 0;
    if (for_entries(path, count_one, &n) < 0)
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.io", "cannot list the output directory: %s",
                        strerror(errno));
    if (n == 0) return *kind = 0, FP4_OK; /* an empty directory is replaced like an absent one */
    if (!force)
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.exists",
                        "the output directory is not empty: choose another, "
                        "or --force to replace the checkpoint in it");
    force_scan fs = {""};
    if (for_entries(path, force_ok, &fs))
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "out.exists",
                        "--force replaces a directory of regular files only; '%.200s' is not one", fs.bad);
    return FP4_OK;
}

static fp4_status dir_state(const fp4_outdir *d, int *kind, fp4_error *err) {
    return dir_state_of(d->path, d->force, kind, err);
}

static int remove_one(void *ctx, const char *dir, const char *name) {
    char p[JOIN_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    (void)ctx;
    unlink(p);
    return 0;
}

fp4_status fp4_outdir_open(const char *path, int force, fp4_outdir **out, fp4_error *err) {
    *out = NULL;
    if (!path) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "out.path", "NULL output path");
    fp4_outdir *d = calloc(1, sizeof *d);
    if (!d) return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "out.nomem", "out of memory");
    const char *base;
    int kind;
    snprintf(d->path, sizeof d->path, "%s", path);
    d->force = force;
    fp4_status st = split_path(path, d->parent, &base, err);
    if (!st) st = dir_name_ok(path, err);
    if (!st) st = dir_state(d, &kind, err);
    if (!st) st = make_dirs(path, d->parent, &d->made, err);
    int ok = 0;
    for (int tries = 0; !st && !ok && tries < 64; tries++) {
        tmp_name(d->tmp, d->parent, base);
        ok = mkdir(d->tmp, 0777) == 0;
        if (!ok && errno != EEXIST)
            st = fp4_fail(err, FP4_ERR_IO, path, NULL, "out.io",
                          "cannot create a temporary directory beside the output: %s",
                          strerror(errno));
    }
    if (!st && !ok) st = fp4_fail(err, FP4_ERR_IO, path, NULL, "out.io", "no free temporary name");
    if (st) {
        unmake_dirs(&d->made);
        free(d);
        return st;
    }
    *out = d;
    return FP4_OK;
}

const char *fp4_outdir_tmp(const fp4_outdir *d) { return d->tmp; }

void fp4_outdir_set_check(fp4_outdir *d, fp4_out_check_fn fn, void *ctx) {
    d->check = fn;
    d->check_ctx = ctx;
}

void fp4_outdir_abort(fp4_outdir *d) {
    if (!d) return;
    for_entries(d->tmp, remove_one, NULL); /* files this run wrote (or linked) into its own directory */
    rmdir(d->tmp);
    unmake_dirs(&d->made);
    free(d);
}

/* --force: regular files of the old directory that are not checkpoint files get a second name in
 * the new one, so that the swap keeps them. */
static int carry_one(void *ctx, const char *dir, const char *name) {
    const fp4_outdir *d = ctx;
    if (fp4_out_checkpoint_name(name)) return 0;
    char from[JOIN_MAX], to[JOIN_MAX];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s", d->tmp, name);
    if (link(from, to) == 0 || errno == EEXIST) return 0; /* EEXIST: this run wrote a newer copy */
    return errno;
}

static fp4_status swap_in(fp4_outdir *d, fp4_error *err) {
    int kind;
    fp4_status st = dir_state(d, &kind, err);
    if (st) return st;
    if (kind != 2) { /* absent or empty: one rename */
        if (rename(d->tmp, d->path) != 0)
            return fp4_fail(err, FP4_ERR_IO, d->path, NULL, "out.io", "rename into place failed: %s",
                            strerror(errno));
        return FP4_OK;
    }
    int e = for_entries(d->path, carry_one, d);
    if (e) return fp4_fail(err, FP4_ERR_IO, d->path, NULL, "out.io",
                           "cannot keep a file of the old directory: %s", strerror(e));
    fsync_dir(d->tmp);
    if (renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->path, RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS)
            return fp4_fail(err, FP4_ERR_IO, d->path, NULL, "out.io", "swap into place failed: %s",
                            strerror(errno));
        /* no atomic exchange on this filesystem: move the old one aside, then the new one in */
        char old[OUT_PATH_MAX];
        tmp_name(old, d->parent, "old");
        if (rename(d->path, old) != 0)
            return fp4_fail(err, FP4_ERR_IO, d->path, NULL, "out.io",
                            "cannot move the old directory aside: %s", strerror(errno));
        if (rename(d->tmp, d->path) != 0) {
            e = errno;
            (void)rename(old, d->path);
            return fp4_fail(err, FP4_ERR_IO, d->path, NULL, "out.io", "rename into place failed: %s",
                            strerror(e));
        }
        snprintf(d->tmp, sizeof d->tmp, "%s", old);
    }
    /* d->tmp now holds the old directory: its checkpoint files (replaced, as --force asked) and
     * the second names of the carried files */
    for_entries(d->tmp, remove_one, NULL);
    rmdir(d->tmp);
    return FP4_OK;
}

fp4_status fp4_outdir_commit(fp4_outdir *d, fp4_error *err) {
    fsync_dir(d->tmp);
    fp4_status st = d->check ? d->check(d->check_ctx, d->tmp, d->path, err) : FP4_OK;
    if (!st) st = swap_in(d, err);
    if (st) {
        fp4_outdir_abort(d);
        return st;
    }
    fsync_dir(d->parent);
    free(d);
    return FP4_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Same-file detection                                                                        */

typedef struct file_id { dev_t dev; ino_t ino; } file_id;
typedef struct file_ids {
    file_id *v;
    size_t n, cap;
    int oom;
} file_ids;

static void ids_add(file_ids *ids, const struct stat *sb) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? 2 * ids->cap : 64;
        file_id *v = realloc(ids->v, cap * sizeof *v);
        if (!v) {
            ids->oom = 1;
            return;
        }
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = (file_id){sb->st_dev, sb->st_ino};
}

static int ids_has(const file_ids *ids, const struct stat *sb) {
    for (size_t i = 0; i < ids->n; i++)
        if (ids->v[i].dev == sb->st_dev && ids->v[i].ino == sb->st_ino) return 1;
    return 0;
}

static int add_entry(void *ctx, const char *dir, const char *name) {
    char p[JOIN_MAX];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (stat(p, &sb) == 0) ids_add(ctx, &sb);
    return 0;
}

typedef struct hit_scan { const file_ids *ids; char name[256]; } hit_scan;
static int hit_entry(void *ctx, const char *dir, const char *name) {
    hit_scan *h = ctx;
    char p[JOIN_MAX];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (stat(p, &sb) != 0 || !ids_has(h->ids, &sb)) return 0;
    snprintf(h->name, sizeof h->name, "%s", name);
    return 1;
}

fp4_status fp4_out_same_file_check(const char *in, const char *out, fp4_error *err) {
    struct stat si, so;
    if (!in || !out || stat(in, &si) != 0 || stat(out, &so) != 0) return FP4_OK;
    file_ids ids = {NULL, 0, 0, 0};
    ids_add(&ids, &si);
    if (S_ISDIR(si.st_mode)) for_entries(in, add_entry, &ids);
    fp4_status st = FP4_OK;
    if (ids.oom)
        st = fp4_fail(err, FP4_ERR_NOMEM, out, NULL, "out.nomem", "out of memory");
    else if (ids_has(&ids, &so))
        st = fp4_fail(err, FP4_ERR_IO, out, NULL, "out.same-file",
                      "the output is the input %s (another name for the same file): nothing was written", in);
    else if (S_ISDIR(so.st_mode)) {
        hit_scan h = {&ids, ""};
        if (for_entries(out, hit_entry, &h) > 0)
            st = fp4_fail(err, FP4_ERR_IO, out, NULL, "out.same-file",
                          "the output directory holds '%.200s', which is the input (or part of it): "
                          "nothing was written",
                          h.name);
    }
    free(ids.v);
    return st;
}

fp4_status fp4_out_preflight(const char *in, const char *out, int want_dir, int force, fp4_error *err) {
    char dir[OUT_PATH_MAX];
    const char *base;
    int kind;
    fp4_status st = out ? split_path(out, dir, &base, err)
                        : fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "out.path", "NULL output path");
    if (!st) st = fp4_out_same_file_check(in, out, err);
    if (!st && want_dir) st = dir_name_ok(out, err);
    if (!st) st = want_dir ? dir_state_of(out, force, &kind, err) : target_kind(out, 0, &kind, err);
    if (!st && !want_dir && kind == 1 && !force)
        st = fp4_fail(err, FP4_ERR_IO, out, NULL, "out.exists",
                      "the output file exists: nothing was written (remove it, choose another name, or "
                      "--force to replace it)");
    if (!st && !want_dir) { /* writable: the temporary name the commit will use can be made (then removed) */
        fp4_outfile *probe = NULL;
        st = fp4_outfile_open(out, &probe, err);
        fp4_outfile_abort(probe);
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Companion files                                                                            */

static int weight_file_name(const char *s) {
    static const char *const ext[] = {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5",
                                      ".msgpack", ".onnx", ".index.json", ".partial"};
    size_t n = strlen(s);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t k = strlen(ext[i]);
        if (n >= k && !strcmp(s + n - k, ext[i])) return 1;
    }
    return 0;
}

int fp4_out_companion_name(const char *name) {
    return name[0] != '.' && !fp4_out_checkpoint_name(name) && !weight_file_name(name);
}

typedef struct copy_scan {
    const char *dst;
    int err;
    char bad[256];
} copy_scan;

static int copy_one(void *ctx, const char *dir, const char *name) {
    copy_scan *cs = ctx;
    if (!fp4_out_companion_name(name)) return 0;
    char from[JOIN_MAX], to[JOIN_MAX];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s", cs->dst, name);
    struct stat sb;
    if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0; /* links followed (HF cache); dirs skipped */
    int in, e = 0;
    uint64_t size;
    fp4_error ig; /* the scan reports errno; a file swapped for a FIFO after the stat is EINVAL */
    errno = 0;
    if (fp4_infile_open(from, "out.io", false, &in, &size, &ig)) e = errno ? errno : EINVAL;
    int out = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666) : -1;
    if (!e && out < 0) e = errno;
    char buf[1 << 14];
    for (ssize_t got; !e && (got = read(in, buf, sizeof buf)) != 0;) {
        if (got < 0) {
            if (errno != EINTR) e = errno;
            continue;
        }
        for (ssize_t off = 0; !e && off < got;) {
            ssize_t w = write(out, buf + off, (size_t)(got - off));
            if (w < 0 && errno != EINTR) e = errno;
            if (w > 0) off += w;
        }
    }
    if (!e && out >= 0 && fsync(out) != 0) e = errno;
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0 && !e) e = errno;
    if (!e) return 0;
    cs->err = e;
    snprintf(cs->bad, sizeof cs->bad, "%s", name);
    return 1;
}

fp4_status fp4_out_copy_companions(const char *src_dir, const char *dst_dir, fp4_error *err) {
    struct stat sb;
    if (!src_dir || stat(src_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return FP4_OK;
    copy_scan cs = {dst_dir, 0, ""};
    if (for_entries(src_dir, copy_one, &cs) > 0)
        return fp4_fail(err, FP4_ERR_IO, src_dir, NULL, "out.io", "cannot copy '%.200s' into the output: %s",
                        cs.bad, strerror(cs.err));
    return FP4_OK;
}
