#!/usr/bin/python3
"""Assemble the tokenizer test corpus (tests/data/text/corpus.txt.gz) from files Debian ships and
from deterministically generated text (seeded). Run once; the output is committed:
    /usr/bin/python3 tests/text/make_corpus.py tests/data/text/corpus.txt.gz
Sections: English prose (licenses), source code (C headers, Python), gnupg's help texts in 28
languages, then generated text: CJK, Hangul, emoji with ZWJ/skin tones/flags/keycaps, combining
marks (composed and decomposed), Arabic/Hebrew with marks, long whitespace runs, digits in several
scripts, special-token spellings inside text, case variants of contractions, controls, and
invalid UTF-8 byte sequences."""
import glob, gzip, os, random, sys

rnd = random.Random(20261201)
out = bytearray()

def add_file(path, limit=None):
    global out
    try:
        data = open(path, 'rb').read()
    except OSError:
        return
    if limit: data = data[:limit]
    out += data + b'\n'

# English prose
for p in ['/usr/share/common-licenses/GPL-3', '/usr/share/common-licenses/Apache-2.0',
          '/usr/share/common-licenses/MPL-2.0', '/usr/share/common-licenses/Artistic',
          '/usr/share/common-licenses/LGPL-2.1']:
    add_file(p)
# source code
for p in ['/usr/include/stdio.h', '/usr/include/stdlib.h', '/usr/include/string.h', '/usr/include/pcre2.h',
          '/usr/include/jansson.h', '/usr/include/utf8proc.h', '/usr/include/zlib.h',
          '/usr/lib/python3.11/textwrap.py', '/usr/lib/python3.11/json/decoder.py', '/usr/lib/python3.11/json/encoder.py',
          '/usr/lib/python3.11/shlex.py', '/usr/lib/python3.11/heapq.py', '/usr/lib/python3.11/bisect.py',
          '/usr/lib/python3.11/fractions.py', '/usr/lib/python3.11/string.py', '/usr/lib/python3.11/base64.py']:
    add_file(p, 60000)
# many languages
for p in sorted(glob.glob('/usr/share/gnupg/help*.txt')):
    add_file(p)

def ch(lo, hi): return chr(rnd.randint(lo, hi))
def words(gen, n, sep=' '): return sep.join(gen() for _ in range(n))

EMOJI = ['😀', '😂', '🥲', '🙂', '👍', '👍🏽', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🏴‍☠️', '❤️', '❤️‍🔥', '🇯🇵', '🇺🇸', '🇩🇪',
         '1️⃣', '#️⃣', '🧑🏿‍🚀', '👁️‍🗨️', '🐈‍⬛', '🫠', '✨', '🔥', '💯', '🤷‍♀️', '🙋🏻‍♂️', '☺', '✌️', '©️', '™']
SPECIAL = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<s>', '</s>', '<unk>',
           '<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>', '<|im_sta', '<<s>>',
           '<|reserved_special_token_3|>', '<tool_call>', '<|fim_prefix|>', '<0x41>', '▁', '▁▁hello']
WS = [' ', '  ', '\t', '\n', '\r\n', '\n\n\n', ' \n ', '\u00a0', '\u3000', '\u2003', '\u200b', '\ufeff', '\u2028', '\x0b', '\x0c', '\u0085', '\u180e']

def cjk(): return ''.join(ch(0x4E00, 0x9FFF) for _ in range(rnd.randint(1, 12))) + rnd.choice(['。', '，', '、', '！', '？', ''])
def kana(): return ''.join(ch(0x3041, 0x3096) if rnd.random() < .5 else ch(0x30A1, 0x30FA) for _ in range(rnd.randint(1, 8)))
def hangul(): return ''.join(ch(0xAC00, 0xD7A3) for _ in range(rnd.randint(1, 6)))
def arabic():
    s = ''
    for _ in range(rnd.randint(2, 9)):
        s += ch(0x0621, 0x064A)
        if rnd.random() < .3: s += ch(0x064B, 0x0652)
    return s
def hebrew(): return ''.join(ch(0x05D0, 0x05EA) for _ in range(rnd.randint(2, 7)))
def devanagari(): return ''.join(ch(0x0915, 0x0939) + rnd.choice(['', 'ा', 'ि', 'ी', '्', 'ं']) for _ in range(rnd.randint(1, 5)))
def thai(): return ''.join(ch(0x0E01, 0x0E2E) + rnd.choice(['', 'ั', 'ิ', '่', '้']) for _ in range(rnd.randint(2, 8)))
def combining():
    s = ''
    for _ in range(rnd.randint(1, 8)):
        s += rnd.choice('aeiouAEIOUnczsgy')
        for _ in range(rnd.choice([0, 0, 1, 1, 2, 3])): s += ch(0x0300, 0x036F)
    return s
def latin():
    w = ''.join(rnd.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(rnd.randint(1, 10)))
    r = rnd.random()
    if r < .1: w = w.upper()
    elif r < .3: w = w.capitalize()
    if rnd.random() < .15: w += rnd.choice(["'s", "'S", "'t", "'T", "'re", "'RE", "'Ve", "'m", "'ll", "'LL", "'d", "'D", "ſ", "'ſ", "'K", "n't"])
    return w
def digits():
    r = rnd.random()
    if r < .3: return str(rnd.randint(0, 10 ** rnd.randint(1, 25)))
    if r < .5: return '%d.%d' % (rnd.randint(0, 99999), rnd.randint(0, 9999))
    if r < .6: return ''.join(ch(0x0660, 0x0669) for _ in range(rnd.randint(1, 7)))
    if r < .7: return ''.join(ch(0xFF10, 0xFF19) for _ in range(rnd.randint(1, 7)))
    if r < .8: return ''.join(rnd.choice('²³¹¼½¾⁴⁵①②③Ⅳ') for _ in range(rnd.randint(1, 4)))
    return ''.join(ch(0x0966, 0x096F) for _ in range(rnd.randint(1, 5)))
def punct(): return rnd.choice(['.', ',', '!', '?', '...', '—', '–', '"', '“', '”', '«', '»', '(', ')', '[', ']', '{', '}', ';', ':', '-', '/', '\\', '@', '#', '$', '%', '^', '&', '*', '~', '`', '|', '+=', '->', '::', '!=', '\'', '¿', '¡', '§', '¶'])
def emoji(): return ''.join(rnd.choice(EMOJI) for _ in range(rnd.randint(1, 4)))
def space(): return rnd.choice(WS) if rnd.random() < .8 else ' ' * rnd.randint(2, 60) + rnd.choice(['', '\n', '\t\t'])
def special(): return rnd.choice(SPECIAL)
GENS = [(cjk, 8), (kana, 4), (hangul, 3), (arabic, 4), (hebrew, 2), (devanagari, 2), (thai, 2), (combining, 4),
        (latin, 30), (digits, 8), (punct, 10), (emoji, 5), (special, 3), (space, 6)]
TOTAL = sum(w for _, w in GENS)
def pick():
    r = rnd.uniform(0, TOTAL)
    for g, w in GENS:
        r -= w
        if r <= 0: return g
    return GENS[-1][0]

gen = bytearray()
while len(gen) < 310000:
    line = ''
    for _ in range(rnd.randint(3, 40)):
        line += pick()() + (' ' if rnd.random() < .7 else '')
    b = line.encode('utf-8', 'surrogatepass')
    if rnd.random() < .08:  # invalid UTF-8 and controls
        bad = rnd.choice([b'\x80', b'\xbf\xbf', b'\xc0\xaf', b'\xc3', b'\xe2\x82', b'\xed\xa0\x80', b'\xf0\x9f\x98',
                          b'\xf5\x80\x80\x80', b'\xff', b'\xfe\xff', b'\xf4\x90\x80\x80', b'\xe0\x80\xaf', b'\x00', b'\x01\x7f', b'\x1b[0m'])
        pos = rnd.randint(0, len(b))
        b = b[:pos] + bad + b[pos:]
    gen += b + b'\n'
out += gen
sys.stdout.write('%d bytes\n' % len(out))
with gzip.GzipFile(sys.argv[1], 'wb', compresslevel=9, mtime=0) as f:
    f.write(bytes(out))
