// pipe_oracle.mjs — the reference side of tests/test_text_pipeline.c: Hugging Face's JavaScript
// tokenizers (@huggingface/tokenizers, pinned) on small hand-made tokenizer.json files.
//   node tests/text/pipe_oracle.mjs TOKENIZERS_MJS TEXTS OUT DIR...
// TEXTS: little-endian records u32 n, n bytes (each decoded from UTF-8 with replacement).
// OUT, per DIR, per text: u32 n, n x i32 ids (every added token matched, no template);
//   u32 n, n bytes decode(ids) without clean-up.
// The output is a pure function of this script, the pinned library, the texts and the tokenizer
// files: it is kept under FP4_ORACLE_CACHE (if set, as tests/text/oracle.mjs does) keyed by their
// SHA-256, so CI's test runs start node's reference once.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const [lib, textsPath, outPath, ...dirs] = process.argv.slice(2);
const cacheDir = process.env.FP4_ORACLE_CACHE;
let cached = null;
if (cacheDir) {
  const h = crypto.createHash('sha256');
  const files = [new URL(import.meta.url).pathname, lib, textsPath,
    ...dirs.map((d) => `${d}/tokenizer.json`)];
  for (const f of files) {
    const b = fs.readFileSync(f);
    h.update(`${b.length}:`).update(b);
  }
  cached = path.join(cacheDir, `pipe-oracle-${h.digest('hex')}.bin`);
  if (fs.existsSync(cached)) {
    fs.copyFileSync(cached, outPath);
    process.exit(0);
  }
}
const { Tokenizer } = await import(lib);
const raw = fs.readFileSync(textsPath);
const texts = [];
for (let p = 0; p < raw.length;) {
  const n = raw.readUInt32LE(p);
  texts.push(raw.subarray(p + 4, p + 4 + n).toString('utf8'));
  p += 4 + n;
}
const parts = [];
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; };
for (const dir of dirs) {
  const tj = JSON.parse(fs.readFileSync(`${dir}/tokenizer.json`, 'utf8'));
  const t = new Tokenizer(tj, { clean_up_tokenization_spaces: false });
  for (const text of texts) {
    const ids = t.encode(text, { add_special_tokens: false }).ids;
    const b = Buffer.alloc(4 + 4 * ids.length);
    b.writeUInt32LE(ids.length);
    ids.forEach((v, i) => b.writeInt32LE(v, 4 + 4 * i));
    const d = ids.length ? Buffer.from(t.decode(ids, { clean_up_tokenization_spaces: false }), 'utf8')
                         : Buffer.alloc(0);
    parts.push(b, u32(d.length), d);
  }
}
fs.writeFileSync(outPath, Buffer.concat(parts));
if (cached) { // written whole under a temporary name, then renamed: a reader never sees a part
  fs.mkdirSync(cacheDir, { recursive: true });
  const tmp = `${cached}.${process.pid}.tmp`;
  fs.copyFileSync(outPath, tmp);
  fs.renameSync(tmp, cached);
}
