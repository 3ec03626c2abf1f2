"""ctypes declarations of libfp4lane.so: the structs and prototypes of include/fp4lane.h and
include/fp4lane_runtime.h that the binding uses, field for field. Nothing here is called by users.

Every struct names its C type in _c_name_; load() compares each one with the layout the library
was compiled with (fp4_abi_layout: member names in order, offsets, sizes, sizeof) and refuses to
load on any difference, so a member added in C and forgotten here (which would shift every later
member) stops the import instead of reading wrong values."""
import ctypes
import ctypes.util
import os

c_int, c_int32, c_int64, c_uint64, c_float, c_double = (ctypes.c_int, ctypes.c_int32, ctypes.c_int64,
                                                        ctypes.c_uint64, ctypes.c_float, ctypes.c_double)
c_char_p, c_void_p, c_size_t, POINTER = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER

FP4_MAX_DIMS = 4


class AbiField(ctypes.Structure):  # fp4_abi_field
    _c_name_ = "fp4_abi_field"
    _fields_ = [("type", c_char_p), ("field", c_char_p), ("offset", c_uint64), ("size", c_uint64)]


class Error(ctypes.Structure):  # fp4_error
    _c_name_ = "fp4_error"
    _fields_ = [("code", c_int), ("file", ctypes.c_char * 256), ("tensor", ctypes.c_char * 128),
                ("rule", ctypes.c_char * 64), ("msg", ctypes.c_char * 512)]


class NvFp4View(ctypes.Structure):  # fp4_nvfp4_view
    _c_name_ = "fp4_nvfp4_view"
    _fields_ = [("payload", c_void_p), ("scales", c_void_p), ("scale2", c_float),
                ("input_scale_inv", c_float), ("n_out", c_int64), ("n_in", c_int64), ("packing", c_int)]


class Fp8View(ctypes.Structure):  # fp4_fp8_view
    _c_name_ = "fp4_fp8_view"
    _fields_ = [("scale", c_float), ("row_scale", POINTER(c_float)), ("input_scale", c_float),
                ("n_out", c_int64), ("n_in", c_int64), ("block_scale", POINTER(c_float)),
                ("block_rows", c_int64), ("block_cols", c_int64)]


class Tensor(ctypes.Structure):  # fp4_tensor
    _c_name_ = "fp4_tensor"
    _fields_ = [("name", c_char_p), ("type", c_int), ("n_dims", c_int32), ("ne", c_int64 * FP4_MAX_DIMS),
                ("data", c_void_p), ("nbytes", c_uint64), ("nvfp4", NvFp4View), ("st_dtype", c_int),
                ("fp8", Fp8View)]


class TypeInfo(ctypes.Structure):  # fp4_type_info
    _c_name_ = "fp4_type_info"
    _fields_ = [("type", c_int), ("name", c_char_p), ("block_size", c_int64), ("type_size", c_int64)]


PROGRESS = ctypes.CFUNCTYPE(None, c_void_p, c_char_p, c_uint64, c_uint64)


class WriteOpts(ctypes.Structure):  # fp4_write_opts
    _c_name_ = "fp4_write_opts"
    _fields_ = [("layout", c_int), ("max_shard_bytes", c_uint64), ("st_metadata", POINTER(c_char_p)),
                ("progress", PROGRESS), ("progress_ctx", c_void_p), ("force", c_int), ("cancel", c_void_p)]


class QuantizeOpts(ctypes.Structure):  # fp4_quantize_opts
    _c_name_ = "fp4_quantize_opts"
    _fields_ = [("layout", c_int), ("to_q4_k", c_int), ("rule", c_int), ("no_fusion", c_int),
                ("quantize_embeddings", c_int), ("max_shard_bytes", c_uint64),
                ("st_metadata", POINTER(c_char_p)), ("progress", PROGRESS), ("progress_ctx", c_void_p),
                ("force", c_int), ("cancel", c_void_p)]


class Arch(ctypes.Structure):  # fp4_arch
    _c_name_ = "fp4_arch"
    _fields_ = [("family", c_int), ("source", c_int), ("n_layers", c_int64), ("hidden", c_int64),
                ("n_heads", c_int64), ("n_kv_heads", c_int64), ("head_dim", c_int64), ("ffn", c_int64),
                ("vocab", c_int64), ("n_ctx_train", c_int64), ("rms_eps", c_float), ("rope_theta", c_double),
                ("rope_scaling", c_int), ("rope_factor", c_double), ("rope_low_freq_factor", c_double),
                ("rope_high_freq_factor", c_double), ("rope_orig_ctx", c_int64), ("rope_freq_factors", c_int),
                ("tied_head", c_int),
                ("qkv_bias", c_int), ("qk_norm", c_int), ("qk_permuted", c_int), ("bos", c_int32),
                ("n_eos", c_int32), ("eos", c_int32 * 8), ("n_experts", c_int64), ("n_experts_used", c_int64),
                ("moe_ffn", c_int64), ("moe_routing", c_int32), ("moe_norm_topk", c_int32),
                ("moe_dense", c_uint64 * 16), ("sliding_window", c_int64), ("swa_layers", c_uint64 * 16),
                ("rope_local_theta", ctypes.c_double), ("query_pre_attn_scalar", ctypes.c_double),
                ("final_softcap", ctypes.c_double), ("hidden_act", c_int32), ("embed_scale", c_int32),
                ("q_lora_rank", c_int64), ("kv_lora_rank", c_int64), ("qk_nope_dim", c_int64),
                ("qk_rope_dim", c_int64), ("v_head_dim", c_int64), ("rope_interleave", c_int32),
                ("n_nextn", c_int32), ("rope_beta_fast", c_double), ("rope_beta_slow", c_double),
                ("rope_mscale", c_double), ("rope_mscale_all_dim", c_double), ("moe_n_group", c_int64),
                ("moe_topk_group", c_int64), ("n_shared_experts", c_int64), ("routed_scaling", c_double)]


class RtOpts(ctypes.Structure):  # fp4_rt_opts
    _c_name_ = "fp4_rt_opts"
    _fields_ = [("mode", c_int), ("device", c_int), ("n_threads", c_int), ("n_ctx", c_int64),
                ("max_seqs", c_int32), ("kv_dtype", c_int), ("drafting", c_int), ("cuda_lib", c_char_p),
                ("cuda_device", c_int), ("on_plan", c_void_p), ("plan_user", c_void_p),
                ("tp", c_int)]


class RtTok(ctypes.Structure):  # fp4_rt_tok
    _c_name_ = "fp4_rt_tok"
    _fields_ = [("seq", c_int32), ("token", c_int32), ("want_logits", c_int32)]


class SamplerParams(ctypes.Structure):  # fp4_sampler_params
    _c_name_ = "fp4_sampler_params"
    _fields_ = [("temperature", c_float), ("top_k", c_int32), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("presence_penalty", c_float), ("penalty_last_n", c_int32),
                ("seed", c_uint64)]


class ArgVal(ctypes.Structure):  # fp4_arg_val
    _c_name_ = "fp4_arg_val"
    _fields_ = [("i", c_int64), ("u", c_uint64), ("f", c_double)]


class SessionReq(ctypes.Structure):  # fp4_session_req
    _c_name_ = "fp4_session_req"
    _fields_ = [("prompt", POINTER(c_int32)), ("n_prompt", c_int64), ("sampling", SamplerParams),
                ("max_tokens", c_int64), ("stop_ids", POINTER(c_int32)), ("n_stop_ids", c_int32),
                ("stops", c_void_p), ("n_stops", c_int32), ("tok", c_void_p), ("logprobs", c_int32),
                ("top_logprobs", c_int32), ("prefill_chunk", c_int64)]


class SessionTok(ctypes.Structure):  # fp4_session_tok
    _c_name_ = "fp4_session_tok"
    _fields_ = [("id", c_int32), ("end", c_int32), ("text", c_void_p), ("len", c_size_t), ("logprob", c_float),
                ("n_top", c_int32), ("top_ids", c_void_p), ("top_logprobs", c_void_p)]


SESSION_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(SessionTok))  # fp4_session_fn

STRUCTS = (AbiField, Error, NvFp4View, Fp8View, Tensor, TypeInfo, WriteOpts, QuantizeOpts, Arch, RtOpts,
           RtTok, SamplerParams, ArgVal, SessionReq, SessionTok)

_PROTOS = {
    "fp4_abi_layout": (POINTER(AbiField), [POINTER(c_int64)]),
    "fp4_arg_parse": (c_int, [c_char_p, c_char_p, c_char_p, POINTER(ArgVal), POINTER(Error)]),
    "fp4_rt_check_room": (c_int, [c_void_p, c_int32, c_int64, c_int64, POINTER(Error)]),
    "fp4_model_arch": (c_int, [c_void_p, POINTER(Arch), POINTER(Error)]),
    "fp4_version": (c_char_p, []),
    "fp4_status_str": (c_char_p, [c_int]),
    "fp4_type_get": (POINTER(TypeInfo), [c_int64]),
    "fp4_layout_name": (c_char_p, [c_int]),
    "fp4_layout_from_name": (c_int, [c_char_p, POINTER(c_int)]),
    "fp4_weight_precision_name": (c_char_p, [c_int]),
    "fp4_act_precision_name": (c_char_p, [c_int]),
    "fp4_model_open": (c_int, [c_char_p, c_void_p, POINTER(c_void_p), POINTER(Error)]),
    "fp4_model_close": (None, [c_void_p]),
    "fp4_model_layout": (c_int, [c_void_p]),
    "fp4_model_weight_precision": (c_int, [c_void_p]),
    "fp4_model_act_precision": (c_int, [c_void_p]),
    "fp4_model_n_tensors": (c_int64, [c_void_p]),
    "fp4_model_tensor": (POINTER(Tensor), [c_void_p, c_int64]),
    "fp4_model_find": (POINTER(Tensor), [c_void_p, c_char_p]),
    "fp4_model_file_bytes": (c_uint64, [c_void_p]),
    "fp4_model_config_json": (c_char_p, [c_void_p]),
    "fp4_model_quant_config_json": (c_char_p, [c_void_p]),
    "fp4_tensor_dequant_rows": (c_int, [POINTER(Tensor), c_int64, c_int64, c_void_p]),
    "fp4_model_write": (c_int, [c_void_p, c_char_p, POINTER(WriteOpts), POINTER(Error)]),
    "fp4_quantize_checkpoint": (c_int, [c_char_p, c_char_p, POINTER(QuantizeOpts), POINTER(Error)]),
    "fp4_rt_create": (c_int, [c_void_p, POINTER(RtOpts), POINTER(c_void_p), POINTER(Error)]),
    "fp4_rt_free": (None, [c_void_p]),
    "fp4_rt_arch": (POINTER(Arch), [c_void_p]),
    "fp4_rt_vocab": (c_int64, [c_void_p]),
    "fp4_rt_n_ctx": (c_int64, [c_void_p]),
    "fp4_rt_routes": (c_char_p, [c_void_p]),
    "fp4_rt_seq_open": (c_int, [c_void_p, POINTER(c_int32)]),
    "fp4_rt_seq_close": (None, [c_void_p, c_int32]),
    "fp4_rt_step": (c_int, [c_void_p, POINTER(RtTok), c_int64, c_void_p, POINTER(Error)]),
    "fp4_rt_step_greedy": (c_int, [c_void_p, POINTER(RtTok), c_int64, POINTER(c_int32), POINTER(Error)]),
    "fp4_rt_device_name": (c_char_p, [c_void_p]),
    "fp4_sampler_is_greedy": (c_int, [c_void_p]),
    "fp4_arch_family_name": (c_char_p, [c_int]),
    "fp4_sampler_defaults": (SamplerParams, []),
    "fp4_sampler_create": (c_int, [POINTER(SamplerParams), c_int64, POINTER(c_void_p)]),
    "fp4_sampler_free": (None, [c_void_p]),
    "fp4_sampler_accept": (None, [c_void_p, c_int32]),
    "fp4_sampler_sample": (c_int32, [c_void_p, c_void_p]),
    "fp4_tokenizer_load": (c_int, [c_char_p, POINTER(c_void_p), POINTER(Error)]),
    "fp4_tokenizer_free": (None, [c_void_p]),
    "fp4_session_create": (c_int, [c_void_p, POINTER(SessionReq), SESSION_FN, c_void_p, POINTER(c_void_p),
                                   POINTER(Error)]),
    "fp4_session_run": (c_int, [c_void_p, POINTER(c_int), POINTER(Error)]),
    "fp4_session_run_on": (c_int, [c_void_p, c_int32, POINTER(c_int), POINTER(Error)]),
    "fp4_session_finish": (c_int, [c_void_p]),
    "fp4_session_free": (None, [c_void_p]),
}


def _find():
    env = os.environ.get("FP4LANE_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", "build", "libfp4lane.so")  # a checkout's `make`
    if os.path.exists(built):
        return built
    return ctypes.util.find_library("fp4lane") or "libfp4lane.so"


class LayoutError(ImportError):
    """The library's structs are not what this binding declares (another version of fp4lane)."""


def c_layout(lib):
    """{C struct name: ([(member, offset, size), ...], sizeof)} as the library was compiled."""
    n = c_int64()
    rows = lib.fp4_abi_layout(ctypes.byref(n))
    out = {}
    for k in range(n.value):
        r = rows[k]
        members, _ = out.setdefault(r.type.decode(), ([], None))
        if r.field is None:
            out[r.type.decode()] = (members, r.offset)
        else:
            members.append((r.field.decode(), r.offset, r.size))
    return out


def check_layouts(lib, structs=STRUCTS):
    """Raises LayoutError naming every struct whose ctypes declaration differs from the library's."""
    c = c_layout(lib)
    bad = []
    for cls in structs:
        if cls._c_name_ not in c:
            bad.append("%s: the library has no such struct" % cls._c_name_)
            continue
        members, size = c[cls._c_name_]
        ours = [(name, getattr(cls, name).offset, getattr(cls, name).size) for name, _ in cls._fields_]
        if ours != members or ctypes.sizeof(cls) != size:
            diff = next((("%s at %d (%d bytes) here, %s at %d (%d bytes) in the library" % (a + b))
                         for a, b in zip(ours, members) if a != b), None)
            if diff is None:
                diff = "%d members here, %d in the library; sizeof %d here, %d in the library" % (
                    len(ours), len(members), ctypes.sizeof(cls), size)
            bad.append("%s: %s" % (cls._c_name_, diff))
    if bad:
        raise LayoutError("libfp4lane.so (%s) does not match this binding (python/fp4lane/_lib.py): %s"
                          % (lib._name, "; ".join(bad)))


def load():
    lib = ctypes.CDLL(_find())
    if not hasattr(lib, "fp4_abi_layout"):
        raise LayoutError("libfp4lane.so (%s) is older than this binding: no fp4_abi_layout" % lib._name)
    for name, (res, args) in _PROTOS.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    check_layouts(lib)
    return lib


lib = load()
