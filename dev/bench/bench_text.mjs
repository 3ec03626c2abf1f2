// bench_text.mjs — the JS reference's speed on the same corpus and chunks as dev/bench/bench_text.c,
// in process CPU time (user + system) like the C side's thread CPU time.
//   node dev/bench/bench_text.mjs TOKENIZERS_MJS MODEL_DIR CORPUS REPS
import fs from 'node:fs';
const [lib, dir, corpusPath, repsArg] = process.argv.slice(2);
const { Tokenizer } = await import(lib);
const reps = Number(repsArg);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e3; }; // ms
let bestLoad = 1e9;
let tok;
for (let r = 0; r < reps; r++) {
  const t0 = cpu();
  tok = new Tokenizer(JSON.parse(fs.readFileSync(`${dir}/tokenizer.json`, 'utf8')),
    JSON.parse(fs.readFileSync(`${dir}/tokenizer_config.json`, 'utf8')));
  bestLoad = Math.min(bestLoad, cpu() - t0);
}
const corpus = fs.readFileSync(corpusPath);
const chunks = [];
for (let pos = 0; pos < corpus.length;) {
  let end = Math.min(corpus.length, pos + 2048);
  while (end < corpus.length && corpus[end - 1] !== 0x0a) end++;
  chunks.push(corpus.subarray(pos, end).toString('utf8'));
  pos = end;
}
let bestEnc = 1e9, bestWall = 1e9, ids = 0;
for (let r = 0; r < reps; r++) {
  // a fresh tokenizer per repetition so that its word cache starts empty, as fp4lane's has none
  tok = new Tokenizer(JSON.parse(fs.readFileSync(`${dir}/tokenizer.json`, 'utf8')),
    JSON.parse(fs.readFileSync(`${dir}/tokenizer_config.json`, 'utf8')));
  ids = 0;
  const t0 = cpu(), w0 = performance.now();
  for (const c of chunks) ids += tok.encode(c, { add_special_tokens: false }).ids.length;
  bestEnc = Math.min(bestEnc, cpu() - t0);
  bestWall = Math.min(bestWall, performance.now() - w0);
}
console.log(JSON.stringify({ load_json_ms: +bestLoad.toFixed(1), bytes: corpus.length, ids,
  encode_mb_s: +(corpus.length / bestEnc / 1e3).toFixed(2),
  encode_mb_s_wall: +(corpus.length / bestWall / 1e3).toFixed(2) }));
