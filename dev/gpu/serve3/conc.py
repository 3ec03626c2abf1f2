#!/usr/bin/env python3
"""conc.py — the serve concurrency check for one server (dev/gpu/serve3/run.sh runs it on the CPU
and on the GPU): starts `fp4lane serve MODEL --port 0 ARGS...`, sends N different requests one at a
time (alone), then all N at once (concurrent), and checks every concurrent answer equals its alone
twin (choices and usage: text, tokens, log-probabilities, finish reason). The requests mix chat and
completions, greedy (the device's argmax step) and seeded sampling, log-probabilities, stop strings,
streaming, and prompts sharing a prefix (the prefix cache). Then SIGTERM while a request runs: it
must finish whole, a new request gets 503 (or is refused), the server exits 0. The alone answers go
to --answers FILE, for comparing one device's server with another's. Standard library only; every
wait is bounded.

usage: conc.py BIN MODEL --answers FILE [--n N] [--log FILE] [--no-exact] -- SERVE_ARGS...
--no-exact: native mode (not promised batch-invariant): only every answer whole and 200."""
import argparse
import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time


def post(port, path, body, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, data
    finally:
        c.close()


def sse(data):
    """a streamed answer's chunks → one record comparable between runs"""
    text, fin, usage = "", None, None
    for line in data.decode().split("\n"):
        if not line.startswith("data: {"):
            continue
        j = json.loads(line[6:])
        for c in j.get("choices") or []:
            d = c.get("delta") or {}
            text += d.get("content") or c.get("text") or ""
            fin = c.get("finish_reason") or fin
        usage = j.get("usage") or usage
    return {"text": text, "finish_reason": fin, "usage": usage, "done": data.rstrip().endswith(b"[DONE]")}


def answer(port, req):
    path, body = req
    st, data = post(port, path, body)
    if st != 200:
        return {"status": st, "body": data.decode(errors="replace")[:300]}
    if body.get("stream"):
        return {"status": st, "stream": sse(data)}
    j = json.loads(data)
    return {"status": st, "choices": j["choices"], "usage": j["usage"]}


def requests(n):
    shared = ("The configuration file holds the options of the server; each line names one option "
              "and its value, and comments start with a hash sign. ")
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:  # chat, seeded sampling, log-probabilities
            out.append(("/v1/chat/completions", {
                "messages": [{"role": "user", "content": f"Question {i}: what is option {i} for?"}],
                "max_tokens": 6 + i % 7, "seed": i, "temperature": 0.3 * (i % 3 + 1),
                "logprobs": True, "top_logprobs": 2}))
        elif kind == 1:  # completions sharing a long prefix, greedy without logprobs (device argmax)
            out.append(("/v1/completions", {"prompt": shared * 3 + f"Option {i} is", "max_tokens": 8 + i % 5,
                                            "temperature": 0}))
        elif kind == 2:  # completions, greedy with logprobs (host logits), a stop string
            out.append(("/v1/completions", {"prompt": shared + f"Then option {i} says", "max_tokens": 12,
                                            "temperature": 0, "logprobs": 3, "stop": ["\n\n"]}))
        else:  # chat streamed, top_p
            out.append(("/v1/chat/completions", {
                "messages": [{"role": "system", "content": "Answer briefly."},
                             {"role": "user", "content": f"Tell me about item {i}."}],
                "max_tokens": 10 + i % 4, "seed": 100 + i, "temperature": 0.8, "top_p": 0.9, "stream": True,
                "stream_options": {"include_usage": True}}))
    return out


def start(a, log):
    p = subprocess.Popen([a.bin, "serve", a.model, "--port", "0"] + a.serve, stderr=log,
                         stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    port = None
    while time.monotonic() - t0 < 240:
        if p.poll() is not None:
            return p, None
        if port is None:
            m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", open(a.log, "rb").read())
            port = int(m.group(1)) if m else None
        if port:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return p, port
            except OSError:
                pass
        time.sleep(0.2)
    return p, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("model")
    ap.add_argument("--answers", required=True)
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--log", default="/tmp/conc_serve.log")
    ap.add_argument("--no-exact", action="store_true")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.serve = argv[cut + 1:]
    fails = []
    log = open(a.log, "wb")
    p, port = start(a, log)
    if not port:
        p.kill()
        print(f"conc: FAIL the server did not start ({' '.join(a.serve)}); log tail:")
        print(open(a.log, errors="replace").read()[-1500:])
        return 1
    try:
        reqs = requests(a.n)
        t0 = time.monotonic()
        alone = [answer(port, r) for r in reqs]
        t_alone = time.monotonic() - t0
        conc = [None] * len(reqs)

        def one(i):
            try:
                conc[i] = answer(port, reqs[i])
            except Exception as e:  # noqa: BLE001 - reported as a failed answer
                conc[i] = {"status": -1, "body": repr(e)}
        th = [threading.Thread(target=one, args=(i,)) for i in range(len(reqs))]
        t0 = time.monotonic()
        for t in th:
            t.start()
        for t in th:
            t.join(300)
        t_conc = time.monotonic() - t0
        bad = [i for i, x in enumerate(alone + conc) if not x or x["status"] != 200]
        if bad:
            fails.append(f"{len(bad)} answers not 200, e.g. {(alone + conc)[bad[0]]}")
        streams = [x for x in alone + conc if x and "stream" in x]
        if any(not s["stream"]["done"] or s["stream"]["usage"] is None for s in streams):
            fails.append("a stream without [DONE] or its usage chunk")
        same = sum(1 for x, y in zip(alone, conc) if x == y)
        if not a.no_exact and same != len(reqs):
            i = next(i for i, (x, y) in enumerate(zip(alone, conc)) if x != y)
            fails.append(f"concurrent = alone for {same}/{len(reqs)} (first differing: request {i}: "
                         f"{json.dumps(alone[i])[:300]} vs {json.dumps(conc[i])[:300]})")
        ntok = sum((x.get("usage") or (x.get("stream") or {}).get("usage") or {})
                   .get("completion_tokens", 0) for x in alone)
        print(f"conc: {len(reqs)} requests ({ntok} tokens) alone in {t_alone:.2f} s, concurrently in "
              f"{t_conc:.2f} s; concurrent = alone: {same}/{len(reqs)}")
        with open(a.answers, "w") as f:
            json.dump(alone, f, indent=0, sort_keys=True)
        # metrics: every KV block back once idle
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        met = c.getresponse().read().decode()
        hits = re.search(r"^fp4lane_prefix_cache_hits_total (\d+)", met, re.M)
        used = re.search(r"^fp4lane_kv_blocks_used (\d+)", met, re.M)
        print(f"conc: metrics: prefix cache hits {hits and hits.group(1)}, KV blocks used when idle "
              f"{used and used.group(1)}")
        # SIGTERM drains: the running request finishes whole, a new one gets 503 (or is refused)
        res = {}

        def long_req():
            res["long"] = answer(port, ("/v1/completions", {
                "prompt": "This section describes", "max_tokens": 150, "temperature": 0.7, "seed": 1}))
        t = threading.Thread(target=long_req)
        t.start()
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        try:
            st, _ = post(port, "/v1/completions", {"prompt": "late", "max_tokens": 2}, timeout=10)
        except OSError:
            st = "refused"
        t.join(120)
        rc = p.wait(60)
        lg = res.get("long") or {}
        whole = lg.get("status") == 200 and lg["usage"]["completion_tokens"] in (150,) or (
            lg.get("status") == 200 and lg["choices"][0]["finish_reason"] == "stop")
        print(f"conc: SIGTERM: running request {lg.get('status')} "
              f"({(lg.get('usage') or {}).get('completion_tokens')} tokens, whole: {whole}), "
              f"a new one {st}, exit {rc}")
        if not whole or st not in (503, "refused") or rc != 0:
            fails.append("SIGTERM did not drain")
    finally:
        if p.poll() is None:
            p.kill()
    for f in fails:
        print("conc: FAIL", f)
    print("conc:", "ok" if not fails else "FAILED")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
