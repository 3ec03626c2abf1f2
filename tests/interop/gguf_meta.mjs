// gguf_meta.mjs — prints what Hugging Face's GGUF parser (@huggingface/gguf, pinned) reads from a
// file, as JSON: metadata and tensor infos. Usage: node gguf_meta.mjs MODULE_PATH FILE
const [, , modulePath, file] = process.argv;
const { gguf } = await import(modulePath);
const { metadata, tensorInfos } = await gguf(file, { allowLocalFile: true });
const out = {
  metadata,
  tensors: tensorInfos.map((t) => ({
    name: t.name,
    dtype: Number(t.dtype),
    shape: t.shape.map(Number),
    offset: Number(t.offset),
  })),
};
console.log(JSON.stringify(out, (k, v) => (typeof v === "bigint" ? Number(v) : v)));
