#!/usr/bin/env python3
"""serve_hostile.py PORT [CONNS] — hostile HTTP against `fp4lane serve` on loopback, all at once:
slowloris (300 connections from 127.0.0.1,
past the server's 256, sending a header byte every 0.3 s), CONNS (default 10 000)
connections from 127.0.0.3-6 opened and dropped 32 at a time (closed at once, reset, cut mid-request,
invalid UTF-8 in the request line and headers), a chunked body past the cap; meanwhile a client on
127.0.0.2 sends generation requests one after another, each of which must answer 200 in time.
Loopback only; every wait is bounded. Last line: "hostile: ok ..." or "hostile: FAIL ..."."""
import asyncio, socket, struct, sys, time

PORT = int(sys.argv[1])
CONNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
# seconds one legitimate request may take while the attack runs: room for a sanitizer build on a
# loaded 2-core machine (without the per-address limit none is answered at all)
ON_TIME = 10.0
HOST = "127.0.0.1"


async def http(body, local, timeout=ON_TIME):
    t0 = time.monotonic()
    r, w = await asyncio.wait_for(asyncio.open_connection(HOST, PORT, local_addr=(local, 0)), timeout)
    req = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    w.write(req)
    data = await asyncio.wait_for(r.read(), timeout)
    w.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0
    return status, time.monotonic() - t0


async def legit(stop, log):
    body = b'{"prompt":"This section describes","max_tokens":8,"temperature":0}'
    while not stop.is_set():
        try:
            log.append(await http(body, "127.0.0.2"))
        except (OSError, asyncio.TimeoutError) as e:
            log.append((0, ON_TIME, repr(e)))
        await asyncio.sleep(0.05)


async def slowloris(stop, n=300):
    conns = []
    for _ in range(n):
        try:
            r, w = await asyncio.open_connection(HOST, PORT, local_addr=("127.0.0.1", 0))
            w.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            conns.append((r, w))
        except OSError:
            pass
    held = len(conns)
    while not stop.is_set():
        for i, (r, w) in enumerate(conns):
            if w and (r.at_eof() or w.is_closing()):  # refused or closed by the server
                w.close()
                conns[i] = (r, None)
            elif w:
                w.write(b"a")
        await asyncio.sleep(0.3)
    for r, w in conns:
        if w:
            w.close()
    return held


PAYLOADS = [
    b"",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess",
    b"GET /\xff\xfe\xc0\xaf HTTP/1.1\r\nHost: \xed\xa0\x80\r\nX-Bad: \xf8\x88\x80\x80\x80\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)),  # a TLS hello
]


async def churn(total, conc=32):
    done = refused = 0
    sem = asyncio.Semaphore(conc)

    async def one(i):
        nonlocal done, refused
        async with sem:
            try:
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(HOST, PORT, local_addr=(f"127.0.0.{3 + i % 4}", 0)), 5)
            except (OSError, asyncio.TimeoutError):
                refused += 1
                return
            p = PAYLOADS[i % len(PAYLOADS)]
            if p:
                w.write(p)
            if i % 7 == 3:  # reset instead of a clean close
                w.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                       struct.pack("ii", 1, 0))
            w.close()
            done += 1

    await asyncio.gather(*(one(i) for i in range(total)))
    return done, refused


async def chunked_past_cap():
    r, w = await asyncio.open_connection(HOST, PORT, local_addr=("127.0.0.2", 0))
    w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n")
    chunk = b"a" * 65536
    status = 0
    try:
        for _ in range(40):  # 2.5 MiB, past the 1 MiB cap
            w.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            await asyncio.wait_for(w.drain(), 5)
        w.write(b"0\r\n\r\n")
        data = await asyncio.wait_for(r.read(), 10)
    except (OSError, asyncio.TimeoutError):
        data = b""
    w.close()
    if data.startswith(b"HTTP/1."):
        status = int(data.split(b" ", 2)[1])
    return status


async def main():
    stop = asyncio.Event()
    log = []
    t0 = time.monotonic()
    lt = asyncio.ensure_future(legit(stop, log))
    st = asyncio.ensure_future(slowloris(stop))
    await asyncio.sleep(0.5)
    done, refused = await churn(CONNS)
    chunked = await chunked_past_cap()
    await asyncio.sleep(0.5)
    stop.set()
    held = await st
    await lt
    secs = time.monotonic() - t0
    bad = [x for x in log if x[0] != 200 or x[1] > ON_TIME]
    worst = max((x[1] for x in log), default=0)
    print(f"{CONNS} connections: {done} dropped, {refused} refused; {held} slowloris held; chunked body "
          f"past the cap: {chunked}; {len(log)} requests beside them, the slowest {worst:.2f}s; {secs:.1f}s")
    ok = log and not bad and chunked in (413, 0) and done + refused == CONNS and done >= CONNS * 9 // 10
    print(("hostile: ok" if ok else "hostile: FAIL") + f" ({len(log) - len(bad)}/{len(log)} on time)")
    for x in bad[:5]:
        print("late or failed:", x)
    sys.exit(0 if ok else 1)


asyncio.run(main())
