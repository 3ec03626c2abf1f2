#!/usr/bin/env python3
"""serve_page_check.py DOM SSE QUESTION — the chat page's DOM (chromium --dump-dom after /#ask=)
against the API: one answer ended, the model's id, the question, the streamed answer equal to the
text the API streams for the same request, and the tokens/s line. Prints "ok" or what differs."""
import html.parser
import json
import re
import sys

dom, sse, q = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
want = ""
for e in sse.split("\n\n"):
    if e.startswith("data: {"):
        c = json.loads(e[6:])["choices"]
        if c:
            want += c[0].get("delta", {}).get("content") or ""


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.cur, self.text, self.body = None, {}, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        self.cur = a.get("id") or a.get("class")
        if self.cur:
            self.text.setdefault(self.cur, "")

    def handle_endtag(self, tag):
        self.cur = None

    def handle_data(self, d):
        if self.cur:
            self.text[self.cur] += d


p = Page()
p.feed(dom)
bad = []
if p.body.get("data-answers") != "1":
    bad.append("no answer ended")
if p.text.get("model") != "tiny":
    bad.append("model %r" % p.text.get("model"))
if p.text.get("user") != q:
    bad.append("question %r" % p.text.get("user"))
if not want or p.text.get("assistant") != want:
    bad.append("answer %r, the API's %r" % (p.text.get("assistant"), want))
if not re.fullmatch(r"[1-9][0-9]* tokens, [0-9.]+ tok/s", p.text.get("stat", "")):
    bad.append("stat %r" % p.text.get("stat"))
print("; ".join(bad) or "ok")
