/* cmd_serve.c — fp4lane serve: the OpenAI-compatible server (src/server, docs/SERVE.md) over
 * MODEL. Options to srv_opts; the access log and the start-up lines on stderr; SIGTERM or Ctrl-C
 * drains (running requests finish, new ones get 503) and exits 0. */
#include "cli.h"
#include "rt_cli.h"
#include "run_text.h"
#include "server/server.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_flag;
static void on_stop(int sig) {
    (void)sig;
    stop_flag = 1;
}

static void log_line(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "%s\n", line);
}

/* --api-key KEY or @FILE (its first line): a key on the command line is visible to other users
 * of the machine (ps), a file is not */
static int read_key(const char *v, char *key, size_t cap) {
    if (v[0] != '@') return snprintf(key, cap, "%s", v), key[0] ? 0 : -1;
    FILE *f = fopen(v + 1, "r");
    if (!f) return fprintf(stderr, "fp4lane serve: --api-key %s: %s\n", v, strerror(errno)), -1;
    int ok = fgets(key, (int)cap, f) != NULL;
    fclose(f);
    key[strcspn(key, "\r\n")] = 0;
    if (!ok || !key[0]) return fprintf(stderr, "fp4lane serve: --api-key %s: the file holds no key\n", v), -1;
    return 0;
}

int cmd_serve(int argc, char **argv) {
    rt_cli_engine e;
    rt_cli_engine_init(&e);
    e.verb = "serve";
    srv_opts o = {0};
    o.port = 8080, o.parallel = 4, o.max_queue = 64, o.log = log_line, o.stop = &stop_flag;
    static char key[512], model_buf[4200];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = rt_cli_engine_opt(&e, argc, argv, &i);
        fp4_arg_val x;
        if (r < 0) return cli_usage("serve");
        if (r) continue;
        if (!strcmp(a, "--host") && v)
            o.host = v, i++;
        else if (!strcmp(a, "--name") && v)
            o.name = v, i++;
        else if (!strcmp(a, "--api-key") && v) {
            if (read_key(v, key, sizeof key)) return 2;
            o.api_key = key, i++;
        } else if ((!strcmp(a, "--port") || !strcmp(a, "--parallel") || !strcmp(a, "--queue") ||
                    !strcmp(a, "--max-body") || !strcmp(a, "--prefix-cache") ||
                    !strcmp(a, "--conn-per-ip")) &&
                   v) {
            const char *name = !strcmp(a, "--parallel") ? "max_seqs" : "n";
            if (rt_cli_arg(name, a, v, &x)) return 2;
            long long lim = !strcmp(a, "--port")          ? 65535
                            : !strcmp(a, "--max-body")    ? (64ll << 20)
                            : !strcmp(a, "--conn-per-ip") ? 256
                                                          : 1 << 20;
            if (x.i > lim || (x.i < 1 && strcmp(a, "--port") && strcmp(a, "--prefix-cache")))
                return fprintf(stderr, "fp4lane serve: %s %s: out of range\n", a, v), 2;
            if (!strcmp(a, "--port")) o.port = (int)x.i;
            if (!strcmp(a, "--parallel")) o.parallel = (int)x.i;
            if (!strcmp(a, "--queue")) o.max_queue = (int)x.i;
            if (!strcmp(a, "--max-body")) o.max_body = (size_t)x.i;
            if (!strcmp(a, "--prefix-cache")) o.prefix_blocks = x.i ? x.i : -1; /* 0: none */
            if (!strcmp(a, "--conn-per-ip")) o.conn_per_ip = (int)x.i;
            i++;
        } else if (a[0] != '-' && !e.model)
            e.model = a;
        else
            return fprintf(stderr, "fp4lane serve: unknown or incomplete option '%s'\n", a),
                   cli_usage("serve");
    }
    if (!e.model) {
        if (rt_text_default_model("serve", model_buf, sizeof model_buf)) return 1;
        e.model = model_buf;
    }
    if (rt_text_model_present("serve", e.model)) return 1;
    o.model = e.model, o.ctx = e.o.n_ctx, o.device = e.o.device, o.mode = e.o.mode, o.threads = e.o.n_threads;
    o.tp = e.o.tp, o.cuda_lib = e.o.cuda_lib;
    if (e.prefill_chunk) /* the scheduler splits prompts by its step budget, not by run's chunk */
        return fprintf(stderr, "fp4lane serve: --prefill-chunk is an option of run, not of serve\n"), 2;
    struct sigaction sa, old_term, old_int;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    signal(SIGPIPE, SIG_IGN); /* a client that goes away is a failed write, not the end of the server */
    fp4_error err = {0};
    fp4_status st = fp4_server_run(&o, &err);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    if (st) return cli_report_error("serve", st, &err);
    return 0;
}
