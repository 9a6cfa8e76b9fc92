// The "Try it" page: type a sentence, watch stage 07 translate it, and see what every head
// read. It runs translator.js on the weights in model.js (classic scripts, so file:// works
// too), in a worker, so that typing never waits for a search.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const KINDS = { encoder: "encoder self-attention", self: "decoder self-attention",
    cross: "cross-attention", stream: "the stream's self-attention" };
  const model = window.TRANSFORMER_MODEL;
  const decoderOnly = model.stage === "stages.stage08_decoder_only"; // stage 08: one stream
  let shown = null; // the last translation and its attention, for the map's selectors
  let local = null; // a translator on the page itself: for the tests, or where no worker starts

  function translator() {
    if (local === null) local = window.Translator.load(model);
    return local;
  }

  // What runs in the worker: the model, built once, answering one request at a time.
  function serve(scope) {
    let worker = null;
    scope.onmessage = ({ data }) => {
      if (data.model) worker = scope.Translator.load(data.model);
      else scope.postMessage(worker.answer(data));
    };
  }

  // Chromium refuses a worker script loaded from file://, but runs one made from a Blob URL
  // of the code itself: translator.js is one function (defineTranslator) for this.
  function startWorker() {
    try {
      const code = `${window.defineTranslator}\ndefineTranslator(self);\n(${serve})(self);\n`;
      const worker = new Worker(URL.createObjectURL(new Blob([code], { type: "text/javascript" })));
      worker.postMessage({ model });
      return worker;
    } catch (err) {
      return null; // the page searches on its own thread instead
    }
  }

  const waiting = new Map(); // request id -> the request, and what to do with its answer
  let worker = null;
  let asked = 0;

  // A translation and its attention, from the worker: { result, attention, steps, ms } or
  // { error }, as Translator.answer gives them.
  function ask(request) {
    const id = ++asked;
    return new Promise((resolve) => {
      waiting.set(id, { request: { ...request, id }, resolve });
      if (worker) worker.postMessage({ ...request, id });
      else setTimeout(() => receive(translator().answer({ ...request, id })));
    });
  }

  function receive(reply) {
    const { resolve } = waiting.get(reply.id);
    waiting.delete(reply.id);
    resolve(reply);
  }

  function options(n) {
    return Array.from({ length: n }, (_, i) => `<option value="${i}">${i + 1}</option>`).join("");
  }

  function escape(text) {
    return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }

  // Each id's token or piece; those read as <unk> stand out.
  function pieces(tokens, ids) {
    return tokens.map((t, i) => `<span class="try-piece${ids[i] === window.TranslatorIds.UNK_ID ? " try-unknown" : ""}">${escape(t)}</span>`).join(" ");
  }

  // Every layer's weights for the translation shown: the encoder's over the source, and the
  // decoder's for each output token (the row that produced it) over what it could read.
  function labelled({ encoder, self, cross, stream }, result) {
    const source = [...result.words, "<eos>"];
    if (stream) { // stage 08: each position of the stream, labelled with its own token
      const tokens = [...source, "<bos>", ...result.output].slice(0, stream[0][0].length);
      return { stream: { weights: stream, rows: tokens, cols: tokens } };
    }
    // The last row writes <eos>; a translation cut by its limit has no row after its last word.
    const output = result.ended ? [...result.output, "<eos>"] : result.output;
    const read = ["<bos>", ...result.output].slice(0, output.length);
    return {
      encoder: { weights: encoder, rows: source, cols: source },
      self: { weights: self, rows: output, cols: read },
      cross: { weights: cross, rows: output, cols: source },
    };
  }

  function drawMap() {
    if (!shown) return;
    const kind = $("try-kind").value;
    const { weights, rows, cols } = shown.attention[kind];
    const chosen = Math.min(Number($("try-layer").value) || 0, weights.length - 1);
    $("try-layer").innerHTML = options(weights.length); // this kind's own layers
    $("try-layer").value = String(chosen);
    const layer = chosen;
    const head = Number($("try-head").value);
    const grid = weights[layer][head];
    const header = cols.map((c) => `<th scope="col"><span>${escape(c)}</span></th>`).join("");
    const body = grid.map((row, i) => `<tr data-row="${i}"><th scope="row">${escape(rows[i])}</th>${row.map((w, j) => `<td style="--w:${w.toFixed(4)}" title="${escape(rows[i])} → ${escape(cols[j])}: ${w.toFixed(3)}"></td>`).join("")}</tr>`).join("");
    $("try-map").innerHTML = `<table class="try-heatmap"><caption>${KINDS[kind]}, layer ${layer + 1}, head ${head + 1}: each row sums to 1</caption><thead><tr><th></th>${header}</tr></thead><tbody>${body}</tbody></table>`;
    $("try-read").textContent = "Hover a row to see what that token read.";
    for (const tr of $("try-map").querySelectorAll("tbody tr")) {
      tr.addEventListener("mouseenter", () => {
        const i = Number(tr.dataset.row);
        // The three it read most, leaving out what would show as 0.00.
        const top = grid[i].map((w, j) => [w, cols[j]]).filter(([w]) => w >= 0.005)
          .sort((a, b) => b[0] - a[0]).slice(0, 3);
        $("try-read").textContent = `${rows[i]} read: ` + top.map(([w, c]) => `${c} ${w.toFixed(2)}`).join(", ");
      });
    }
  }

  // The search step by step: one column per step, its 2 x beam best extensions best first,
  // each joined to the hypothesis it extends; blue go on, green finished (with their score),
  // grey were dropped.
  function drawBeam(steps) {
    if (!steps.length) { $("try-beam").innerHTML = ""; return; }
    const colWidth = 150;
    const rowHeight = 26;
    const ranks = Math.max(...steps.map((s) => s.length));
    const width = colWidth * (steps.length + 1);
    const height = rowHeight * (ranks + 1);
    const y = (rank) => rowHeight * (rank + 0.5);
    const x = (step) => colWidth * (step + 1);
    let svg = `<text x="4" y="${y(0) + 4}" class="try-beam-token">&lt;bos&gt;</text>`;
    steps.forEach((step, s) => {
      const parents = s === 0 ? [0] : steps[s - 1].map((c, r) => r).filter((r) => steps[s - 1][r].goesOn);
      step.forEach((c, rank) => {
        const from = s === 0 ? 0 : parents[c.parent] ?? 0;
        const cls = c.finished ? "finished" : c.goesOn ? "live" : "dropped";
        svg += `<line x1="${x(s) - colWidth + (s === 0 ? 52 : 112)}" y1="${y(from)}" x2="${x(s) - 4}" y2="${y(rank)}" class="try-beam-${cls}"/>`;
        svg += `<text x="${x(s)}" y="${y(rank) + 4}" class="try-beam-token try-beam-${cls}">${escape(model.tgt_itos[c.token])}<tspan dx="4" class="try-beam-score">${c.logProb === -Infinity ? "" : c.finished ? `score ${c.score.toFixed(2)}` : c.logProb.toFixed(2)}</tspan></text>`;
      });
    });
    $("try-beam").innerHTML = `<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="the beam search, step by step">${svg}</svg>`;
  }

  function showError(message) {
    shown = null;
    $("try-output").textContent = "";
    $("try-message").textContent = message;
    for (const id of ["try-map", "try-beam", "try-source-pieces", "try-output-pieces"]) {
      $(id).innerHTML = "";
    }
    $("try-time").textContent = "";
    $("try-read").textContent = "";
  }

  // The sampling settings the form holds, or the message that says which one is wrong.
  function samplingSettings() {
    const read = (id) => ($(id).value.trim() === "" ? null : Number($(id).value));
    const [temperature, topK, topP, seed] = ["try-temperature", "try-top-k", "try-top-p",
      "try-seed"].map(read);
    if (!(temperature >= 0)) return "the temperature must be 0 (greedy) or more";
    if (topK !== null && !(Number.isInteger(topK) && topK >= 1)) {
      return "top-k must be a whole number, 1 or more (empty: every token)";
    }
    if (topP !== null && !(topP > 0 && topP <= 1)) return "top-p must be in (0, 1] (empty: 1)";
    if (!(Number.isInteger(seed) && seed >= 0)) return "the seed must be a whole number, 0 or more";
    return { temperature, topK, topP, seed };
  }

  // Translate what the form holds now, and show it.
  async function translateForm() {
    const text = $("try-source").value;
    const search = $("try-search").value;
    const beam = search === "beam";
    const alpha = Number($("try-alpha").value);
    if (beam && !($("try-alpha").value !== "" && alpha >= 0)) {
      showError("the length penalty's alpha must be 0 or more: a negative one would favour " +
        "ever shorter sentences");
      return;
    }
    const sampling = search === "sample" ? samplingSettings() : null;
    if (typeof sampling === "string") {
      showError(sampling);
      return;
    }
    const reply = await ask({ text, beamSize: beam ? 4 : 1, alpha, sampling });
    if (reply.error !== undefined) {
      showError(reply.error);
      return;
    }
    const { result } = reply;
    shown = { result, attention: labelled(reply.attention, result) };
    $("try-output").textContent = result.text;
    $("try-message").textContent = result.note;
    $("try-source-pieces").innerHTML = pieces(result.words, result.srcIds);
    $("try-output-pieces").innerHTML = pieces(result.output, result.ids);
    $("try-time").textContent = `${beam ? "beam 4" : search === "sample" ? "sampled" : "greedy"}, ` +
      `${reply.ms.toFixed(0)} ms`;
    drawMap();
    drawBeam(beam ? reply.steps : []);
    if (window.tryIt.firstTranslation === null) window.tryIt.firstTranslation = performance.now();
  }

  // One translation at a time: what is typed meanwhile waits, and only the latest text is
  // translated next. The promise settles once the form's latest state is on the page.
  let running = null;
  let again = false;
  function run() {
    again = true;
    running ??= (async () => {
      while (again) {
        again = false;
        await translateForm();
      }
    })().finally(() => { running = null; });
    return running;
  }

  function start() {
    worker = startWorker();
    if (worker) {
      worker.onerror = () => { // no worker after all: answer what it was asked here
        worker = null;
        for (const { request } of [...waiting.values()]) receive(translator().answer(request));
      };
      worker.onmessage = ({ data }) => receive(data);
    }
    const { num_encoder_layers: enc, num_decoder_layers: dec, num_layers: layers,
      num_heads: heads } = model.config;
    $("try-layer").innerHTML = options(decoderOnly ? layers : Math.max(enc, dec));
    $("try-head").innerHTML = options(heads);
    if (decoderOnly) { // one stream: one kind of attention, and sampling as well as search
      $("try-kind").innerHTML = `<option value="stream">${KINDS.stream}</option>`;
      $("try-rows-note").textContent = "Each row and column is one token of the stream: the " +
        "source, then <bos> and the output so far. Layers and heads count from 1, as in the " +
        "notebooks' titles and printed lines.";
      $("try-sample-option").hidden = false;
    }
    const showOptions = () => {
      $("try-alpha-row").hidden = $("try-search").value !== "beam";
      $("try-sampling-row").hidden = $("try-search").value !== "sample";
    };
    showOptions();
    $("try-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
    let timer = null;
    $("try-source").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 300); });
    $("try-search").addEventListener("change", () => {
      showOptions();
      run();
    });
    for (const id of ["try-alpha", "try-temperature", "try-top-k", "try-top-p", "try-seed"]) {
      $(id).addEventListener("change", run);
    }
    for (const id of ["try-kind", "try-layer", "try-head"]) $(id).addEventListener("change", drawMap);
    run();
  }

  // For the tests: the form's translation, the worker's answer to any request, a translator
  // on the page's own thread, and when the first translation was on screen (ms after the
  // page started loading).
  window.tryIt = { run, ask, translator, firstTranslation: null,
    inWorker: () => worker !== null };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
