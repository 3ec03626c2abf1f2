// oracle.mjs — the reference side of tests/test_text_oracle.c: Hugging Face's own JavaScript
// tokenizers (@huggingface/tokenizers, pinned) encode and decode a corpus, chunk by chunk.
//   node tests/text/oracle.mjs TOKENIZERS_MJS MODEL_DIR CORPUS(.gz) OUT
// Chunks: the corpus bytes cut after the first '\n' at or past 2048 bytes (the C test cuts the
// same way); each chunk is decoded from UTF-8 with replacement (as any JS string is made).
// OUT holds, per chunk, little-endian records:
//   u32 n, n x i32   ids, every added token matched        (fp4lane: FP4_TOK_PARSE_SPECIAL)
//   u32 n, n x i32   ids, special tokens not matched        (fp4lane: default flags)
//   u32 n, n x i32   ids with the template's special tokens  (FP4_TOK_ADD_SPECIAL|PARSE_SPECIAL)
//   u32 n, n bytes   decode(first ids), clean_up_tokenization_spaces false
//   u32 n, n bytes   decode(first ids), clean_up_tokenization_spaces true
//   u32 n, n bytes   decode(first ids), skip_special_tokens, no clean-up
// The output is a pure function of this script, the pinned library, the tokenizer files and the
// corpus: it is kept under FP4_ORACLE_CACHE (if set; the Makefile points it into the git-ignored
// third_party_text/) keyed by their SHA-256, so CI's four test runs pay for the reference once.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const [lib, dir, corpusPath, outPath] = process.argv.slice(2);
const cacheDir = process.env.FP4_ORACLE_CACHE;
let cached = null;
if (cacheDir) {
  const h = crypto.createHash('sha256');
  for (const f of [new URL(import.meta.url).pathname, lib, `${dir}/tokenizer.json`,
    `${dir}/tokenizer_config.json`, corpusPath]) {
    const b = fs.readFileSync(f);
    h.update(`${b.length}:`).update(b);
  }
  cached = path.join(cacheDir, `text-oracle-${h.digest('hex')}.bin`);
  if (fs.existsSync(cached)) {
    fs.copyFileSync(cached, outPath);
    process.exit(0);
  }
}
const { Tokenizer } = await import(lib);
const tj = JSON.parse(fs.readFileSync(`${dir}/tokenizer.json`, 'utf8'));
const tc = JSON.parse(fs.readFileSync(`${dir}/tokenizer_config.json`, 'utf8'));
const all = new Tokenizer(tj, tc);
// the same tokenizer with the special added tokens removed: their spellings are then plain text
const tj2 = { ...tj, added_tokens: tj.added_tokens.filter((a) => !a.special) };
const tc2 = { ...tc, added_tokens_decoder: {} };
const plain = new Tokenizer(tj2, tc2);

let corpus = fs.readFileSync(corpusPath);
if (corpusPath.endsWith('.gz')) corpus = zlib.gunzipSync(corpus);
const parts = [];
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; };
const ids32 = (ids) => {
  const b = Buffer.alloc(4 + 4 * ids.length);
  b.writeUInt32LE(ids.length);
  ids.forEach((v, i) => b.writeInt32LE(v, 4 + 4 * i));
  return b;
};
let pos = 0;
while (pos < corpus.length) {
  let end = Math.min(corpus.length, pos + 2048);
  while (end < corpus.length && corpus[end - 1] !== 0x0a) end++;
  const text = corpus.subarray(pos, end).toString('utf8');
  pos = end;
  const a = all.encode(text, { add_special_tokens: false }).ids;
  const b = plain.encode(text, { add_special_tokens: false }).ids;
  const c = all.encode(text, { add_special_tokens: true }).ids;
  const d0 = a.length ? Buffer.from(all.decode(a, { clean_up_tokenization_spaces: false }), 'utf8')
                      : Buffer.alloc(0);
  const d1 = a.length ? Buffer.from(all.decode(a, { clean_up_tokenization_spaces: true }), 'utf8')
                      : Buffer.alloc(0);
  const d2 = a.length
    ? Buffer.from(all.decode(a, { skip_special_tokens: true, clean_up_tokenization_spaces: false }), 'utf8')
    : Buffer.alloc(0);
  parts.push(ids32(a), ids32(b), ids32(c), u32(d0.length), d0, u32(d1.length), d1, u32(d2.length), d2);
}
const result = Buffer.concat(parts);
fs.writeFileSync(outPath, result);
if (cached) {
  // a temporary name, then rename: a run killed midway never leaves a partial entry
  fs.mkdirSync(cacheDir, { recursive: true });
  const tmp = `${cached}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  fs.writeSync(fd, result);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(tmp, cached);
}
