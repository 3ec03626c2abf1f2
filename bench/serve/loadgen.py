#!/usr/bin/env python3
"""loadgen.py — our load generator for OpenAI-compatible servers (fp4lane serve, llama-server): C
clients on loopback, each sending streamed POST /v1/completions one after another with a prompt of
P tokens (calibrated once through the server's POST /tokenize) and max_tokens A, until R requests
have completed in all (after W warm-up requests per client, not counted). Per request it records
the time to the first token and the gaps between tokens (from the SSE chunks); every prompt starts
with its request's own 5-digit number (--same-prompt: not), so neither server's prompt cache skips a
prefill the other computes; the summary is the
aggregate generated tokens per second over the measured window, TTFT p50/p99, inter-token
p50/p99, and the per-stream decode rate: each request's (tokens - 1) / (last token's time - first
token's time), p50 over the requests. The aggregate counts every request's prefill and the gap
between one request's end and the next one's start; the per-stream rate counts neither, so it is
the figure to set beside `fp4lane run`'s decode tok/s (which excludes prefill too). Standard
library only.

usage: loadgen.py URL --clients C [--prompt P] [--answer A] [--requests R | --per-client K]
                  [--warmup W] [--label NAME] [--json FILE] [--extra JSON] [--same-prompt]
                  [--time-limit S]
--extra: fields merged into every request body (e.g. '{"ignore_eos": true}' for llama-server; fp4lane
uses '{"min_tokens": A}' where supported, else a model that rarely ends early: report n_gen)."""
import argparse
import asyncio
import json
import statistics
import sys
import time
import urllib.parse


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def post(host, port, path, body, on_line=None, timeout=600):
    r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 30)
    data = json.dumps(body).encode()
    w.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), timeout)
    status = int(head.split(b" ", 2)[1])
    chunked = b"transfer-encoding: chunked" in head.lower()
    out = b""
    while True:
        if chunked:
            size = int((await asyncio.wait_for(r.readline(), timeout)).strip() or b"0", 16)
            if size == 0:
                break
            piece = await asyncio.wait_for(r.readexactly(size + 2), timeout)
            piece = piece[:-2]
        else:
            piece = await asyncio.wait_for(r.read(65536), timeout)
            if not piece:
                break
        out += piece
        while on_line and b"\n" in out:
            line, out = out.split(b"\n", 1)
            on_line(line)
    w.close()
    return status, out


async def calibrate(host, port, n, head=""):
    """a text of n tokens for this server's tokenizer, head + words (words added until /tokenize
    says n); head: the request number's placeholder, whose digits the request replaces"""
    words = ("the configuration file holds the options of the server and each line names one of "
             "them with its value while comments start with a hash sign").split()
    text, k = "", 0
    while True:
        cand = (text + " " + words[k % len(words)]).strip()
        st, out = await post(host, port, "/tokenize", {"content": head + cand})
        toks = json.loads(out)["tokens"]
        if len(toks) > n:
            return head + text
        text, k = cand, k + 1
        if len(toks) == n:
            return head + text


async def client(cfg, host, port, prompt, stats, quota, warm, counter):
    for i in range(warm + 10**9):
        if i >= warm and quota[0] <= 0:
            return
        if i >= warm:
            quota[0] -= 1
        t0 = time.monotonic()
        times = []

        usage = []

        def on_line(line):
            if line.startswith(b"data: {"):
                j = json.loads(line[6:])
                c = j.get("choices") or [{}]
                if c[0].get("text"):
                    times.append(time.monotonic())
                if j.get("usage"):
                    usage.append(j["usage"].get("completion_tokens", 0))

        counter[0] += 1
        text = prompt if cfg.same_prompt else "%05d" % (counter[0] % 100000) + prompt[5:]
        body = {"prompt": text, "max_tokens": cfg.answer, "stream": True, "temperature": 0,
                "stream_options": {"include_usage": True}}
        body.update(json.loads(cfg.extra))
        st, _ = await post(host, port, "/v1/completions", body, on_line)
        if i < warm:
            continue
        stats["status"].append(st)
        if times:
            stats["ttft"].append(times[0] - t0)
            stats["itl"].extend(b - a for a, b in zip(times, times[1:]))
            stats["tokens"] += usage[-1] if usage else len(times)  # a chunk may carry no text
            n_tok = usage[-1] if usage else len(times)
            if n_tok > 1 and times[-1] > times[0]:
                stats["stream"].append((n_tok - 1) / (times[-1] - times[0]))
            stats["first"] = min(stats["first"], t0)
            stats["last"] = max(stats["last"], times[-1])


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--clients", type=int, required=True)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--answer", type=int, default=128)
    ap.add_argument("--requests", type=int, default=0, help="default: 4 per client, at least 8")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--extra", default="{}")
    ap.add_argument("--same-prompt", action="store_true")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds; then the requests completed are the cell")
    ap.add_argument("--per-client", type=int, default=4, help="requests per client (default 4, at least 8)")
    cfg = ap.parse_args()
    u = urllib.parse.urlparse(cfg.url)
    host, port = u.hostname, u.port or 80
    prompt = await calibrate(host, port, cfg.prompt, "" if cfg.same_prompt else "00000 ")
    n = cfg.requests or max(8, cfg.per_client * cfg.clients)
    stats = {"status": [], "ttft": [], "itl": [], "stream": [], "tokens": 0, "first": float("inf"),
             "last": 0.0}
    quota, counter = [n], [0]
    cut = False
    try:
        clients = (client(cfg, host, port, prompt, stats, quota, cfg.warmup, counter) for _ in range(cfg.clients))
        await asyncio.wait_for(asyncio.gather(*clients), cfg.time_limit or None)
    except asyncio.TimeoutError:
        cut = True  # the requests completed so far are the cell (its label says so)
    secs = stats["last"] - stats["first"]
    res = {"label": cfg.label + (" (cut at %g s)" % cfg.time_limit if cut else ""), "clients": cfg.clients, "prompt": cfg.prompt, "answer": cfg.answer,
           "requests": len(stats["status"]), "ok": stats["status"].count(200), "tokens": stats["tokens"],
           "tok_s": stats["tokens"] / secs if secs > 0 else float("nan"),
           "ttft_p50": pct(stats["ttft"], 0.5), "ttft_p99": pct(stats["ttft"], 0.99),
           "itl_p50": pct(stats["itl"], 0.5), "itl_p99": pct(stats["itl"], 0.99),
           "stream_tok_s_p50": pct(stats["stream"], 0.5)}
    print("| {label} | {clients} | {ok}/{requests} | {tokens} | {tok_s:.1f} | {ttft_p50:.3f} | {ttft_p99:.3f} | "
          "{itl_p50:.4f} | {itl_p99:.4f} | {stream_tok_s_p50:.1f} |".format(**res))
    if cfg.json:
        with open(cfg.json, "a") as f:
            f.write(json.dumps(res) + "\n")
    return 0 if res["ok"] == res["requests"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
