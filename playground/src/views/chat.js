// Chat: SmolLM2-135M-Instruct (a Q4_1 GGUF, fetched by ../scripts/fetch-models
// and linked into the served folder) generating in the page on the wasm CPU
// engine: tokens stream in, with tokens/s, and per token the time it took
// and the decode step's graph — which kernel runs each node (its dispatch).
const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
export const SMOLLM2 = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';

async function llmOf(ctx, rlx, status) {
  if (!ctx.llm) {
    ctx.llm = rlx.loadLlm(SMOLLM2, {
      device: 'cpu',
      onProgress: (p) => status(`${esc(p.stage)}: ${esc(p.message ?? '')}`),
    });
    ctx.llm.catch(() => { ctx.llm = null; });
  }
  return ctx.llm;
}

/** The decode step's kernels: op → kernel → count (from the dispatch report). */
function kernelTable(report) {
  const counts = new Map();
  for (const n of report.nodes ?? []) {
    const key = `${n.op}\u0000${(n.kernels ?? []).join(' + ')} (${n.path})`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const rows = [...counts].sort((a, b) => b[1] - a[1]).map(([k, c]) => {
    const [op, kernel] = k.split('\u0000');
    return `<tr><td>${esc(op)}</td><td><code>${esc(kernel)}</code></td><td>${c}</td></tr>`;
  });
  return `<table class="chat-kernels"><tr><th>op</th><th>kernel</th><th>nodes</th></tr>${rows.join('')}</table>`;
}

export async function renderChat(ctx, host, rlx) {
  host.innerHTML = `<div class="toolbar"><b>SmolLM2-135M-Instruct</b> <span class="muted">Q4_1 GGUF, wasm CPU</span>
      <label>max tokens <input id="chat-max" type="number" min="1" max="512" value="48" style="width:5em"></label>
      <label>temperature <input id="chat-temp" type="number" min="0" max="2" step="0.1" value="0" style="width:4em"></label>
      <span id="chat-status" class="muted" aria-live="polite"></span></div>
    <div class="pane chat">
      <form id="chat-form"><input id="chat-input" aria-label="message" placeholder="Ask something…" value="What is the capital of France?" style="width:70%">
        <button id="chat-send">Send ▸</button> <button type="button" id="chat-reset">New chat</button></form>
      <div id="chat-log" aria-live="polite"></div>
      <div id="chat-stats" class="muted"></div>
      <details id="chat-tokens-box"><summary>tokens (id, text, ms)</summary><div id="chat-tokens"></div></details>
      <details id="chat-dispatch-box" open><summary>decode step: kernels and dispatch</summary><div id="chat-dispatch"></div></details>
    </div>`;
  const $ = (s) => host.querySelector(s);
  const status = (h) => { $('#chat-status').innerHTML = h; };
  ctx.chat ??= [];
  const draw = () => {
    $('#chat-log').innerHTML = ctx.chat.map((m) => `<p class="chat-${m.role}"><b>${esc(m.role)}</b> ${esc(m.content)}</p>`).join('');
  };
  draw();
  $('#chat-reset').onclick = () => { ctx.chat = []; draw(); };
  $('#chat-form').onsubmit = async (e) => {
    e.preventDefault();
    const text = $('#chat-input').value.trim();
    if (!text) return;
    $('#chat-send').disabled = true;
    try {
      const llm = await llmOf(ctx, rlx, status);
      ctx.chat.push({ role: 'user', content: text });
      const reply = { role: 'assistant', content: '' };
      ctx.chat.push(reply);
      draw();
      const out = $('#chat-log').lastElementChild;
      const prompt = llm.chatPrompt(ctx.chat.slice(0, -1).map(({ role, content }) => ({ role, content })));
      const opts = { maxTokens: Number($('#chat-max').value) || 48, temperature: Number($('#chat-temp').value) || 0, seed: 1 };
      status('prefilling the prompt…');
      const rows = [];
      let last = performance.now();
      for await (const t of llm.generate(prompt, opts)) {
        const now = performance.now();
        rows.push(`<tr><td>${t.id}</td><td><code>${esc(JSON.stringify(t.text))}</code></td><td>${(now - last).toFixed(1)}</td></tr>`);
        last = now;
        reply.content += t.text;
        out.innerHTML = `<b>assistant</b> ${esc(reply.content)}`;
        status(`generating… ${rows.length} tokens`);
      }
      const s = llm.stats;
      $('#chat-stats').textContent = `prompt ${s.promptTokens} tokens in ${s.prefillMs.toFixed(0)} ms · ` +
        `${s.generated} tokens at ${s.tokensPerSecond.toFixed(1)} tok/s · ended by ${s.finishReason}`;
      $('#chat-tokens').innerHTML = `<table><tr><th>id</th><th>text</th><th>ms</th></tr>${rows.join('')}</table>`;
      const past = Math.max(64, 2 ** Math.ceil(Math.log2(s.promptTokens + s.generated)));
      const report = llm.decodeReport(past);
      $('#chat-dispatch').innerHTML = `<p class="muted">one decode step over a cache of ${past} positions on ${esc(report.device ?? 'cpu')}:</p>${kernelTable(report)}`;
      status('done');
      window.__rlxPlayground.chat = { text: reply.content, stats: s, kernels: (report.nodes ?? []).length };
    } catch (err) {
      status(`<span class="error">${esc(err.code ?? 'error')}: ${esc(err.message ?? err)}</span>`);
      window.__rlxPlayground.chat = { error: `${err.code}: ${err.message}` };
    } finally {
      $('#chat-send').disabled = false;
    }
  };
}
