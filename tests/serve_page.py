#!/usr/bin/env python3
"""serve_page.py CHROMIUM URL DOM PNG PROFILE — drives headless chromium over the DevTools protocol
on a pipe (--remote-debugging-pipe: JSON messages ended by NUL on fds 3 and 4, no network port):
opens URL (the chat page with #ask=QUESTION), waits until the page says an answer ended (its
body's data-answers, bounded), then writes the DOM to DOM and a 900x700 screenshot to PNG. A page
dump at load (--dump-dom) would catch the answer mid-stream: the stream does not hold up load."""
import base64
import fcntl
import json
import os
import subprocess
import sys
import time

chrome, url, dom_path, png_path, profile = sys.argv[1:6]
DEADLINE = time.monotonic() + 60

cmd_r, cmd_w = os.pipe()  # ours -> chromium's fd 3
ev_r, ev_w = os.pipe()    # chromium's fd 4 -> ours
hi_r, hi_w = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(ev_w, fcntl.F_DUPFD, 10)  # above 3 and 4


def fds():  # in the child: the pipes at 3 and 4 (dup2 leaves them open across exec; ours close)
    os.dup2(hi_r, 3), os.dup2(hi_w, 4)


p = subprocess.Popen([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--user-data-dir=" + profile, "--remote-debugging-pipe"],
                     close_fds=False, preexec_fn=fds, stdout=subprocess.DEVNULL,
                     stderr=sys.stderr)
for fd in (cmd_r, ev_w, hi_r, hi_w):
    os.close(fd)
buf, next_id = b"", 0


def call(method, params=None, session=None):
    global buf, next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    os.write(cmd_w, json.dumps(msg).encode() + b"\0")
    while True:
        while b"\0" not in buf:
            if time.monotonic() > DEADLINE:
                raise TimeoutError(method)
            chunk = os.read(ev_r, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            buf += chunk
        raw, buf = buf.split(b"\0", 1)
        m = json.loads(raw)
        if m.get("id") == next_id:
            if "error" in m:
                raise RuntimeError("%s: %s" % (method, m["error"]))
            return m["result"]


try:
    target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
    s = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    call("Emulation.setDeviceMetricsOverride", {"width": 900, "height": 700, "deviceScaleFactor": 1,
                                                "mobile": False}, s)
    call("Page.navigate", {"url": url}, s)
    answers = ""
    while answers != "1" and time.monotonic() < DEADLINE - 5:
        time.sleep(0.1)
        r = call("Runtime.evaluate", {"expression": "document.body ? document.body.dataset.answers || ''"
                                                    " : ''", "returnByValue": True}, s)
        answers = r["result"].get("value", "")
    html = call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML",
                                     "returnByValue": True}, s)["result"]["value"]
    open(dom_path, "w").write(html)
    png = call("Page.captureScreenshot", {"format": "png"}, s)["data"]
    open(png_path, "wb").write(base64.b64decode(png))
    try:
        call("Browser.close")
    except (EOFError, RuntimeError):
        pass
finally:
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
