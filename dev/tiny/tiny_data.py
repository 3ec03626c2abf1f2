#!/usr/bin/python3
"""Clean the English prose of unpacked Debian documentation packages into plain text.

Used by dev/tiny/tiny_data.sh (which downloads and unpacks the packages); standard library only.
    dev/tiny/tiny_data.py ROOT OUT.txt
ROOT holds one folder per package (the `dpkg -x` of PACKAGE_VERSION_all.deb). The output has one
paragraph per line and a blank line between documents (source files). Deterministic: files are
read in sorted order, paragraphs are kept in order and a paragraph already seen (after whitespace
folding) is dropped.

What counts as prose: the text of HTML <p> elements outside <pre>/<script>/<style>/navigation, and
the ordinary paragraphs of POD files (verbatim blocks and commands dropped, formatting codes
reduced to their text). A paragraph is kept when it has at least 8 words, is ASCII after mapping
typographic punctuation, is at least 80 % letters and spaces, and ends like a sentence.
"""
import html.parser
import os
import re
import sys
import unicodedata

# Per package: which files to read (path regex under the package root) and how to parse them.
SOURCES = [
    ("perl-doc", r"usr/share/perl/[^/]+/pod/[^/]+\.pod$", "pod"),
    ("postgresql-doc-15", r"usr/share/doc/postgresql-doc-15/html/[^/]+\.html$", "html"),
    ("python-django-doc", r"usr/share/doc/python-django-doc/html/"
                          r"(?!_|genindex|py-modindex|search).*\.html$", "html"),
    ("python3.11-doc", r"usr/share/doc/python3\.11/html/"
                       r"(?!_|genindex|py-modindex|search|whatsnew/changelog).*\.html$", "html"),
    ("rust-doc", r"usr/share/doc/rust-doc/html/"
                 r"(book|reference|nomicon|rust-by-example|edition-guide|embedded-book)/"
                 r"(?!.*print\.html$)(?!.*/2018-edition/)(?!.*/first-edition/)"
                 r"(?!.*/second-edition/).*\.html$",
     "html"),
    ("sphinx-doc", r"usr/share/doc/sphinx-doc/html/(?!_|genindex|py-modindex|search).*\.html$", "html"),
    ("sqlite3-doc", r"usr/share/doc/sqlite3/.*\.html$", "html"),
    ("apache2-doc", r"usr/share/doc/apache2-doc/manual/en/.*\.html$", "html"),
    ("python-sqlalchemy-doc", r"usr/share/doc/python-sqlalchemy-doc/html/"
                              r"(?!_|genindex|py-modindex|search).*\.html$", "html"),
    ("erlang-doc", r"usr/share/doc/erlang-doc/.*\.html$", "html"),
    ("python-scipy-doc", r"usr/share/doc/python-scipy-doc/html/"
                         r"(?!_|genindex|py-modindex|search).*\.html$", "html"),
    ("python-pandas-doc", r"usr/share/doc/python-pandas-doc/html/"
                          r"(?!_|genindex|py-modindex|search).*\.html$", "html"),
]

SKIP_TAGS = {"pre", "script", "style", "nav", "head", "title", "table", "code-block"}
SKIP_CLASSES = ("sphinxsidebar", "related", "footer", "nav", "menu", "sidebar", "toc", "header")

TYPO = {
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": " - ",
    "\u2026": "...", "\u00a0": " ", "\u00b6": "", "\u200b": "", "\u2192": "->", "\u00d7": "x",
}
TYPO_RE = re.compile("|".join(map(re.escape, TYPO)))


class ParaParser(html.parser.HTMLParser):
    """Collects the text of <p> elements that are not inside skipped elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []      # (tag, skipping) for open non-void elements
        self.skip = 0        # depth of skipped elements
        self.in_p = False
        self.buf = []
        self.paras = []

    VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "col", "area", "base", "source"}

    def flush(self):
        if self.in_p:
            self.paras.append("".join(self.buf))
        self.in_p = False
        self.buf = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            if tag == "br" and self.in_p:
                self.buf.append(" ")
            return
        cls = " ".join(v or "" for k, v in attrs if k in ("class", "id", "role")).lower()
        skipping = tag in SKIP_TAGS or (tag in ("div", "header", "footer", "aside", "section")
                                        and any(c in cls.split() or c == cls for c in SKIP_CLASSES))
        if tag in ("header", "footer", "aside"):
            skipping = True
        self.stack.append((tag, skipping))
        if skipping:
            self.skip += 1
            if tag == "pre" or tag == "table":
                self.flush()
        if tag == "p":
            self.flush()
            if self.skip == 0:
                self.in_p = True

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        # pop to the matching tag (HTML in the wild is not always balanced)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for t, s in self.stack[i:]:
                    if s:
                        self.skip -= 1
                del self.stack[i:]
                break
        if tag == "p":
            self.flush()

    def handle_data(self, data):
        if self.in_p and self.skip == 0:
            self.buf.append(data)


def html_paras(text):
    p = ParaParser()
    p.feed(text)
    p.close()
    p.flush()
    return p.paras


POD_CODE = re.compile(r"([A-Z])<(<+\s)?")


def pod_inline(s):
    """Reduce POD formatting codes (B<..>, C<<< .. >>>, L<text|target>, E<gt>) to their text."""
    out = []
    i = 0
    stack = []  # (code, closer, start index in out)
    n = len(s)
    while i < n:
        if i + 1 < n and s[i].isupper() and s[i + 1] == "<" and (i == 0 or not s[i - 1].isalnum()):
            j = i + 1
            while j < n and s[j] == "<":
                j += 1
            k = j - (i + 1)
            if k > 1:
                if j < n and s[j] == " ":
                    closer = " " + ">" * k
                    j += 1
                else:  # not the multi-bracket form: treat as single
                    closer = ">"
                    j = i + 2
            else:
                closer = ">"
            stack.append((s[i], closer, len(out)))
            i = j
            continue
        if stack and s.startswith(stack[-1][1], i):
            code, closer, start = stack.pop()
            inner = "".join(out[start:])
            del out[start:]
            if code == "E":
                inner = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"',
                         "amp": "&"}.get(inner, "")
            elif code == "L":
                if "|" in inner:
                    inner = inner.split("|", 1)[0]
                else:
                    inner = inner.split("/", 1)[0].strip('"') or inner.strip('/"')
            elif code in ("Z", "X"):
                inner = ""
            out.append(inner)
            i += len(closer)
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def pod_paras(text):
    paras = []
    skip_block = False
    for block in re.split(r"\n[ \t]*\n", text):
        if not block.strip():
            continue
        if block.startswith("=begin"):
            skip_block = True
        if skip_block:
            if re.search(r"^=end", block, re.M):
                skip_block = False
            continue
        if block.startswith("=") or block[0] in " \t":
            continue  # commands (headings, items, for) and verbatim code
        paras.append(pod_inline(block))
    return paras


WS = re.compile(r"\s+")


def clean(p):
    p = TYPO_RE.sub(lambda m: TYPO[m.group(0)], unicodedata.normalize("NFC", p))
    p = WS.sub(" ", p).strip()
    if not p.isascii():
        return None
    words = p.split(" ")
    if len(words) < 8:
        return None
    letters = sum(c.isalpha() or c == " " for c in p)
    if letters < 0.8 * len(p):
        return None
    if p[-1] not in ".!?:)\"'":
        return None
    return p


def main():
    root, out = sys.argv[1], sys.argv[2]
    seen = set()
    stats = []
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="ascii", newline="\n") as f:
        for pkg, pattern, kind in SOURCES:
            dirs = sorted(d for d in os.listdir(root) if d.split("_")[0] == pkg)
            if not dirs:
                print(f"{pkg}: not unpacked, skipped", file=sys.stderr)
                continue
            rx = re.compile(pattern)
            base = os.path.join(root, dirs[0])
            files = []
            for dp, dn, fn in os.walk(base):
                dn.sort()
                for name in fn:
                    rel = os.path.relpath(os.path.join(dp, name), base)
                    if rx.match(rel) and not os.path.islink(os.path.join(dp, name)):
                        files.append(rel)
            files.sort()
            nb = nk = 0
            for rel in files:
                with open(os.path.join(base, rel), encoding="utf-8", errors="replace") as g:
                    text = g.read()
                paras = html_paras(text) if kind == "html" else pod_paras(text)
                kept = []
                for p in paras:
                    c = clean(p)
                    if c is None or c in seen:
                        continue
                    seen.add(c)
                    kept.append(c)
                if kept:
                    doc = "\n".join(kept) + "\n\n"
                    f.write(doc)
                    nb += len(doc)
                    nk += 1
            stats.append((dirs[0], len(files), nk, nb))
    os.replace(tmp, out)
    for d, nf, nk, nb in stats:
        print(f"{d}: {nf} files, {nk} documents kept, {nb} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
