"""fp4lane for Python: ctypes over libfp4lane.so (no compiled extension), numpy arrays (numpy
only for the calls that return them).

    import fp4lane
    with fp4lane.open("model.gguf") as m:          # validates, like `fp4lane validate`
        print(m.layout, m.weight_precision, [t.name for t in m.tensors()][:3])
        w = m.tensor("blk.0.attn_q.weight")        # float32, dequantized, shape (n_out, n_in)
        raw = m.tensor("blk.0.attn_q.weight", raw=True)  # {"payload", "scales", "scale2", ...}
        with m.engine() as e:                      # mode="exact" by default, as the CLI
            logits = e.logits([1, 2, 3])           # (3, vocab) float32
            ids = e.generate([1, 2, 3], 8)         # greedy unless sampler options are given
    fp4lane.quantize("hf_dir", "out.gguf")         # gguf-ggml (llama.cpp's layout) for .gguf
    fp4lane.convert("out.gguf", "out_dir", layout="modelopt")

Every failure raises fp4lane.Error with the library's fp4_error fields: code, status, file,
tensor, rule, msg. Numbers given to the engine, the sampler and quantize are parsed and checked by
the library's own argument table (fp4_arg_parse), the one the CLI uses: what the CLI refuses is
refused here, with the same rule (arg.threads, arg.top_p, ...).

numpy is needed only by the calls that return arrays (Model.tensor, Engine.logits): opening,
validating, inspecting, quantizing, converting and generating work without it.

The library is found through $FP4LANE_LIB, then the checkout's build/libfp4lane.so, then the
system's loader path (`make install`)."""
import ctypes
import json
import numbers
import os
import queue
import threading

from . import _lib as L
from ._lib import lib

__all__ = ["Error", "version", "open", "validate", "quantize", "convert", "Model", "TensorInfo", "Engine"]

LAYOUTS = ("none", "gguf", "gguf-ggml", "modelopt", "compressed-tensors")
_NVFP4 = 1024
_FP8 = 1025  # FP8 weights (E4M3FN bytes + fp4_fp8_view scales)
_NUMPY_OF_TYPE = {0: "float32", 1: "float16", 24: "int8", 25: "int16", 26: "int32", 27: "int64",
                  28: "float64", 30: "uint16", 1026: "uint8"}  # BF16 as its uint16 bits


def _np():
    """numpy, imported by the calls that return arrays only."""
    try:
        import numpy
    except ImportError as e:
        raise ImportError("fp4lane: this call returns numpy arrays and numpy is not installed "
                          "(Debian: apt-get install python3-numpy, then use /usr/bin/python3)") from e
    return numpy


class Error(Exception):
    """A refusal or failure of libfp4lane: the fp4_error it filled."""

    def __init__(self, code, file="", tensor="", rule="", msg=""):
        self.code = code
        self.status = lib.fp4_status_str(code).decode()
        self.file, self.tensor, self.rule, self.msg = file, tensor, rule, msg
        parts = [self.status]
        if rule:
            parts.append("[%s]" % rule)
        if file:
            parts.append(file)
        if tensor:
            parts.append("tensor %s" % tensor)
        if msg:
            parts.append(msg)
        super().__init__(": ".join([parts[0], " ".join(parts[1:])]) if len(parts) > 1 else parts[0])


def _raise(code, err=None):
    if code == 0:
        return
    if err is None:
        raise Error(code)
    raise Error(code, err.file.decode(errors="replace"), err.tensor.decode(errors="replace"),
                err.rule.decode(errors="replace"), err.msg.decode(errors="replace"))


def _b(s):
    return s.encode() if isinstance(s, str) else bytes(s)


def _arg(name, value, label=None):
    """value checked by the library's argument table (fp4_arg_parse, as the CLI's options): an
    fp4_arg_val, or fp4lane.Error (rule "arg.<name>"). Numbers only; their decimal text is parsed
    in C, so no value is cut to a C type's width before it is checked."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number, not %s" % (label or name, type(value).__name__))
    text = repr(float(value)) if isinstance(value, float) else str(value)
    v, err = L.ArgVal(), L.Error()
    _raise(lib.fp4_arg_parse(_b(name), _b(label or name), _b(text), ctypes.byref(v), ctypes.byref(err)), err)
    return v


def _ids(ids):
    """Token ids, each checked as the CLI checks --prompt-ids (the library's "token" argument)."""
    return [int(_arg("token", t, "ids[%d]" % k).i) for k, t in enumerate(ids)]


def version():
    return lib.fp4_version().decode()


def _layout(name):
    v = ctypes.c_int()
    if name is None or lib.fp4_layout_from_name(_b(name), ctypes.byref(v)) != 0:
        raise ValueError("unknown layout %r (one of %s)" % (name, ", ".join(LAYOUTS)))
    return v.value


class TensorInfo:
    """One logical tensor: name, type name, shape (row-major: (..., n_out, n_in)), bytes in the file."""

    def __init__(self, t):
        self.name = t.name.decode()
        self.type_id = t.type
        info = lib.fp4_type_get(t.type)
        self.type = info.contents.name.decode() if info else str(t.type)
        self.shape = tuple(t.ne[i] for i in reversed(range(t.n_dims)))
        self.nbytes = (t.nvfp4.n_out * t.nvfp4.n_in * 9 // 16) if t.type == _NVFP4 else t.nbytes
        self.scale2 = t.nvfp4.scale2 if t.type == _NVFP4 else None

    def __repr__(self):
        return "TensorInfo(%r, %s, %s)" % (self.name, self.type, self.shape)


class _Owned:
    """A library handle in self._h, freed once by the library function named _free: on close(), at
    the end of a with block, or when the object is collected."""

    _free = None

    def close(self):
        if getattr(self, "_h", None):
            getattr(lib, self._free)(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Model(_Owned):
    """A checkpoint opened and validated by fp4_model_open (GGUF file, .safetensors, HF directory)."""

    _free = "fp4_model_close"

    def __init__(self, path):
        self.path = str(path)
        err = L.Error()
        h = ctypes.c_void_p()
        _raise(lib.fp4_model_open(_b(self.path), None, ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h

    def _handle(self):
        if not self._h:
            raise ValueError("the model is closed")
        return self._h

    @property
    def layout(self):
        return lib.fp4_layout_name(lib.fp4_model_layout(self._handle())).decode()

    @property
    def weight_precision(self):
        return lib.fp4_weight_precision_name(lib.fp4_model_weight_precision(self._handle())).decode()

    @property
    def act_precision(self):
        return lib.fp4_act_precision_name(lib.fp4_model_act_precision(self._handle())).decode()

    @property
    def file_bytes(self):
        return lib.fp4_model_file_bytes(self._handle())

    @property
    def config(self):
        """config.json as a dict (HF checkpoints), or None."""
        s = lib.fp4_model_config_json(self._handle())
        return json.loads(s.decode()) if s else None

    def _tensor(self, name):
        p = lib.fp4_model_find(self._handle(), _b(name))
        if not p:
            raise Error(16, self.path, name, "tensor.name", "no tensor named %s" % name)
        return p.contents

    def tensors(self):
        h = self._handle()
        return [TensorInfo(lib.fp4_model_tensor(h, i).contents) for i in range(lib.fp4_model_n_tensors(h))]

    def inspect(self):
        """What `fp4lane inspect --json` reports, as a dict."""
        return {"path": self.path, "layout": self.layout, "weight_precision": self.weight_precision,
                "activation_precision": self.act_precision, "file_bytes": self.file_bytes,
                "tensors": [{"name": t.name, "type": t.type, "shape": list(t.shape), "scale2": t.scale2}
                            for t in self.tensors()]}

    def tensor(self, name, raw=False):
        """The tensor as numpy: dequantized float32 (shape (..., n_out, n_in)) by default; raw=True:
        an NVFP4 weight as {"payload": uint8 (n_out, n_in/2), "scales": uint8 (n_out, n_in/16),
        "scale2": float, "input_scale_inv": float}, an FP8 weight as {"weight": uint8 (n_out, n_in),
        "scale": float or float32 (n_out,), "input_scale": float}, any other tensor as its element type
        (BF16 as uint16 bits; block types as uint8 bytes). Arrays are copies: they outlive the model."""
        np = _np()
        t = self._tensor(name)
        shape = tuple(t.ne[i] for i in reversed(range(t.n_dims)))
        if raw:
            if t.type == _NVFP4:
                v = t.nvfp4
                pay = np.ctypeslib.as_array(ctypes.cast(v.payload, ctypes.POINTER(ctypes.c_uint8)),
                                            (v.n_out * v.n_in // 2,)).copy().reshape(v.n_out, v.n_in // 2)
                sc = np.ctypeslib.as_array(ctypes.cast(v.scales, ctypes.POINTER(ctypes.c_uint8)),
                                           (v.n_out * v.n_in // 16,)).copy().reshape(v.n_out, v.n_in // 16)
                return {"payload": pay, "scales": sc, "scale2": float(v.scale2),
                        "input_scale_inv": float(v.input_scale_inv)}
            data = np.frombuffer(ctypes.string_at(t.data, t.nbytes), dtype=np.uint8).copy()
            if t.type == _FP8:  # an FP8 weight: E4M3FN bytes and its per-tensor, per-row or block scales
                f = t.fp8
                scale = (np.ctypeslib.as_array(f.row_scale, (f.n_out,)).copy() if f.row_scale
                         else float(f.scale))
                if f.block_scale:
                    nb = (-(-f.n_out // f.block_rows), -(-f.n_in // f.block_cols))
                    scale = np.ctypeslib.as_array(f.block_scale, (nb[0] * nb[1],)).copy().reshape(nb)
                return {"weight": data.reshape(f.n_out, f.n_in), "scale": scale,
                        "input_scale": float(f.input_scale)}
            dt = _NUMPY_OF_TYPE.get(t.type)
            return data.view(np.dtype(dt)).reshape(shape if shape else ()) if dt is not None else data
        n_in = t.ne[0] if t.n_dims > 0 else 1
        rows = 1
        for i in range(1, max(t.n_dims, 1)):
            rows *= t.ne[i]
        out = np.empty((rows, n_in), dtype=np.float32)
        _raise(lib.fp4_tensor_dequant_rows(ctypes.byref(t), 0, rows, out.ctypes.data_as(ctypes.c_void_p)))
        return out.reshape(shape if shape else ())

    def write(self, out, layout, force=False):
        """Re-layout (fp4lane convert): no float is computed; round trips are byte-identical. An
        existing output (a file, or a non-empty directory) is refused unless force."""
        err = L.Error()
        o = L.WriteOpts(layout=_layout(layout), force=int(bool(force)))
        _raise(lib.fp4_model_write(self._handle(), _b(str(out)), ctypes.byref(o), ctypes.byref(err)), err)

    def engine(self, mode="exact", threads=1, n_ctx=None, max_seqs=1, device="cpu", cuda_lib=None):
        return Engine(self, mode=mode, threads=threads, n_ctx=n_ctx, max_seqs=max_seqs, device=device,
                      cuda_lib=cuda_lib)


def open(path):  # noqa: A001 - the module's verb, like the CLI's
    """Open and validate a checkpoint; raises fp4lane.Error naming the file, tensor and rule."""
    return Model(path)


def validate(path):
    """None when fp4lane accepts the checkpoint, else fp4lane.Error (as `fp4lane validate`)."""
    Model(path).close()


def _default_layout(out, layout):
    if layout is not None:
        return _layout(layout)
    return _layout("gguf-ggml" if str(out).endswith(".gguf") else "modelopt")


def quantize(inp, out, layout=None, to="nvfp4", scale2_rule="gpu", no_fusion=False, quantize_embeddings=False,
             shard_size=0, force=False):
    """Quantize an unquantized checkpoint (fp4lane quantize). layout: None picks gguf-ggml for a
    .gguf name, else modelopt; to: "nvfp4" or "q4_k". An existing output is refused unless force."""
    if to not in ("nvfp4", "q4_k"):
        raise ValueError("to must be 'nvfp4' or 'q4_k'")
    if scale2_rule not in ("gpu", "cpu"):
        raise ValueError("scale2_rule must be 'gpu' or 'cpu'")
    o = L.QuantizeOpts(layout=_default_layout(out, layout), to_q4_k=int(to == "q4_k"),
                       rule=int(scale2_rule == "cpu"), no_fusion=int(bool(no_fusion)),
                       quantize_embeddings=int(bool(quantize_embeddings)),
                       max_shard_bytes=_arg("shard_size", shard_size).u, force=int(bool(force)))
    err = L.Error()
    _raise(lib.fp4_quantize_checkpoint(_b(str(inp)), _b(str(out)), ctypes.byref(o), ctypes.byref(err)), err)


def convert(inp, out, layout=None, force=False):
    """Re-layout a checkpoint (fp4lane convert); layout None: gguf-ggml for a .gguf name. An existing
    output is refused unless force."""
    if layout is None and not str(out).endswith(".gguf"):
        raise ValueError("convert needs a layout unless the output name ends in .gguf")
    with Model(inp) as m:
        m.write(out, layout or "gguf-ggml", force=force)


# fp4_sampler_params members and the fp4_arg_val member their value is read from
_SAMPLER_ARGS = (("temperature", "f"), ("top_k", "i"), ("top_p", "f"), ("min_p", "f"),
                 ("repeat_penalty", "f"), ("presence_penalty", "f"), ("penalty_last_n", "i"), ("seed", "u"))
_ARCH_ENUMS = {"source": ("hf", "gguf"), "rope_scaling": ("none", "linear", "llama3", "yarn"),
               "moe_routing": ("none", "softmax_topk", "topk_softmax", "sigmoid_group"),
               "hidden_act": ("silu", "gelu_tanh")}


def _arch_dict(a):
    """Every fp4_arch member under its C name (as `fp4lane inspect --json` prints "arch"): family,
    source and rope_scaling by name, the flags as bools, eos as the list of its n_eos ids; plus the
    short names of earlier versions (layers, heads, kv_heads)."""
    d = {}
    for name, ctype in L.Arch._fields_:
        v = getattr(a, name)
        if name == "family":
            v = lib.fp4_arch_family_name(v).decode()
        elif name in _ARCH_ENUMS:
            v = _ARCH_ENUMS[name][v] if 0 <= v < len(_ARCH_ENUMS[name]) else v
        elif name in ("rope_freq_factors", "tied_head", "qkv_bias", "qk_norm", "qk_permuted", "moe_norm_topk",
                      "embed_scale", "rope_interleave"):
            v = bool(v)
        elif name in ("moe_dense", "swa_layers"):  # layers with a dense MLP / a sliding window (a bit each)
            v = [i for i in range(min(a.n_layers, 64 * len(v))) if (v[i // 64] >> (i % 64)) & 1]
        elif name == "eos":
            v = list(v[:max(0, min(a.n_eos, len(v)))])
        d[name] = v
    d.update(layers=a.n_layers, heads=a.n_heads, kv_heads=a.n_kv_heads)
    return d


class Engine(_Owned):
    """The decode runtime (fp4lane_runtime.h) over an open model, on the CPU or (device="cuda",
    libfp4lane_cuda.so found as the runtime finds it, or at cuda_lib) on the GPU. mode "exact" (the
    default, as `fp4lane run`) or "native"; threads, n_ctx (None: the model's, as the CLI without
    --ctx) and max_seqs are checked as the CLI checks --threads and --ctx."""

    _free = "fp4_rt_free"

    def close(self):
        if getattr(self, "_tok", None):  # generate(stream=True)'s tokenizer
            lib.fp4_tokenizer_free(self._tok)
            self._tok = None
        super().close()

    def __init__(self, model, mode="exact", threads=1, n_ctx=None, max_seqs=1, device="cpu", cuda_lib=None):
        if mode not in ("exact", "native"):
            raise ValueError("mode must be 'exact' or 'native'")
        if device not in ("cpu", "cuda"):
            raise ValueError("device must be 'cpu' or 'cuda'")
        self.model = model  # kept alive: the engine borrows it
        self._cuda_lib = None if cuda_lib is None else _b(cuda_lib)  # kept alive: read by create
        o = L.RtOpts(mode=0 if mode == "exact" else 1, device=0 if device == "cpu" else 1,
                     n_threads=_arg("threads", threads).i,
                     n_ctx=0 if n_ctx is None else _arg("ctx", n_ctx, "n_ctx").i,
                     max_seqs=_arg("max_seqs", max_seqs).i, cuda_lib=self._cuda_lib)
        err = L.Error()
        h = ctypes.c_void_p()
        _raise(lib.fp4_rt_create(model._handle(), ctypes.byref(o), ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h
        self.mode = mode
        self.vocab = lib.fp4_rt_vocab(h)
        self.n_ctx = lib.fp4_rt_n_ctx(h)
        self.routes = lib.fp4_rt_routes(h).decode()
        self.device = lib.fp4_rt_device_name(h).decode()
        self.arch = _arch_dict(lib.fp4_rt_arch(h).contents)
        self.stopped_by = None

    def _step(self, seq, ids, want_all, out):
        """ids as one step of seq; logits of every column (want_all) or of the last into out (a
        buffer of that many rows of vocab floats)."""
        n = len(ids)
        cols = (L.RtTok * n)(*[L.RtTok(seq, t, int(want_all or i == n - 1)) for i, t in enumerate(ids)])
        err = L.Error()
        _raise(lib.fp4_rt_step(self._h, cols, n, out, ctypes.byref(err)), err)

    def _step_greedy(self, seq, ids):
        """ids as one step of seq; the greedy id after its last (fp4_rt_step_greedy: on CUDA only
        the id leaves the device)."""
        n = len(ids)
        cols = (L.RtTok * n)(*[L.RtTok(seq, t, int(i == n - 1)) for i, t in enumerate(ids)])
        tok = ctypes.c_int32(-1)
        err = L.Error()
        _raise(lib.fp4_rt_step_greedy(self._h, cols, n, ctypes.byref(tok), ctypes.byref(err)), err)
        return tok.value

    def _open_seq(self):
        if not self._h:
            raise ValueError("the engine is closed")
        s = ctypes.c_int32()
        _raise(lib.fp4_rt_seq_open(self._h, ctypes.byref(s)))
        return s.value

    def logits(self, ids):
        """Logits at every position of ids, as one fresh sequence: float32 (len(ids), vocab).
        Each id is checked as the CLI checks --prompt-ids, then against the vocabulary."""
        np = _np()
        ids = _ids(ids)
        if not ids:
            raise ValueError("ids is empty")
        out = np.empty((len(ids), self.vocab), dtype=np.float32)
        seq = self._open_seq()
        try:
            self._step(seq, ids, True, out.ctypes.data_as(ctypes.c_void_p))
        finally:
            lib.fp4_rt_seq_close(self._h, seq)
        return out

    def generate(self, ids, n, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                 presence_penalty=0.0, penalty_last_n=0, seed=0, stop=None, stream=False):
        """n new ids after the prompt ids (greedy by default; seeded sampling otherwise), as
        `fp4lane run --prompt-ids`: every argument is checked first with the CLI's ranges, and a
        prompt plus n that does not fit in the context is refused before any step (fp4lane.Error,
        rule "rt.context"), never cut short. Stops early at an id in stop (default: the model's eos
        ids); self.stopped_by then says "stop", else "n". If a step fails midway, the Error raised
        carries the ids generated before it in .generated. Both forms run the library's generation
        loop (fp4_session_run_on: the one `fp4lane run`, chat and the server use).

        stream=True: a generator of the answer's text, piece by piece as the ids come (whole UTF-8
        characters, special tokens skipped), from the library's generation loop (fp4_session, the
        one `fp4lane run` and the server use) on a thread of its own; the ids are those of
        stream=False. Closing the generator early cancels the generation before its next step."""
        ids = _ids(ids)
        if not ids:
            raise ValueError("ids is empty")
        n = _arg("n", n).i
        given = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                     repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                     penalty_last_n=penalty_last_n, seed=seed)
        p = lib.fp4_sampler_defaults()
        for name, kind in _SAMPLER_ARGS:
            v = _arg(name, given[name])
            setattr(p, name, getattr(v, kind))
        self.stopped_by = None
        if not self._h:
            raise ValueError("the engine is closed")
        err = L.Error()
        _raise(lib.fp4_rt_check_room(self._h, -1, len(ids), n, ctypes.byref(err)), err)
        if stream:
            stop = list(self.arch["eos"] if stop is None else stop)
            if len(stop) > 64:  # FP4_SESSION_MAX_STOP_IDS
                raise ValueError("stop: at most 64 ids when streaming")
            return self._stream(ids, n, p, stop)
        stop = list(self.arch["eos"] if stop is None else stop)
        out = []
        if n > 0:
            self._ids_loop(ids, n, p, stop, out)
        self.stopped_by = "stop" if out and out[-1] in stop else "n"
        return out

    def _on_id(self, seq, out):
        """called with every id generate(stream=False) takes, on the loop's thread (a test's hook)"""

    def _ids_loop(self, ids, n, p, stop, out):
        """generate(stream=False): the library's loop (fp4_session_run_on, as `fp4lane run` and the
        server) on a sequence of this engine, on a thread of its own so that Ctrl-C cancels it
        before its next step; the prompt as one step, the ids into out. More than 64 stop ids
        (FP4_SESSION_MAX_STOP_IDS) end the loop from the callback instead: the same ids."""
        in_req = stop if len(stop) <= 64 else []
        far = set(stop) if not in_req else ()
        prompt = (ctypes.c_int32 * len(ids))(*ids)
        stops = (ctypes.c_int32 * max(len(in_req), 1))(*in_req)
        req = L.SessionReq(prompt=prompt, n_prompt=len(ids), sampling=p, max_tokens=n, stop_ids=stops,
                           n_stop_ids=len(in_req), prefill_chunk=len(ids))
        cancel = ctypes.c_int(0)
        seq = self._open_seq()

        def on_tok(user, t):
            t = t.contents
            if t.id < 0:
                return 0
            out.append(t.id)
            self._on_id(seq, out)
            return int(t.id in far or bool(cancel.value))

        fn = L.SESSION_FN(on_tok)  # kept alive until the loop ends
        s = ctypes.c_void_p()
        err = L.Error()
        try:
            _raise(lib.fp4_session_create(self._h, ctypes.byref(req), fn, None, ctypes.byref(s),
                                          ctypes.byref(err)), err)
            res = {}

            def run():
                res["st"] = lib.fp4_session_run_on(s, seq, ctypes.byref(cancel), ctypes.byref(err))

            th = threading.Thread(target=run, daemon=True)
            th.start()
            try:
                while th.is_alive():
                    th.join(0.05)
            except BaseException:
                cancel.value = 1
                th.join()
                raise
            _raise(res["st"], err)
        except Error as e:
            e.generated = list(out)
            raise
        finally:
            lib.fp4_session_free(s)
            lib.fp4_rt_seq_close(self._h, seq)

    def _tokenizer(self):
        """the model's tokenizer, loaded once (a .safetensors file's from its folder)"""
        if getattr(self, "_tok", None) is None:
            path = self.model.path
            if path.endswith(".safetensors"):
                path = os.path.dirname(os.path.abspath(path))
            err = L.Error()
            h = ctypes.c_void_p()
            _raise(lib.fp4_tokenizer_load(_b(path), ctypes.byref(h), ctypes.byref(err)), err)
            self._tok = h
        return self._tok

    def _stream(self, ids, n, p, stop):
        """generate(stream=True): fp4_session_run on a thread, its text through a queue"""
        self.stopped_by = None
        if n == 0:
            self.stopped_by = "n"
            return
        prompt = (ctypes.c_int32 * len(ids))(*ids)
        stops = (ctypes.c_int32 * max(len(stop), 1))(*stop)
        req = L.SessionReq(prompt=prompt, n_prompt=len(ids), sampling=p, max_tokens=n, stop_ids=stops,
                           n_stop_ids=len(stop), tok=self._tokenizer(), prefill_chunk=len(ids))
        q = queue.Queue()
        cancel = ctypes.c_int(0)
        got = []

        def on_tok(user, t):
            t = t.contents
            if t.id >= 0:
                got.append(t.id)
            if t.text and t.len:
                q.put(ctypes.string_at(t.text, t.len).decode("utf-8", "replace"))
            return cancel.value

        fn = L.SESSION_FN(on_tok)  # kept alive until the thread ends
        s = ctypes.c_void_p()
        err = L.Error()
        _raise(lib.fp4_session_create(self._h, ctypes.byref(req), fn, None, ctypes.byref(s), ctypes.byref(err)),
               err)
        result = {}

        def run():
            try:
                result["st"] = lib.fp4_session_run(s, ctypes.byref(cancel), ctypes.byref(result.setdefault(
                    "err", L.Error())))
            finally:
                q.put(None)

        th = threading.Thread(target=run, daemon=True)
        th.start()
        try:
            while True:
                piece = q.get()
                if piece is None:
                    break
                yield piece
        finally:
            cancel.value = 1
            th.join()
            lib.fp4_session_free(s)
        if result.get("st"):
            try:
                _raise(result["st"], result["err"])
            except Error as e:
                e.generated = got
                raise
        self.stopped_by = "stop" if got and got[-1] in stop else "n"
