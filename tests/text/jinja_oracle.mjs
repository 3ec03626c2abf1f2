// jinja_oracle.mjs — the reference side of tests/test_jinja.c: @huggingface/jinja (pinned) renders
// every template of a case file with every context, with strftime_now's clock fixed.
//   node tests/text/jinja_oracle.mjs JINJA_PACKAGE_DIR CASES.json OUT.json
// CASES.json: {"now": unix_ms, "templates": [{"name", "text", "vars"}], "contexts": [{"name", "vars"}]};
// a render sees the context's vars, then the template's (bos_token, eos_token).
// OUT.json: [[{"ok": true, "out": text} | {"ok": false, "error": message}, ...per context], ...per template]
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkg, casesPath, outPath] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
const RealDate = Date;
// strftime_now reads `new Date()`: a fixed instant (the C side reads it as UTC; TZ=UTC here)
globalThis.Date = class extends RealDate {
  constructor(...a) { if (a.length) super(...a); else super(cases.now); }
  static now() { return cases.now; }
};
const { Template } = await import(pathToFileURL(path.join(pkg, 'dist', 'index.js')).href);
// what a JavaScript string becomes as UTF-8 bytes (a lone surrogate: U+FFFD)
const utf8 = (x) => Buffer.from(String(x), 'utf8').toString('utf8');
const out = cases.templates.map((t) => {
  let tpl;
  try {
    tpl = new Template(t.text);
  } catch (e) {
    return cases.contexts.map(() => ({ ok: false, error: utf8(`compile: ${e.message}`) }));
  }
  return cases.contexts.map((c) => {
    try {
      return { ok: true, out: utf8(tpl.render({ ...JSON.parse(JSON.stringify(c.vars)), ...t.vars })) };
    } catch (e) {
      return { ok: false, error: utf8(e && e.message) };
    }
  });
});
fs.writeFileSync(outPath, JSON.stringify(out));
