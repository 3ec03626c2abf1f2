// unigram_fixture.mjs — a real Unigram tokenizer.json for tests/test_text_unigram.c, made from the
// XLM-RoBERTa SentencePiece vocabulary that llama.cpp's source bundle ships
// (models/ggml-vocab-nomic-bert-moe.gguf: 250002 scored pieces and SentencePiece's
// precompiled_charsmap), written in the form Hugging Face's converter gives XLM-R:
//   node tests/text/unigram_fixture.mjs VOCAB.gguf OUT_DIR VARIANT [OUT_DIR VARIANT ...]
// VARIANT: xlmr   Precompiled + Replace(Regex " {2,}"), Metaspace, Unigram, <s> $A </s>
//          nfkc   the same with NFKC in place of Precompiled (both references read NFKC alike)
//          rust   nfkc, with <0x00>..<0xFF> pieces appended and byte_fallback on, and added tokens
//                 that are single_word / lstrip / rstrip / normalized (read by the Rust library alone)
import fs from 'node:fs';

const [ggufPath, ...outs] = process.argv.slice(2);
const f = fs.readFileSync(ggufPath);
let o = 0;
const u32 = () => { const v = f.readUInt32LE(o); o += 4; return v; };
const u64 = () => { const v = Number(f.readBigUInt64LE(o)); o += 8; return v; };
const str = () => { const n = u64(); const s = f.subarray(o, o + n); o += n; return s; };
const scalar = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
function value(t) {
  if (t === 8) return str().toString('utf8');
  if (t === 9) {
    const et = u32(); const n = u64();
    if (et === 0) { const b = f.subarray(o, o + n); o += n; return b; }
    const a = new Array(n);
    for (let i = 0; i < n; i++) {
      if (et === 6) { a[i] = f.readFloatLE(o); o += 4; }
      else if (et === 5) { a[i] = f.readInt32LE(o); o += 4; }
      else a[i] = value(et);
    }
    return a;
  }
  const n = scalar[t];
  if (n === undefined) throw new Error(`GGUF type ${t}`);
  const v = t === 6 ? f.readFloatLE(o) : t === 4 ? f.readUInt32LE(o) : t === 5 ? f.readInt32LE(o)
    : t === 7 || t === 0 ? f[o] : t === 10 ? Number(f.readBigUInt64LE(o)) : 0;
  o += n;
  return v;
}
if (f.subarray(0, 4).toString() !== 'GGUF') throw new Error('not a GGUF');
o = 8;
u64();
const nk = u64();
const kv = {};
for (let i = 0; i < nk; i++) { const k = str().toString('utf8'); kv[k] = value(u32()); }
if (kv['tokenizer.ggml.model'] !== 't5') throw new Error('not a SentencePiece Unigram vocabulary');
const toks = kv['tokenizer.ggml.tokens'];
const scores = kv['tokenizer.ggml.scores'];
const mask = kv['tokenizer.ggml.mask_token_id'];
const n = mask + 1; // the ids after <mask> are padding rows of the embedding
const base = [];
for (let i = 0; i < n; i++) base.push([toks[i], scores[i]]);
const added = (id, content, extra = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...extra,
});
function write(outDir, variant) {
  const vocab = base.slice();
  const addedTokens = [added(0, '<s>'), added(1, '<pad>'), added(2, '</s>'), added(3, '<unk>'),
    added(mask, '<mask>', { lstrip: true })];
  let normalizer = {
    type: 'Sequence',
    normalizers: [
      {
        type: 'Precompiled',
        precompiled_charsmap: Buffer.from(kv['tokenizer.ggml.precompiled_charsmap']).toString('base64'),
      },
      { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' },
    ],
  };
  let byteFallback = false;
  if (variant !== 'xlmr') normalizer.normalizers[0] = { type: 'NFKC' };
  if (variant === 'rust') {
    byteFallback = true;
    for (let b = 0; b < 256; b++) vocab.push([`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 0]);
  }
  if (variant === 'rust') {
    // non-special added tokens that are (or end) words of the corpus, read each way
    const extra = [['ing', { single_word: true }], ['the', { single_word: true, lstrip: true }],
      ['Die', { single_word: true, rstrip: true }], ['ℌello', { normalized: true }],
      ['de', { single_word: true }],
      ['年', { single_word: true }], ['a b', { single_word: true, normalized: true }]];
    // a spelling that is a piece keeps the piece's id (as the Rust library gives it); the others follow
    const ids = new Map(vocab.map(([p], i) => [p, i]));
    let next = vocab.length;
    extra.forEach(([content, x]) => {
      const id = ids.has(content) ? ids.get(content) : next++;
      addedTokens.push(added(id, content, { special: false, ...x }));
    });
  }
  const meta = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true };
  const tj = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer,
    pre_tokenizer: meta,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      special_tokens: {
        '<s>': { id: '<s>', ids: [0], tokens: ['<s>'] },
        '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] },
      },
    },
    decoder: meta,
    model: { type: 'Unigram', unk_id: 3, vocab, byte_fallback: byteFallback },
  };
  const tc = {
    bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', pad_token: '<pad>', mask_token: '<mask>',
    clean_up_tokenization_spaces: false, model_max_length: 512, tokenizer_class: 'XLMRobertaTokenizer',
  };
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(`${outDir}/tokenizer.json`, JSON.stringify(tj));
  fs.writeFileSync(`${outDir}/tokenizer_config.json`, JSON.stringify(tc));
}
for (let k = 0; k + 1 < outs.length; k += 2) write(outs[k], outs[k + 1]);
