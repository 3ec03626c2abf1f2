// pipe_oracle.mjs — the reference side of tests/test_text_pipeline.c: Hugging Face's JavaScript
// tokenizers (@huggingface/tokenizers, pinned) on small hand-made tokenizer.json files.
//   node tests/text/pipe_oracle.mjs TOKENIZERS_MJS TEXTS OUT DIR...
// TEXTS: little-endian records u32 n, n bytes (each decoded from UTF-8 with replacement).
// OUT, per DIR, per text: u32 n, n x i32 ids (every added token matched, no template);
//   u32 n, n bytes decode(ids) without clean-up.
import fs from 'node:fs';

const [lib, textsPath, outPath, ...dirs] = process.argv.slice(2);
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
