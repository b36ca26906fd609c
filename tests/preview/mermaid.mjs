// Parses each Mermaid diagram of a JSON list on stdin with Mermaid's own parser; prints
// [{"error": ""} | {"error": "<message>"}] in the same order. Mermaid sanitizes text with
// DOMPurify, which needs a window: jsdom gives it one, as a browser would.
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!DOCTYPE html><p></p>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const text of JSON.parse(input)) {
  try {
    await mermaid.parse(text);
    out.push({ error: "" });
  } catch (err) {
    out.push({ error: String((err && err.message) || err) });
  }
}
process.stdout.write(JSON.stringify(out));
