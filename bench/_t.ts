process.env.BUN_CONFIG_MAX_HTTP_REQUESTS = "4096";
const N = Number(process.argv[2] ?? 1000);
const url = process.argv[3] ?? "http://127.0.0.1:19100/v1/chat/completions";
const body = JSON.stringify({ model: "gpt-6-luna", stream: true, messages: [{ role: "user", content: '[[fake {"chunk_delay_ms":500}]]' }] });
const t0 = performance.now();
const firsts: number[] = []; const lasts: number[] = [];
await Promise.all(Array.from({ length: N }, async () => {
  const s = performance.now();
  const r = await fetch(url, { method: "POST", headers: { authorization: "Bearer x", "content-type": "application/json" }, body });
  const reader = r.body!.getReader(); let first = true;
  while (true) { const { done } = await reader.read(); if (first) { firsts.push(performance.now() - s); first = false; } if (done) break; }
  lasts.push(performance.now() - s);
}));
firsts.sort((a, b) => a - b); lasts.sort((a, b) => a - b);
console.log({ total: performance.now() - t0, fMed: firsts[N >> 1], fMax: firsts[N - 1], lMed: lasts[N >> 1], lMax: lasts[N - 1] });
