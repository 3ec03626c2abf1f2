// serve_openai.mjs PORT — the official `openai` npm client (pinned by the Makefile's oracle-serve)
// against a running `fp4lane serve` on loopback: chat, streaming (with usage), completions,
// models, errors (the client's APIError with status and param), and an abort in the middle of a
// stream. Run by tests/test_serve.sh; the last line is "openai: N passed, N failed".

const port = process.argv[2];
const { default: OpenAI } = await import(`${process.env.FP4_SERVE_NPM}/openai/index.mjs`);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0,
                            timeout: 60000 });
let pass = 0, fail = 0;
const check = (name, cond) => { if (cond) pass++; else { fail++; console.error(`FAIL: ${name}`); } };
const msgs = [{ role: 'user', content: 'What does the configuration file hold?' }];

async function main() {
  const models = await client.models.list();
  check('models.list', models.data.length === 1 && models.data[0].id === 'tiny');

  const chat = await client.chat.completions.create({ model: 'tiny', messages: msgs, max_tokens: 12, seed: 7,
                                                      logprobs: true, top_logprobs: 2 });
  const c0 = chat.choices[0];
  check('chat', chat.object === 'chat.completion' && c0.message.role === 'assistant' &&
                ['stop', 'length'].includes(c0.finish_reason) && chat.usage.completion_tokens > 0);
  check('chat logprobs', c0.logprobs.content.length > 0 && c0.logprobs.content[0].top_logprobs.length === 2);

  const stream = await client.chat.completions.create({
    model: 'tiny', messages: msgs, max_tokens: 12, seed: 7, stream: true,
    stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null;
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    const d = ch.choices[0];
    if (d && d.delta.content) text += d.delta.content;
    if (d && d.finish_reason) finish = d.finish_reason;
  }
  check('stream = non-stream', text === c0.message.content && finish === c0.finish_reason);
  check('stream usage', usage && usage.completion_tokens === chat.usage.completion_tokens);

  const cmp = await client.completions.create({ model: 'tiny', prompt: 'This section describes',
                                                max_tokens: 8,
                                                temperature: 0 });
  check('completions', cmp.object === 'text_completion' && cmp.choices[0].text.length > 0);

  try {
    await client.chat.completions.create({ model: 'tiny', messages: msgs, temperature: 'hot' });
    check('error thrown', false);
  } catch (e) {
    check('APIError 400 naming the field',
          e instanceof OpenAI.APIError && e.status === 400 && e.param === 'temperature');
  }
  try {
    await client.chat.completions.create({ model: 'tiny', messages: msgs,
                                           response_format: { type: 'json_object' } });
    check('json_object refused', false);
  } catch (e) {
    check('json_object refused', e.status === 400 && e.param === 'response_format');
  }

  // abort in the middle of a long stream: the client stops, the server cancels (metrics)
  const ctl = new AbortController();
  const long = await client.completions.create(
    { model: 'tiny', prompt: 'This section describes', max_tokens: 480, temperature: 0.8, seed: 1,
      stream: true },
    { signal: ctl.signal });
  let n = 0, aborted = false;
  try {
    for await (const ch of long) { if (ch.choices[0].text) n++; if (n === 3) ctl.abort(); }
  } catch (e) { aborted = true; }
  check('abort mid-stream', (aborted || ctl.signal.aborted) && n >= 3 && n < 480);
  let cancelled = false;
  for (let i = 0; i < 50 && !cancelled; i++) {
    const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const x = /fp4lane_finished_total\{reason="cancelled"\} (\d+)/.exec(m);
    cancelled = x && +x[1] > 0;
    if (!cancelled) await new Promise(r => setTimeout(r, 100));
  }
  check('the server cancelled the aborted request', cancelled);
}

main().catch(e => { fail++; console.error('FAIL: ' + e); })
  .finally(() => console.log(`openai: ${pass} passed, ${fail} failed`));
