// rust_oracle.mjs — the references of tests/test_text_unigram.c on a corpus, chunk by chunk: Hugging
// Face's Rust tokenizers (0.22, through the pinned N-API build @anush008/tokenizers) and the
// JavaScript reference (@huggingface/tokenizers, pinned).
//   node tests/text/rust_oracle.mjs NPM_DIR MODEL_DIR CORPUS(.gz) STRIDE OUT
// Chunks as tests/text/oracle.mjs cuts them (after the first '\n' at or past 2048 bytes); every
// STRIDE-th chunk is encoded. OUT holds, per encoded chunk, little-endian records:
//   u32 n, n x i32   Rust ids, added tokens matched, no template
//   u32 n, n x i32   Rust ids with the template's special tokens
//   u32 n, n x i32   JavaScript ids, added tokens matched, no template
//   u32 n, n bytes   Rust decode of the first ids (special tokens kept)
// Cached under FP4_ORACLE_CACHE as oracle.mjs is (keyed by the SHA-256 of everything it reads).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';

const [npm, dir, corpusPath, strideArg, outPath] = process.argv.slice(2);
const stride = Number(strideArg);
const rustDir = `${npm}/@anush008/tokenizers`;
const jsLib = `${npm}/@huggingface/tokenizers/dist/tokenizers.mjs`;
const cacheDir = process.env.FP4_ORACLE_CACHE;
let cached = null;
if (cacheDir) {
  const h = crypto.createHash('sha256');
  for (const f of [new URL(import.meta.url).pathname, `${rustDir}/package.json`, jsLib,
    `${dir}/tokenizer.json`, `${dir}/tokenizer_config.json`, corpusPath]) {
    const b = fs.readFileSync(f);
    h.update(`${b.length}:`).update(b);
  }
  h.update(`stride ${stride}`);
  cached = path.join(cacheDir, `rust-oracle-${h.digest('hex')}.bin`);
  if (fs.existsSync(cached)) {
    fs.copyFileSync(cached, outPath);
    process.exit(0);
  }
}
const require = createRequire(`${npm}/`);
const { Tokenizer: RustTokenizer } = require('@anush008/tokenizers');
const { Tokenizer: JsTokenizer } = await import(jsLib);
const tjText = fs.readFileSync(`${dir}/tokenizer.json`, 'utf8');
const rust = RustTokenizer.fromString(tjText);
const tcText = fs.readFileSync(`${dir}/tokenizer_config.json`, 'utf8');
const js = new JsTokenizer(JSON.parse(tjText), JSON.parse(tcText));

let corpus = fs.readFileSync(corpusPath);
if (corpusPath.endsWith('.gz')) corpus = zlib.gunzipSync(corpus);
const parts = [];
const ids32 = (ids) => {
  const b = Buffer.alloc(4 + 4 * ids.length);
  b.writeUInt32LE(ids.length);
  ids.forEach((v, i) => b.writeInt32LE(v, 4 + 4 * i));
  return b;
};
let pos = 0;
for (let k = 0; pos < corpus.length; k++) {
  let end = Math.min(corpus.length, pos + 2048);
  while (end < corpus.length && corpus[end - 1] !== 0x0a) end++;
  const text = corpus.subarray(pos, end).toString('utf8');
  pos = end;
  if (k % stride) continue;
  const a = (await rust.encode(text, null, { addSpecialTokens: false })).getIds();
  const b = (await rust.encode(text, null, { addSpecialTokens: true })).getIds();
  const c = js.encode(text, { add_special_tokens: false }).ids;
  const d = a.length ? Buffer.from(await rust.decode(a, false), 'utf8') : Buffer.alloc(0);
  const n = Buffer.alloc(4);
  n.writeUInt32LE(d.length);
  parts.push(ids32(a), ids32(b), ids32(c), n, d);
}
const result = Buffer.concat(parts);
fs.writeFileSync(outPath, result);
if (cached) { // a temporary name, then rename: a run killed midway never leaves a partial entry
  fs.mkdirSync(cacheDir, { recursive: true });
  const tmp = `${cached}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, result);
  fs.renameSync(tmp, cached);
}
