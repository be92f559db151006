// Generates tokenizer/testdata/tiktoken_models.json, the model map of OpenAI's tiktoken (npm "tiktoken",
// pinned in package.json): every model name tiktoken knows and the encoding it counts that model with.
// The registry's tests (tokenizer/registry_test.go) check that tokenizer.ForModel picks the same encoding
// for each, and refuses the names whose encoding this package does not have.
//
// Each name of the package's model_to_encoding.json is asked of tiktoken's own lookup
// (get_encoding_name_for_model, its Rust core compiled to WASM), so the file holds what tiktoken answers,
// not only what its JSON says.
//
// Run it with `go generate ./tokenizer` (or `npm ci && node models.mjs` here). It needs no network beyond npm.

import { get_encoding_name_for_model } from "tiktoken";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const nm = (rel) => path.join(here, "node_modules", rel);
const out = path.resolve(here, "../../tokenizer/testdata/tiktoken_models.json");
const version = JSON.parse(readFileSync(nm("tiktoken/package.json"), "utf8")).version;
const map = JSON.parse(readFileSync(nm("tiktoken/model_to_encoding.json"), "utf8"));

const models = Object.keys(map)
  .sort()
  .map((name) => {
    const encoding = get_encoding_name_for_model(name);
    if (encoding !== map[name]) throw new Error(`${name}: tiktoken says ${encoding}, its map ${map[name]}`);
    return { name, encoding };
  });

const doc = { reference: `npm tiktoken@${version}`, models };
// One model a line, so that a change to the map reads as a change to its lines.
const lines = models.map((m) => "    " + JSON.stringify(m));
writeFileSync(out, `{\n  "reference": ${JSON.stringify(doc.reference)},\n  "models": [\n${lines.join(",\n")}\n  ]\n}\n`);
JSON.parse(readFileSync(out, "utf8")); // the file is valid JSON
console.log(`${path.relative(process.cwd(), out)}: ${models.length} models from ${doc.reference}`);
