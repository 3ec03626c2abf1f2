/* comm.c — the collectives' front: one argument check for every backend (comm.h). */
#include "comm/comm.h"
#include "fp4_impl.h"

static fp4_status bad(fp4_error *err, const char *what) {
    return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "comm.args", "%s", what);
}

fp4_status fp4_comm_all_gather(fp4_comm *c, const void *send, void *recv, size_t bytes, fp4_error *err) {
    if (!c || (bytes && (!send || !recv))) return bad(err, "all_gather: no communicator or no buffer");
    return c->ops->all_gather(c, send, recv, bytes, err);
}
fp4_status fp4_comm_all_reduce_sum(fp4_comm *c, const float *send, float *recv, int64_t n, fp4_error *err) {
    if (!c || n < 0 || (n && (!send || !recv)))
        return bad(err, "all_reduce: no communicator, buffer or count");
    return c->ops->all_reduce_sum(c, send, recv, n, err);
}
fp4_status fp4_comm_broadcast(fp4_comm *c, void *buf, size_t bytes, int root, fp4_error *err) {
    if (!c || (bytes && !buf) || root < 0 || root >= c->size)
        return bad(err, "broadcast: no communicator or buffer, or a root outside the group");
    return c->ops->broadcast(c, buf, bytes, root, err);
}
fp4_status fp4_comm_barrier(fp4_comm *c, fp4_error *err) {
    if (!c) return bad(err, "barrier: no communicator");
    return c->ops->barrier(c, err);
}
void fp4_comm_abort(fp4_comm *c) {
    if (c) c->ops->abort(c);
}
void fp4_comm_free(fp4_comm *c) {
    if (c) c->ops->destroy(c);
}
