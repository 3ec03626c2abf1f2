/* quant_policy.c — a family's own quantization recipe beyond ModelOpt's default exclusions
 * (quantize.c). DeepSeek-V3 / R1 (model_type deepseek_v3): NVIDIA's DeepSeek-R1-FP4 recipe
 * quantizes the routed experts only; the attention (every self_attn module), the dense MLPs of the
 * first first_k_dense_replace layers and the shared experts keep their precision, and so does the
 * multi-token-prediction layer (index >= num_hidden_layers), which the engine does not run. The
 * kept modules land in exclude_modules like every other exclusion. */
#include "model/model_impl.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

void fp4_qpolicy_init(const char *config_json, fp4_qpolicy *p) {
    memset(p, 0, sizeof *p);
    json_t *c = config_json ? json_loads(config_json, 0, NULL) : NULL;
    json_t *mt = json_object_get(c, "model_type");
    if (json_is_string(mt) && !strcmp(json_string_value(mt), "deepseek_v3")) {
        json_t *nl = json_object_get(c, "num_hidden_layers"),
               *fd = json_object_get(c, "first_k_dense_replace");
        p->deepseek = 1;
        p->n_layers = json_is_integer(nl) ? json_integer_value(nl) : INT64_MAX;
        p->first_dense = json_is_integer(fd) ? json_integer_value(fd) : 3; /* DeepseekV3Config's default */
    }
    json_decref(c);
}

int fp4_qpolicy_keep(const fp4_qpolicy *p, const char *name) {
    if (!p->deepseek) return 0;
    long long l;
    int n = 0;
    if (sscanf(name, "model.layers.%lld.%n", &l, &n) != 1 || !n) return 0;
    const char *rest = name + n;
    return l >= p->n_layers || !strncmp(rest, "self_attn.", 10) ||
           !strncmp(rest, "mlp.shared_experts.", 19) || (l < p->first_dense && !strncmp(rest, "mlp.", 4));
}
