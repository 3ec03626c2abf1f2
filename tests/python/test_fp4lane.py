"""The Python binding (python/fp4lane) against the CLI and against numpy's own arithmetic.
Run by tests/test_python.c with /usr/bin/python3 (Debian's python3-numpy), PYTHONPATH=python and
FP4LANE_LIB=<build>/libfp4lane.so; the last line is "PYRESULT run=N failed=F"."""
import os
import shutil
import subprocess
import sys
import ctypes
import tempfile
import unittest

import numpy as np

import fp4lane

BUILD = os.environ.get("FP4_BUILD", "build")
CLI = os.path.join(BUILD, "fp4lane")
TINY = "models/tiny"
LLAMA = "tests/data/hf/llama"

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def e4m3fn(b):
    """E4M3FN bytes -> float32, written from the format's definition (no table shared with C)."""
    b = b.astype(np.int32)
    s = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 15
    m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    return (s * v).astype(np.float32)


def cli(*args):
    r = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode:
        raise AssertionError("fp4lane %s: %s" % (" ".join(map(str, args)), r.stderr))
    return r.stdout


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="fp4lane-py-")
        cls.gguf = os.path.join(cls.tmp, "llama.gguf")
        fp4lane.quantize(LLAMA, cls.gguf)  # .gguf, no layout: gguf-ggml

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_version(self):
        self.assertEqual(cli("--version").split()[-1], fp4lane.version())

    def test_open_inspect(self):
        with fp4lane.open(TINY) as m:
            self.assertEqual((m.layout, m.weight_precision, m.act_precision), ("modelopt", "nvfp4", "a16"))
            ts = {t.name: t for t in m.tensors()}
            q = ts["model.layers.0.self_attn.q_proj.weight"]
            self.assertEqual((q.type, q.shape), ("nvfp4_e2m1", (256, 256)))
            self.assertEqual(m.config["model_type"], "llama")
            info = m.inspect()
            self.assertEqual(len(info["tensors"]), len(ts))
        with fp4lane.open(self.gguf) as g:
            names = {t.name for t in g.tensors()}
            self.assertIn("blk.0.attn_q.weight", names)  # llama.cpp's names
            self.assertEqual(g.layout, "gguf-ggml")

    def test_dequant_matches_numpy(self):
        """dequantized = (e2m1 · e4m3) · scale2, recomputed here from the raw bytes"""
        with fp4lane.open(TINY) as m:
            name = "model.layers.3.mlp.down_proj.weight"
            raw = m.tensor(name, raw=True)
            w = m.tensor(name)
            pay, sc = raw["payload"], raw["scales"]
            codes = np.stack([pay & 15, pay >> 4], axis=-1).reshape(pay.shape[0], -1)
            scale = np.repeat(e4m3fn(sc), 16, axis=1)
            ref = (E2M1[codes] * scale).astype(np.float32) * np.float32(raw["scale2"])
            self.assertEqual(w.shape, (256, 1024))
            self.assertTrue(np.array_equal(w.view(np.uint32), ref.astype(np.float32).view(np.uint32)))

    def test_raw_plain(self):
        with fp4lane.open(TINY) as m:
            bits = m.tensor("model.norm.weight", raw=True)
            self.assertEqual(bits.dtype, np.uint16)
            self.assertTrue(np.array_equal((bits.astype(np.uint32) << 16).view(np.float32),
                                           m.tensor("model.norm.weight")))

    def test_fp8_weight(self):
        """An FP8 weight (E4M3FN + per-tensor weight_scale, ModelOpt names) written here as a bare
        safetensors file: the fp8 lane, the raw bytes and scales, dequantized = e4m3fn · scale"""
        import json
        import struct
        rng = np.random.default_rng(5)
        w = rng.integers(0, 256, size=(4, 32), dtype=np.uint8)
        w[(w & 0x7F) == 0x7F] ^= 1  # no NaN bytes
        scale = np.array(0.0123, dtype=np.float32)
        blobs = [("m.weight", "F8_E4M3", [4, 32], w.tobytes()),
                 ("m.weight_scale", "F32", [], scale.tobytes())]
        header, off = {}, 0
        for name, dt, shape, data in blobs:
            header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
            off += len(data)
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        path = os.path.join(self.tmp, "fp8.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(b[3] for b in blobs))
        with fp4lane.open(path) as m:
            self.assertEqual(m.weight_precision, "fp8")
            raw = m.tensor("m.weight", raw=True)
            self.assertTrue(np.array_equal(raw["weight"], w))
            self.assertEqual(raw["scale"], float(scale))
            self.assertEqual(raw["input_scale"], 0.0)
            ref = e4m3fn(w) * scale
            self.assertTrue(np.array_equal(m.tensor("m.weight").view(np.uint32), ref.view(np.uint32)))

    def test_convert_round_trip(self):
        out = os.path.join(self.tmp, "tiny.gguf")
        fp4lane.convert(TINY, out, layout="gguf")
        back = os.path.join(self.tmp, "tiny_back")
        fp4lane.convert(out, back, layout="modelopt")
        with open(os.path.join(TINY, "model.safetensors"), "rb") as a, \
                open(os.path.join(back, "model.safetensors"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        with self.assertRaises(ValueError):
            fp4lane.convert(TINY, os.path.join(self.tmp, "nolayout"))
        # an existing output file is refused unless force (its bytes kept), replaced with it
        keep = os.path.join(self.tmp, "keep.gguf")
        with open(keep, "wb") as f:
            f.write(b"the user's file")
        with self.assertRaises(fp4lane.Error) as cm:
            fp4lane.convert(TINY, keep, layout="gguf")
        self.assertEqual(cm.exception.rule, "out.exists")
        with open(keep, "rb") as f:
            self.assertEqual(f.read(), b"the user's file")
        fp4lane.convert(TINY, keep, layout="gguf", force=True)
        fp4lane.validate(keep)

    def test_quantize_q4k_and_errors(self):
        out = os.path.join(self.tmp, "q4k.gguf")
        fp4lane.quantize(LLAMA, out, to="q4_k")
        with fp4lane.open(out) as m:
            self.assertEqual((m.layout, m.weight_precision), ("none", "q4_k"))
        with self.assertRaises(fp4lane.Error) as cm:
            fp4lane.quantize(TINY, os.path.join(self.tmp, "again.gguf"))
        e = cm.exception
        self.assertEqual((e.status, e.rule), ("unsupported", "quantize.already"))
        self.assertTrue(e.tensor.startswith("model.layers."))

    def test_refusal_names_file_and_rule(self):
        bad = os.path.join(self.tmp, "truncated.gguf")
        with open(self.gguf, "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        with self.assertRaises(fp4lane.Error) as cm:
            fp4lane.validate(bad)
        e = cm.exception
        self.assertNotEqual(e.code, 0)
        self.assertTrue(e.rule)
        self.assertIn("truncated.gguf", e.file)
        self.assertIn(e.rule, str(e))
        with fp4lane.open(TINY) as m, self.assertRaises(fp4lane.Error) as cm:
            m.tensor("no.such.tensor")
        self.assertEqual((cm.exception.status, cm.exception.tensor), ("not found", "no.such.tensor"))

    def test_logits_match_cli(self):
        ids = [1, 7, 42, 300, 5, 9]
        npy = os.path.join(self.tmp, "l.npy")
        cli("run", self.gguf, "--prompt-ids", ",".join(map(str, ids)), "-n", "1", "--mode", "exact",
            "--logits-out", npy)
        theirs = np.load(npy)
        with fp4lane.open(self.gguf) as m, m.engine(mode="exact", threads=2) as e:
            self.assertEqual(e.arch["family"], "llama")
            ours = e.logits(ids)
        self.assertEqual(ours.shape, (len(ids), 512))
        self.assertTrue(np.array_equal(ours.view(np.uint32), theirs[: len(ids)].view(np.uint32)))

    def test_generate_matches_cli(self):
        out = cli("run", self.gguf, "--prompt-ids", "3,1,4,1,5", "-n", "6", "--mode", "native",
                  "--ignore-eos")
        want = [int(x) for x in out.splitlines()[0].split()]
        with fp4lane.open(self.gguf) as m, m.engine(mode="native") as e:
            got = e.generate([3, 1, 4, 1, 5], 6, stop=[])
            self.assertEqual(got, want)
            a = e.generate([3, 1, 4], 5, temperature=0.8, top_k=40, seed=7, stop=[])
            b = e.generate([3, 1, 4], 5, temperature=0.8, top_k=40, seed=7, stop=[])
            self.assertEqual(a, b)  # seeded
        out = cli("run", self.gguf, "--prompt-ids", "3,1,4", "-n", "5", "--mode", "native", "--ignore-eos",
                  "--temp", "0.8", "--top-k", "40", "--seed", "7")
        self.assertEqual(a, [int(x) for x in out.splitlines()[0].split()])  # sampled: run's ids too
        with self.assertRaises(ValueError):
            fp4lane.open(self.gguf).engine(mode="fast")

    def test_greedy_steps_and_device(self):
        # greedy generate takes fp4_rt_step_greedy; each id must be the first argmax of the logits
        # of everything before it (computed apart, as one sequence)
        with fp4lane.open(self.gguf) as m, m.engine(mode="exact") as e:
            self.assertEqual(e.device, "cpu")
            prompt = [3, 1, 4, 1, 5]
            got = e.generate(prompt, 8, stop=[])
            self.assertEqual(len(got), 8)
            lg = e.logits(prompt + got[:-1])
            want = [int(np.argmax(lg[len(prompt) - 1 + i])) for i in range(8)]
            self.assertEqual(got, want)
        with fp4lane.open(self.gguf) as m:
            with self.assertRaises(ValueError):
                m.engine(device="gpu")
            with self.assertRaises(fp4lane.Error) as cm:  # a library that is not there: refused, named
                m.engine(device="cuda", cuda_lib="/nonexistent/libfp4lane_cuda.so")
            self.assertIn("nonexistent", str(cm.exception))

    def test_arch_every_field_matches_cli(self):
        """Engine.arch holds every fp4_arch member, each equal to `fp4lane inspect --json`'s "arch"
        (a member missing from the ctypes struct shifted the later ones: eos read as [])"""
        import json
        c_members = [name for name, _ in fp4lane._lib.Arch._fields_]
        for path in (TINY, self.gguf):
            theirs = json.loads(cli("inspect", path, "--json"))["arch"]
            with fp4lane.open(path) as m, m.engine() as e:
                ours = dict(e.arch)
            for k in ["eos", "bos"] + sorted(theirs):  # the ids generate stops at first
                self.assertEqual(ours.get(k), theirs[k], "%s: arch.%s" % (path, k))
            self.assertEqual(sorted(theirs), sorted(c_members))
        with fp4lane.open(TINY) as m, m.engine() as e:
            self.assertEqual(e.arch["eos"], [1])  # models/tiny's eos_token_id
            self.assertEqual((e.arch["bos"], e.arch["vocab"], e.arch["n_ctx_train"]), (0, 4096, 512))

    def test_layouts_checked_at_import(self):
        """every mirrored struct equals the library's layout; a drifted declaration is refused"""
        L = fp4lane._lib
        L.check_layouts(L.lib)
        self.assertEqual({c._c_name_ for c in L.STRUCTS}, set(L.c_layout(L.lib)))

        class OldArch(ctypes.Structure):  # the declaration before rope_freq_factors
            _c_name_ = "fp4_arch"
            _fields_ = [f for f in L.Arch._fields_ if f[0] != "rope_freq_factors"]

        with self.assertRaises(L.LayoutError) as cm:
            L.check_layouts(L.lib, [OldArch])
        self.assertIn("fp4_arch", str(cm.exception))
        self.assertIn("rope_freq_factors", str(cm.exception))

    def test_generate_past_context_refused_up_front(self):
        """generate(ids, n) with ids + n past the context: refused before any step, like `fp4lane run`
        (exit 2, "past the context length"), never decoded to the end and then lost"""
        with fp4lane.open(TINY) as m, m.engine() as e:
            self.assertEqual(e.n_ctx, 512)
            calls = []  # no id taken: refused before the library's loop stepped
            e._on_id = lambda *a: calls.append(1)
            with self.assertRaises(fp4lane.Error) as cm:
                e.generate([1, 2, 3], 600)
            self.assertEqual((cm.exception.rule, calls), ("rt.context", []))
            self.assertIn("600", cm.exception.msg)
            r = subprocess.run([CLI, "run", TINY, "--prompt-ids", "1,2,3", "-n", "600"], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("past the context length 512", r.stderr)
            got = e.generate([1, 2, 3], 509, stop=[])  # exactly the context: every id
            self.assertEqual((len(got), e.stopped_by), (509, "n"))
            got = e.generate([1, 2, 3], 4, stop=[65])
            self.assertEqual(e.stopped_by, "stop" if got[-1] == 65 else "n")

    def test_generate_stream(self):
        """stream=True: text pieces from the library's loop (fp4_session), the ids of stream=False
        (which equal `fp4lane run`'s) as text; an early close cancels"""
        prompt = [0, 655, 1166, 2956]  # BOS, "This section describes"
        for kw in ({}, dict(temperature=0.8, top_k=40, seed=7)):
            with fp4lane.open(TINY) as m, m.engine() as e:
                want = e.generate(prompt, 12, stop=[], **kw)
                pieces = list(e.generate(prompt, 12, stop=[], stream=True, **kw))
                self.assertEqual(e.stopped_by, "n")
                self.assertTrue(len(pieces) > 1 and all(isinstance(p, str) for p in pieces))
                text = cli("detokenize", TINY, *want, "--skip-special")
                self.assertEqual("".join(pieces), text[:-1] if text.endswith("\n") else text)
        with fp4lane.open(TINY) as m, m.engine() as e:
            g = e.generate(prompt, 400, stop=[], stream=True, temperature=0.8, seed=1)
            next(g)
            g.close()  # cancelled before its next step: the engine is free again
            self.assertEqual(e.generate(prompt, 3, stop=[]), e.generate(prompt, 3, stop=[]))
            with self.assertRaises(ValueError):
                list(e.generate(prompt, 3, stop=list(range(65)), stream=True))
            many = list(range(1100, 1200))  # past the loop's 64 stop ids: ended from its callback
            full = e.generate(prompt, 12, stop=[])
            k = next(i for i, t in enumerate(full) if t in many)
            self.assertEqual((e.generate(prompt, 12, stop=many), e.stopped_by), (full[:k + 1], "stop"))
            self.assertEqual(list(e.generate(prompt, 0, stream=True)), [])

    def test_generate_error_keeps_ids(self):
        """a step failing midway raises with the ids generated before it: the library's loop steps
        a sequence that the hook closed after the third id, so the fourth step fails there"""
        for kw in ({}, dict(temperature=0.8, seed=3)):  # the device's greedy step; host logits
            with fp4lane.open(TINY) as m, m.engine() as e:
                want = e.generate([1, 2, 3], 5, stop=[], **kw)

                def failing(seq, out):
                    if len(out) == 3:
                        fp4lane._lib.lib.fp4_rt_seq_close(e._h, seq)
                e._on_id = failing
                with self.assertRaises(fp4lane.Error) as cm:
                    e.generate([1, 2, 3], 5, stop=[], **kw)
                self.assertEqual(cm.exception.generated, want[:3])
                del e._on_id
                self.assertEqual(e.generate([1, 2, 3], 5, stop=[], **kw), want)  # the engine serves on

    def test_rejections_match_cli(self):
        """what the CLI refuses, Python refuses: the library's argument table, the same rule and text"""
        cases = [  # (python call, rule, CLI arguments after `run TINY --prompt-ids 1,2 -n 1`)
            (lambda m: m.engine(threads=0), "arg.threads", ["--threads", "0"]),
            (lambda m: m.engine(threads=-1), "arg.threads", ["--threads", "-1"]),
            (lambda m: m.engine(threads=10000), "arg.threads", ["--threads", "10000"]),
            (lambda m: m.engine(n_ctx=0), "arg.ctx", ["--ctx", "0"]),
            (lambda m: m.engine().generate([1, 2], 1, temperature=-1), "arg.temperature", ["--temp", "-1"]),
            (lambda m: m.engine().generate([1, 2], 1, top_p=2), "arg.top_p", ["--top-p", "2"]),
            (lambda m: m.engine().generate([1, 2], 1, top_k=-3), "arg.top_k", ["--top-k", "-3"]),
            (lambda m: m.engine().generate([1, 2], 1, seed=-1), "arg.seed", ["--seed", "-1"]),
            (lambda m: m.engine().generate([1, 2], 1, min_p=float("nan")), "arg.min_p", ["--min-p", "nan"]),
            (lambda m: m.engine().generate([1, 2], -1), "arg.n", ["-n", "-1"]),
            (lambda m: m.engine().logits([2 ** 40]), "arg.token", ["--prompt-ids", str(2 ** 40)]),
            (lambda m: m.engine().logits([0.5]), "arg.token", ["--prompt-ids", "0.5"]),
            (lambda m: m.engine().generate([1, -2], 1), "arg.token", ["--prompt-ids", "1,-2"]),
        ]
        with fp4lane.open(TINY) as m:
            for call, rule, args in cases:
                with self.assertRaises(fp4lane.Error, msg=rule) as cm:
                    call(m)
                self.assertEqual((cm.exception.status, cm.exception.rule), ("invalid argument", rule))
                r = subprocess.run([CLI, "run", TINY, "--prompt-ids", "1,2", "-n", "1"] + args,
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 2, args)
                expect = cm.exception.msg.split(": ", 1)[1]  # after "<argument> <value>: "
                self.assertIn(expect, r.stderr, args)
            with self.assertRaises(TypeError):
                m.engine(threads="2")
            with self.assertRaises(TypeError):
                m.engine().generate([1, 2], 1, top_k=True)
        with self.assertRaises(fp4lane.Error) as cm:
            fp4lane.quantize(LLAMA, os.path.join(self.tmp, "neg.gguf"), shard_size=-1)
        self.assertEqual(cm.exception.rule, "arg.shard_size")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "neg.gguf")))
        r = subprocess.run([CLI, "quantize", LLAMA, os.path.join(self.tmp, "neg.gguf"), "--shard-size", "-1"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)

    def test_default_mode_is_the_cli_default(self):
        """one default everywhere: exact, as `fp4lane run` without --mode (same logits bits)"""
        ids = [1, 7, 42, 300, 5]
        npy = os.path.join(self.tmp, "default.npy")
        cli("run", self.gguf, "--prompt-ids", ",".join(map(str, ids)), "-n", "1", "--logits-out", npy)
        theirs = np.load(npy)
        with fp4lane.open(self.gguf) as m, m.engine() as e:
            ours = e.logits(ids)
            self.assertTrue(np.array_equal(ours.view(np.uint32), theirs[: len(ids)].view(np.uint32)))
            self.assertIn(".exact", e.routes)
            self.assertEqual(e.mode, "exact")
            got = e.generate(ids, 6, stop=[])
        self.assertTrue(np.array_equal(ours.view(np.uint32), theirs[: len(ids)].view(np.uint32)))
        out = cli("run", self.gguf, "--prompt-ids", ",".join(map(str, ids)), "-n", "6", "--ignore-eos")
        self.assertEqual(got, [int(x) for x in out.splitlines()[0].split()])

    def test_without_numpy(self):
        """numpy is optional: everything but the array-returning calls works without it, and those
        say what to install"""
        code = ("import sys; sys.modules['numpy'] = None\n"
                "import fp4lane\n"
                "print(fp4lane.version())\n"
                "fp4lane.validate('models/tiny')\n"
                "with fp4lane.open('models/tiny') as m, m.engine() as e:\n"
                "    print(len(m.tensors()), len(e.generate([1, 2, 3], 4, stop=[])),\n"
                "          len(e.generate([1, 2, 3], 4, temperature=0.8, seed=1, stop=[])))\n"
                "    try:\n"
                "        e.logits([1])\n"
                "    except ImportError as x:\n"
                "        print('ImportError', x)\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "python")))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], fp4lane.version())
        self.assertTrue(lines[1].endswith(" 4 4"), lines[1])
        self.assertIn("python3-numpy", lines[2])


if __name__ == "__main__":
    r = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Binding))
    bad = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    print("PYRESULT run=%d failed=%d" % (r.testsRun, bad))
    sys.exit(1 if bad else 0)
