// The stage-07 Transformer's forward pass in plain JavaScript, for the Try-it page.
//
// It reads the global that toolkit/web/model_script.py writes (a classic script, so that the
// page works from file:// too) and computes what src/stages/stage07_multi_head.py computes,
// in float64, one sentence at a time: no batch, so no padding and no key padding mask. The
// whole file is one function, so that the page can also start it in a worker (try_it.js).
function defineTranslator(root) {
  "use strict";

  const [PAD_ID, UNK_ID, BOS_ID, EOS_ID] = [0, 1, 2, 3]; // toolkit.text.vocab.SPECIALS
  const EXTRA_LEN = 10; // toolkit.search.decoding.EXTRA_LEN: tokens allowed past the source

  const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const SEXTET = new Uint8Array(128);
  for (let i = 0; i < BASE64.length; i++) SEXTET[BASE64.charCodeAt(i)] = i;

  // Base64 to bytes, four characters at a time: atob would first make a string of the
  // megabytes of weights, and a byte array from it costs several times more.
  function bytesOf(base64) {
    const padding = base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0;
    const bytes = new Uint8Array((base64.length / 4) * 3 - padding);
    for (let i = 0, j = 0; i < base64.length; i += 4) {
      const n = (SEXTET[base64.charCodeAt(i)] << 18) | (SEXTET[base64.charCodeAt(i + 1)] << 12)
        | (SEXTET[base64.charCodeAt(i + 2)] << 6) | SEXTET[base64.charCodeAt(i + 3)];
      bytes[j++] = n >> 16;
      if (j < bytes.length) bytes[j++] = (n >> 8) & 0xff;
      if (j < bytes.length) bytes[j++] = n & 0xff;
    }
    return bytes;
  }

  // IEEE 754 half precision (1 sign, 5 exponent and 10 fraction bits) as a Number.
  function fromHalf(bits) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
    if (exponent === 0) return sign * fraction * 2 ** -24; // zero and subnormals
    if (exponent === 31) return fraction ? NaN : sign * Infinity;
    return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }

  // A weight as a row-major Float64Array with its shape: little-endian float32, or float16
  // where the model file says so, on the wire.
  function readWeight({ shape, data }, dtype = "float32") {
    const bytes = bytesOf(data);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const size = dtype === "float16" ? 2 : 4;
    const values = new Float64Array(bytes.byteLength / size);
    for (let i = 0; i < values.length; i++) {
      values[i] = size === 2 ? fromHalf(view.getUint16(2 * i, true)) : view.getFloat32(4 * i, true);
    }
    return { shape, values };
  }

  // x: (rows, in) as an array of Float64Array rows; weight: (out, in), as torch stores it.
  // Four sums at a time: the output layer of a large vocabulary is most of a step's work.
  function linear(x, weight, bias) {
    const [outDim, inDim] = weight.shape;
    const w = weight.values;
    const b = bias ? bias.values : null;
    const end = inDim - (inDim % 4);
    return x.map((row) => {
      const out = new Float64Array(outDim);
      for (let o = 0, offset = 0; o < outDim; o++, offset += inDim) {
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let i = 0; i < end; i += 4) {
          s0 += row[i] * w[offset + i];
          s1 += row[i + 1] * w[offset + i + 1];
          s2 += row[i + 2] * w[offset + i + 2];
          s3 += row[i + 3] * w[offset + i + 3];
        }
        for (let i = end; i < inDim; i++) s0 += row[i] * w[offset + i];
        out[o] = (b ? b[o] : 0) + (s0 + s1 + (s2 + s3));
      }
      return out;
    });
  }

  function add(a, b) {
    return a.map((row, r) => row.map((value, i) => value + b[r][i]));
  }

  function layerNorm(x, gamma, beta, eps = 1e-5) {
    return x.map((row) => {
      const mean = row.reduce((s, v) => s + v, 0) / row.length;
      const variance = row.reduce((s, v) => s + (v - mean) ** 2, 0) / row.length;
      const inv = 1 / Math.sqrt(variance + eps);
      return row.map((v, i) => (v - mean) * inv * gamma.values[i] + beta.values[i]);
    });
  }

  // The largest of many values (Math.max(...values) would pass each one as an argument).
  function maxOf(values) {
    let top = -Infinity;
    for (const v of values) if (v > top) top = v;
    return top;
  }

  function softmax(scores) {
    const top = maxOf(scores);
    const exps = scores.map((s) => Math.exp(s - top));
    const total = exps.reduce((s, v) => s + v, 0);
    return exps.map((v) => v / total);
  }

  // PositionalEncoding's sinusoids at position p.
  function position(p, embedDim) {
    const row = new Float64Array(embedDim);
    for (let i = 0; i < embedDim; i += 2) {
      const frequency = Math.exp(i * (-Math.log(10000.0) / embedDim));
      row[i] = Math.sin(p * frequency);
      row[i + 1] = Math.cos(p * frequency);
    }
    return row;
  }

  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  class Translator {
    constructor(payload) {
      this.config = payload.config;
      this.srcItos = payload.src_itos;
      this.tgtItos = payload.tgt_itos;
      this.vocab = this.vocabularies(payload); // words, or subwords
      this.weights = {};
      for (const [name, weight] of Object.entries(payload.weights)) {
        this.weights[name] = readWeight(weight, payload.dtype);
      }
      for (const [name, target] of Object.entries(payload.aliases)) {
        this.weights[name] = this.weights[target];
      }
      this.embedDim = this.config.embed_dim;
      this.numHeads = this.config.num_heads;
      this.headDim = this.embedDim / this.numHeads;
      this.embedScale = this.config.scale_embeddings ? Math.sqrt(this.embedDim) : 1;
      this.maxSeqLen = this.config.max_seq_len;
    }

    w(name) {
      const weight = this.weights[name];
      if (!weight) throw new Error(`the model file has no weight ${name}`);
      return weight;
    }

    // The embeddings of ids at positions start, start + 1, ...
    embed(table, ids, start = 0) {
      const { values } = this.w(table);
      return ids.map((id, p) => {
        const row = position(start + p, this.embedDim);
        for (let i = 0; i < this.embedDim; i++) {
          row[i] += values[id * this.embedDim + i] * this.embedScale;
        }
        return row;
      });
    }

    // One of an attention module's projections (q_proj, k_proj, v_proj, out_proj) of rows x.
    project(prefix, part, x) {
      return linear(x, this.w(`${prefix}.${part}.weight`), this.w(`${prefix}.${part}.bias`));
    }

    // MultiHeadAttention.forward: (q_len, embed_dim) queries over (kv_len, embed_dim) keys and
    // values; `causal` hides every key after the query's own position. Returns the output
    // and the weights, (heads, q_len, kv_len), as keep_attention records them.
    attend(prefix, query, keyValue, causal) {
      return this.combine(prefix, this.project(prefix, "q_proj", query),
        this.project(prefix, "k_proj", keyValue), this.project(prefix, "v_proj", keyValue), causal);
    }

    // Its second half, on projected queries q, keys k and values v: each head's weights over
    // the keys, the values they weigh, merged and projected out.
    combine(prefix, q, k, v, causal) {
      const scale = Math.sqrt(this.headDim);
      const merged = q.map(() => new Float64Array(this.embedDim));
      const weights = [];
      for (let h = 0; h < this.numHeads; h++) {
        const from = h * this.headDim;
        const headWeights = [];
        for (let i = 0; i < q.length; i++) {
          const visible = causal ? i + 1 : k.length;
          const scores = [];
          for (let j = 0; j < visible; j++) {
            let dot = 0;
            for (let d = from; d < from + this.headDim; d++) dot += q[i][d] * k[j][d];
            scores.push(dot / scale);
          }
          const row = softmax(scores);
          for (let j = 0; j < visible; j++) {
            for (let d = from; d < from + this.headDim; d++) merged[i][d] += row[j] * v[j][d];
          }
          while (row.length < k.length) row.push(0); // a hidden key gets exactly 0
          headWeights.push(row);
        }
        weights.push(headWeights);
      }
      return { out: this.project(prefix, "out_proj", merged), weights };
    }

    feedForward(prefix, x) {
      const hidden = linear(x, this.w(`${prefix}.linear1.weight`), this.w(`${prefix}.linear1.bias`))
        .map((row) => row.map((v) => Math.max(v, 0)));
      return linear(hidden, this.w(`${prefix}.linear2.weight`), this.w(`${prefix}.linear2.bias`));
    }

    norm(prefix, x) {
      return layerNorm(x, this.w(`${prefix}.weight`), this.w(`${prefix}.bias`));
    }

    checkLength(length) {
      if (length > this.maxSeqLen) {
        throw new RangeError(`a sequence of ${length} tokens is longer than the model's ` +
          `${this.maxSeqLen} positions: shorten the sentence`);
      }
    }

    // Transformer.encode for one sentence of source ids (ending in <eos>), with every
    // layer's self-attention weights.
    encode(srcIds) {
      this.checkLength(srcIds.length);
      let x = this.embed("src_embed.weight", srcIds);
      const attention = [];
      for (let l = 0; l < this.config.num_encoder_layers; l++) {
        const layer = `encoder_layers.${l}`;
        const self = this.attend(`${layer}.self_attn`, x, x, false);
        x = this.norm(`${layer}.norm1`, add(x, self.out));
        x = this.norm(`${layer}.norm2`, add(x, this.feedForward(`${layer}.feed_forward`, x)));
        attention.push(self.weights);
      }
      return { memory: x, attention };
    }

    // Transformer.decode on the whole prefix: the logits of its last position, and every
    // layer's self- and cross-attention weights.
    decode(tgtIds, memory) {
      this.checkLength(tgtIds.length);
      let y = this.embed("tgt_embed.weight", tgtIds);
      const selfAttention = [];
      const crossAttention = [];
      for (let l = 0; l < this.config.num_decoder_layers; l++) {
        const layer = `decoder_layers.${l}`;
        const self = this.attend(`${layer}.self_attn`, y, y, true);
        y = this.norm(`${layer}.norm1`, add(y, self.out));
        const cross = this.attend(`${layer}.cross_attn`, y, memory, false);
        y = this.norm(`${layer}.norm2`, add(y, cross.out));
        y = this.norm(`${layer}.norm3`, add(y, this.feedForward(`${layer}.feed_forward`, y)));
        selfAttention.push(self.weights);
        crossAttention.push(cross.weights);
      }
      const [logits] = linear([y[y.length - 1]], this.w("out_proj.weight"), this.w("out_proj.bias"));
      return { logits, selfAttention, crossAttention };
    }

    // toolkit.search.greedy for one sentence: at most maxLen tokens, stopping at <eos>.
    greedy(srcIds, maxLen) {
      return this.greedySearch(srcIds, maxLen).tokens;
    }

    // The same, and whether it ended with <eos> (rather than at its limit).
    greedySearch(srcIds, maxLen) {
      let cache = this.begin(srcIds);
      const tokens = [BOS_ID];
      for (let step = 0; step < maxLen; step++) {
        const next = this.step(tokens[tokens.length - 1], cache);
        cache = next.cache;
        const best = argmax(next.logits);
        if (best === EOS_ID) return { tokens: tokens.slice(1), ended: true };
        tokens.push(best);
      }
      return { tokens: tokens.slice(1), ended: false };
    }

    // How many tokens a translation of a source this long may have (toolkit.search.decoding's
    // room and limit): 10 more than the source, never past the model's positions.
    limitFor(srcLength) {
      if (srcLength > this.maxSeqLen) {
        throw new RangeError(`${srcLength} source tokens, more than the model's ` +
          `${this.maxSeqLen} positions (max_seq_len): not translated (split it into shorter sentences)`);
      }
      return Math.min(srcLength + EXTRA_LEN, this.maxSeqLen);
    }

    // What a search starts from: the source encoded, and the decoder's cache for it.
    begin(srcIds) {
      return this.startCache(this.encode(srcIds).memory);
    }

    // The decoder's cache for one sentence, as stage 07's decode keeps it: each layer's
    // self-attention keys and values so far (none yet), and its cross-attention keys and
    // values, projected from the memory once instead of at every step.
    startCache(memory) {
      const layers = [];
      for (let l = 0; l < this.config.num_decoder_layers; l++) {
        const cross = `decoder_layers.${l}.cross_attn`;
        layers.push({ keys: [], values: [], crossKeys: this.project(cross, "k_proj", memory),
          crossValues: this.project(cross, "v_proj", memory) });
      }
      return { length: 0, layers };
    }

    // Transformer.decode for one more token, with a cache: the logits of its position, and a
    // new cache, with its keys and values added (the old one is left as it was, so the rows
    // of a beam can go on from the same parent). A step costs the length so far, not its
    // square, and gives the numbers decode gives on the whole prefix.
    step(token, cache) {
      this.checkLength(cache.length + 1);
      let y = this.embed("tgt_embed.weight", [token], cache.length); // (1, embed_dim)
      const layers = [];
      cache.layers.forEach((state, l) => {
        const layer = `decoder_layers.${l}`;
        const [self, cross] = [`${layer}.self_attn`, `${layer}.cross_attn`];
        const keys = [...state.keys, ...this.project(self, "k_proj", y)];
        const values = [...state.values, ...this.project(self, "v_proj", y)];
        const attended = this.combine(self, this.project(self, "q_proj", y), keys, values, false);
        y = this.norm(`${layer}.norm1`, add(y, attended.out));
        const read = this.combine(cross, this.project(cross, "q_proj", y), state.crossKeys,
          state.crossValues, false);
        y = this.norm(`${layer}.norm2`, add(y, read.out));
        y = this.norm(`${layer}.norm3`, add(y, this.feedForward(`${layer}.feed_forward`, y)));
        layers.push({ ...state, keys, values });
      });
      const [logits] = linear(y, this.w("out_proj.weight"), this.w("out_proj.bias"));
      return { logits, cache: { length: cache.length + 1, layers } };
    }
  }

  // Every attention weight behind a translation: the encoder's over the source, and the
  // decoder's at each position the search read. It read <bos> and every output token but the
  // last, and the last too where it went on to write <eos>. A translation cut by its limit
  // wrote its last token there, so no row follows that token: the search never computed one,
  // and at max_seq_len there is no position for it.
  Translator.prototype.attentionOf = function (result) {
    const { memory, attention } = this.encode(result.srcIds);
    const read = result.ended ? result.ids : result.ids.slice(0, -1);
    const { selfAttention, crossAttention } = this.decode([BOS_ID, ...read], memory);
    return { encoder: attention, self: selfAttention, cross: crossAttention };
  };

  // Wu et al. (2016): ((5 + |Y|) / 6)^α, as toolkit.search.beam_search.length_penalty.
  function lengthPenalty(length, alpha) {
    return ((5 + length) / 6) ** alpha;
  }

  // The n best extensions { r: row, token, logProb }, best first. Exact ties are rare; here
  // the lower row and token win, an order that torch.topk does not promise. One pass keeps
  // the n best so far, where sorting them all would cost more than the model itself: a step
  // of beam 4 over 8,000 subwords has 32,000 of them.
  function bestExtensions(scores, n) {
    const top = [];
    scores.forEach((row, r) => {
      for (let token = 0; token < row.length; token++) {
        const logProb = row[token];
        if (top.length === n && !(logProb > top[n - 1].logProb)) continue;
        let at = top.length;
        while (at > 0 && logProb > top[at - 1].logProb) at--;
        top.splice(at, 0, { r, token, logProb });
        if (top.length > n) top.pop();
      }
    });
    return top;
  }

  function logSoftmax(logits) {
    const top = maxOf(logits);
    const logTotal = Math.log(logits.reduce((s, v) => s + Math.exp(v - top), 0)) + top;
    return logits.map((v) => v - logTotal);
  }

  // toolkit.search.beam_search for one sentence, step for step: of the 2 * beamSize best
  // extensions, the beamSize best that do not end go on; one that ends (with <eos>, or at the
  // limit) is finished if it ranks among the beamSize best. `watch` sees each step's kept
  // extensions, best first, as SearchStep records them, to draw the search.
  Translator.prototype.beam = function (srcIds, limit, beamSize = 4, alpha = 0.6, watch = null) {
    let rows = [{ tokens: [BOS_ID], logProb: 0, cache: this.begin(srcIds) }];
    const finished = [];
    for (let step = 0; step < limit; step++) {
      const scores = []; // each row's log-probability once extended by each token
      const after = rows.map((row) => { // each row's cache once its last token is read
        if (row.logProb === -Infinity) {
          scores.push(new Float64Array(this.tgtItos.length).fill(-Infinity));
          return row.cache;
        }
        const { logits, cache } = this.step(row.tokens[row.tokens.length - 1], row.cache);
        scores.push(logSoftmax(logits).map((lp) => row.logProb + lp));
        return cache;
      });
      const best = bestExtensions(scores, 2 * beamSize);
      while (best.length < beamSize) best.push({ r: 0, token: PAD_ID, logProb: -Infinity });
      const length = step + 1;
      let goingOn = 0;
      const kept = best.map((c, rank) => {
        const real = c.logProb > -Infinity;
        const ends = real && (c.token === EOS_ID || length >= limit);
        const goesOn = real && !ends && ++goingOn <= beamSize;
        return { ...c, finishing: ends && rank < beamSize, goesOn };
      });
      if (watch) {
        watch(kept.map((c) => ({ parent: c.r, token: c.token, logProb: c.logProb,
          score: c.logProb / lengthPenalty(length, alpha), finished: c.finishing,
          goesOn: c.goesOn })));
      }
      for (const c of kept.filter((k) => k.finishing)) {
        const ids = rows[c.r].tokens.slice(1);
        if (c.token !== EOS_ID) ids.push(c.token); // cut by the limit: its last token is a word
        finished.push({ tokens: ids, score: c.logProb / lengthPenalty(length, alpha),
          logProb: c.logProb, ended: c.token === EOS_ID });
      }
      const next = kept.filter((c) => c.goesOn).concat(kept.filter((c) => !c.goesOn))
        .slice(0, beamSize)
        .map((c) => ({ tokens: [...rows[c.r].tokens, c.token],
          logProb: c.goesOn ? c.logProb : -Infinity, cache: after[c.r] }));
      const bestLive = Math.max(...next.map((row) => row.logProb));
      const bestFinished = Math.max(-Infinity, ...finished.map((h) => h.score));
      if (finished.length >= beamSize || bestLive === -Infinity
          || bestFinished >= bestLive / lengthPenalty(limit, alpha)) break;
      rows = next;
    }
    finished.sort((a, b) => b.score - a.score); // stable, like Python's sorted
    return finished.length ? finished[0] : { tokens: [], score: 0, logProb: 0, ended: false };
  };

  // toolkit.text.tokens.tokenize: NFC, then a word is a run of letters, digits and their
  // marks (\w+ of Python's regex module), and any other visible character is a token of its
  // own, with the marks that belong to it (\X, a grapheme cluster).
  const WORD = /[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]/u;
  // What Python's str.split() splits at (str.isspace), where words and clusters end.
  const SPACE = /[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
  const graphemes = typeof Intl !== "undefined" && Intl.Segmenter
    ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;

  const JOINED = "\uFFED", SPACED = "\u2581"; // no space on this side; a space on this side
  const MARKS = [JOINED, SPACED];
  const NO_SPACE_BEFORE = new Set([".", ",", "!", "?", ";", ":"]);
  const isWord = (token) => WORD.test(String.fromCodePoint(token.codePointAt(0)));
  const mark = (space) => (space ? SPACED : JOINED);
  const startsWithMark = (token) => MARKS.includes(token[0]);
  const endsWithMark = (token) => MARKS.includes(token[token.length - 1]);

  // toolkit.text.tokens._usual_spaces: a space before every token but the first, except
  // before .,!?;: and around a hyphen between two words.
  function usualSpaces(tokens) {
    const spaces = tokens.map((token, i) => i > 0 && !NO_SPACE_BEFORE.has(token));
    for (let i = 1; i < tokens.length - 1; i++) {
      const before = Array.from(tokens[i - 1]).at(-1);
      if (tokens[i] === "-" && WORD.test(before) && isWord(tokens[i + 1])) {
        spaces[i] = spaces[i + 1] = false;
      }
    }
    return spaces;
  }

  // toolkit.text.tokens.tokenize: NFC, then words and single visible characters, the latter
  // marked where the text's spaces differ from the usual ones.
  function tokenize(text) {
    const s = text.normalize("NFC");
    const tokens = [], spaces = [];
    let i = 0, spaced = false;
    while (i < s.length) {
      const ch = String.fromCodePoint(s.codePointAt(i));
      if (WORD.test(ch)) {
        let j = i;
        while (j < s.length && WORD.test(String.fromCodePoint(s.codePointAt(j)))) {
          j += String.fromCodePoint(s.codePointAt(j)).length;
        }
        tokens.push(s.slice(i, j));
        i = j;
      } else if (SPACE.test(ch)) {
        i += ch.length;
        spaced = true;
        continue;
      } else {
        // A cluster ends where the whitespace does, as Python splits at whitespace first.
        let end = i;
        while (end < s.length && !SPACE.test(String.fromCodePoint(s.codePointAt(end)))) {
          end += String.fromCodePoint(s.codePointAt(end)).length;
        }
        const cluster = graphemes ? graphemes.segment(s.slice(i, end))[Symbol.iterator]().next()
          .value.segment : ch;
        tokens.push(cluster);
        i += cluster.length;
      }
      spaces.push(tokens.length > 1 && spaced);
      spaced = false;
    }
    const usual = usualSpaces(tokens);
    const left = tokens.map(() => ""), right = tokens.map(() => "");
    for (let k = 1; k < tokens.length; k++) {
      if (spaces[k] !== usual[k]) {
        if (isWord(tokens[k])) right[k - 1] = mark(spaces[k]);
        else left[k] = mark(spaces[k]);
      }
    }
    tokens.forEach((token, k) => {
      if (startsWithMark(token) || endsWithMark(token)) {
        left[k] = mark(spaces[k]);
        right[k] = mark(k + 1 < tokens.length && spaces[k + 1]);
      }
    });
    return tokens.map((token, k) => left[k] + token + right[k]);
  }

  // toolkit.text.tokens._unmark: a token's left mark, its text and its right mark.
  function unmark(token) {
    if (isWord(token)) return ["", token, ""];
    const left = startsWithMark(token) ? token[0] : "";
    const right = endsWithMark(token) ? token[token.length - 1] : "";
    if (token.length <= left.length + right.length) return ["", token, ""];
    return [left, token.slice(left.length, token.length - right.length), right];
  }

  // toolkit.text.tokens.detokenize: the usual spaces, unless a mark says otherwise.
  function detokenize(tokens) {
    const parts = tokens.map(unmark);
    const usual = usualSpaces(parts.map((part) => part[1]));
    return parts.map(([left, text], i) => {
      if (i === 0) return text;
      const sign = isWord(text) ? parts[i - 1][2] : left;
      return ((sign ? sign === SPACED : usual[i]) ? " " : "") + text;
    }).join("");
  }

  // What Vocab.decode reads of a model's output: the ids up to <eos>, but <pad> and <bos>,
  // which are never words.
  function wordIds(ids) {
    const end = ids.indexOf(EOS_ID);
    return (end < 0 ? ids : ids.slice(0, end)).filter((id) => id !== PAD_ID && id !== BOS_ID);
  }

  // toolkit.text.vocab.Vocab: one id per word-level token.
  class Words {
    constructor(srcItos, tgtItos) {
      this.kind = "words";
      this.srcStoi = new Map(srcItos.map((token, id) => [token, id]));
      this.tgtItos = tgtItos;
    }

    // The source's tokens, one per id, and the words the vocabulary lacks. As Vocab.encode:
    // a token spaced in a way the vocabulary never saw reads as its plain self.
    encode(text) {
      const pieces = tokenize(text);
      const known = (w) => [w, unmark(w)[1]].find((form) => this.srcStoi.has(form));
      const ids = pieces.map((w) => (known(w) !== undefined ? this.srcStoi.get(known(w)) : UNK_ID));
      const unknown = pieces.filter((w) => known(w) === undefined).map((w) => unmark(w)[1]);
      return { pieces, ids, unknown };
    }

    // Each id's token (a <pad> that an undertrained model writes too), and the sentence:
    // Vocab.decode, then detokenize.
    decode(ids) {
      const pieces = ids.map((id) => this.tgtItos[id]);
      return { pieces, text: detokenize(wordIds(ids).map((id) => this.tgtItos[id])) };
    }
  }

  // toolkit.text.subwords.SubwordVocab: Hugging Face tokenizers' byte-pair encoding as the
  // course sets it up. Text is cut at whitespace only (after NFC); in each word a written "▁"
  // is escaped; the pre-tokenizer marks the word's start with "▁" (Metaspace) and sets each
  // punctuation mark apart (Punctuation, isolated); BPE then spells each part in pieces.
  const WORD_START = "\u2581", ESCAPE = "\ue000";
  // What tokenizers counts as punctuation: Unicode's P categories, and all of ASCII's.
  const PUNCTUATION = /[\p{P}!-\/:-@\[-`{-~]/u;
  const escapeWord = (word) => Array.from(word, (c) => (c === ESCAPE ? ESCAPE + "0"
    : c === WORD_START ? ESCAPE + "1" : c)).join("");
  const unescapeWord = (word) => word.replace(/\ue000([01])/gu,
    (_, digit) => (digit === "0" ? ESCAPE : WORD_START));
  const byCodePoint = (a, b) => a.codePointAt(0) - b.codePointAt(0);

  // toolkit.text.tokens.split_words: NFC, then whatever Python's str.split() splits at.
  function splitWords(text) {
    return text.normalize("NFC").split(new RegExp(`${SPACE.source}+`, "u")).filter(Boolean);
  }

  class Subwords {
    constructor(srcItos, merges, tgtItos) {
      this.kind = "characters";
      this.srcStoi = new Map(srcItos.map((piece, id) => [piece, id]));
      this.ranks = new Map(); // first piece -> second piece -> the merge's rank
      merges.forEach(([a, b], rank) => {
        if (!this.ranks.has(a)) this.ranks.set(a, new Map());
        this.ranks.get(a).set(b, rank);
      });
      this.tgtItos = tgtItos;
    }

    // BPE on one part of a word (tokenizers' Word::merge_all): its characters, an unknown
    // one as <unk> (null here), then again and again the merge of two neighbours that was
    // learnt first, the leftmost where it occurs twice, until no learnt merge is left.
    spell(part) {
      const symbols = Array.from(part, (c) => (this.srcStoi.has(c) ? c : null));
      for (;;) {
        let at = -1, best = Infinity;
        for (let i = 0; i + 1 < symbols.length; i++) {
          const rank = symbols[i] === null || symbols[i + 1] === null ? undefined
            : this.ranks.get(symbols[i])?.get(symbols[i + 1]);
          if (rank !== undefined && rank < best) [at, best] = [i, rank];
        }
        if (at < 0) return symbols;
        symbols.splice(at, 2, symbols[at] + symbols[at + 1]);
      }
    }

    // One word's parts: "▁" and the word, escaped and in NFC, cut around each punctuation mark.
    parts(word) {
      const parts = [];
      let run = "";
      for (const c of WORD_START + escapeWord(word).normalize("NFC")) {
        if (!PUNCTUATION.test(c)) { run += c; continue; }
        if (run) parts.push(run);
        parts.push(c);
        run = "";
      }
      if (run) parts.push(run);
      return parts;
    }

    // The source's pieces, one per id, and the characters no piece holds (SubwordVocab.unknown).
    encode(text) {
      const words = splitWords(text);
      const symbols = words.flatMap((word) => this.parts(word).flatMap((part) => this.spell(part)));
      const ids = symbols.map((s) => (s === null ? UNK_ID : this.srcStoi.get(s)));
      const held = (c) => this.srcStoi.has(c) || this.srcStoi.has(WORD_START + c);
      const unknown = [...new Set(words.flatMap((word) => Array.from(word)))]
        .filter((c) => !Array.from(escapeWord(c)).every(held)).sort(byCodePoint);
      return { pieces: symbols.map((s) => s ?? "<unk>"), ids, unknown };
    }

    // Each id's piece, and the text: SubwordVocab.decode, then join. tokenizers' Metaspace
    // decoder turns each "▁" into a space (the first piece's into nothing), and the text is
    // read back word by word.
    decode(ids) {
      const joined = wordIds(ids).map((id) => this.tgtItos[id])
        .map((piece, i) => piece.replaceAll(WORD_START, i === 0 ? "" : " ")).join("");
      return { pieces: ids.map((id) => this.tgtItos[id]),
        text: splitWords(joined).map(unescapeWord).join(" ") };
    }
  }

  Translator.prototype.vocabularies = function (payload) {
    if (payload.tokenizer?.kind === "bpe") {
      return new Subwords(payload.src_itos, payload.tokenizer.merges, payload.tgt_itos);
    }
    return new Words(payload.src_itos, payload.tgt_itos);
  };

  // What `python -m toolkit.translate` does with one line: the same limits (the source's
  // length + 10 tokens, never past the model's positions) and its messages for an unknown
  // word (or character, for subwords) and an over-long line. An empty line, which the command
  // leaves empty, gets a message of its own here. `words` and `output` hold what each id of
  // `srcIds` and `ids` stands for: words, or subword pieces.
  Translator.prototype.translate = function (text, { beamSize = 1, alpha = 0.6, watch = null,
    sampling = null } = {}) {
    const source = this.vocab.encode(text);
    if (source.ids.length === 0) {
      throw new Error("cannot translate an empty sentence: type at least one word");
    }
    const srcIds = [...source.ids, EOS_ID];
    const limit = this.limitFor(srcIds.length);
    const found = sampling ? this.sample(srcIds, limit, sampling)
      : beamSize > 1 ? this.beam(srcIds, limit, beamSize, alpha, watch)
        : this.greedySearch(srcIds, limit);
    const ids = found.tokens;
    const target = this.vocab.decode(ids);
    const { unknown } = source;
    return { words: source.pieces, srcIds, unknown, ids, output: target.pieces,
      ended: found.ended, text: target.text, note: unknown.length
        ? `${this.vocab.kind} not in the vocabulary, read as <unk>: ${unknown.join(" ")}` : "" };
  };

  // What the page asks a worker for: a translation, every attention weight behind it and,
  // with beam search, its steps; or the message of the error it met.
  Translator.prototype.answer = function ({ id, text, beamSize = 1, alpha = 0.6, sampling = null }) {
    const started = performance.now();
    const steps = [];
    try {
      const result = this.translate(text, { beamSize, alpha, sampling,
        watch: beamSize > 1 ? (step) => steps.push(step) : null });
      return { id, result, attention: this.attentionOf(result), steps, ms: performance.now() - started };
    } catch (err) {
      return { id, error: err.message };
    }
  };

  // Stage 08: the decoder alone reads the source and its translation as one stream, so a
  // search starts by running the source through it, and its cache is every layer's keys and
  // values for the stream so far (toolkit.search.stream_decoding).
  class DecoderOnly extends Translator {
    constructor(payload) {
      super(payload);
      this.numLayers = this.config.num_layers;
    }

    // The prompt of a stream this long leaves this many tokens for its continuation: the
    // stream shares the model's positions (toolkit.search.decoding.room).
    limitFor(srcLength) {
      const room = this.maxSeqLen - srcLength;
      if (room <= 0) {
        throw new RangeError(`${srcLength} source tokens leave no room for a translation in ` +
          `the model's ${this.maxSeqLen} positions (max_seq_len), which the source and its ` +
          `translation share: shorten it`);
      }
      return Math.min(srcLength + EXTRA_LEN, room);
    }

    // Transformer.language_model on a whole stream, each token reading only its past: every
    // layer's keys and values (the cache a search goes on from) and attention weights.
    run(ids) {
      this.checkLength(ids.length);
      let y = this.embed("embed.weight", ids);
      const layers = [];
      const attention = [];
      for (let l = 0; l < this.numLayers; l++) {
        const layer = `decoder_layers.${l}`;
        const self = `${layer}.self_attn`;
        const keys = this.project(self, "k_proj", y);
        const values = this.project(self, "v_proj", y);
        const attended = this.combine(self, this.project(self, "q_proj", y), keys, values, true);
        y = this.norm(`${layer}.norm1`, add(y, attended.out));
        y = this.norm(`${layer}.norm2`, add(y, this.feedForward(`${layer}.feed_forward`, y)));
        layers.push({ keys, values });
        attention.push(attended.weights);
      }
      return { cache: { length: ids.length, layers }, attention };
    }

    begin(srcIds) {
      return this.run(srcIds).cache;
    }

    // The stream one token longer: its logits, and the cache with its keys and values added
    // (the old cache is left as it was, for the rows of a beam).
    step(token, cache) {
      this.checkLength(cache.length + 1);
      let y = this.embed("embed.weight", [token], cache.length); // (1, embed_dim)
      const layers = cache.layers.map((state, l) => {
        const layer = `decoder_layers.${l}`;
        const self = `${layer}.self_attn`;
        const keys = [...state.keys, ...this.project(self, "k_proj", y)];
        const values = [...state.values, ...this.project(self, "v_proj", y)];
        const attended = this.combine(self, this.project(self, "q_proj", y), keys, values, false);
        y = this.norm(`${layer}.norm1`, add(y, attended.out));
        y = this.norm(`${layer}.norm2`, add(y, this.feedForward(`${layer}.feed_forward`, y)));
        return { keys, values };
      });
      const [logits] = linear(y, this.w("out_proj.weight"), this.w("out_proj.bias"));
      return { logits, cache: { length: cache.length + 1, layers } };
    }

    // The one stream's attention: every position over the source, <bos> and the output
    // tokens the search read (the last one too where it went on to write <eos>).
    attentionOf(result) {
      const read = result.ended ? result.ids : result.ids.slice(0, -1);
      return { stream: this.run([...result.srcIds, BOS_ID, ...read]).attention };
    }
  }

  // Uniform draws in (0, 1) from a seed: mulberry32, 32 bits a step, so a test can draw the
  // same numbers in Python. Each is rounded to float32, as torch.rand gives them.
  function uniforms(seed) {
    let state = seed >>> 0;
    return () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = Math.imul(state ^ (state >>> 15), state | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return Math.fround((((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296);
    };
  }

  const TINY = Math.fround(1e-20), NEAR_ONE = Math.fround(1 - 1e-7); // gumbel_noise's clamp

  // toolkit.search.sampling.truncate: -Infinity for every token outside the top k and outside
  // the nucleus, the fewest likeliest tokens whose probabilities reach p.
  function truncate(logits, topK, topP) {
    let kept = Float64Array.from(logits);
    if (topK !== null) {
      const kth = Float64Array.from(kept).sort().reverse()[Math.min(topK, kept.length) - 1];
      kept = kept.map((v) => (v < kth ? -Infinity : v));
    }
    if (topP !== null && topP < 1) {
      const order = Array.from(kept.keys()).sort((a, b) => kept[b] - kept[a] || a - b);
      const probabilities = softmax(order.map((i) => kept[i]));
      let before = 0; // the mass of the likelier ones
      const dropped = new Set();
      order.forEach((token, rank) => {
        if (before >= topP) dropped.add(token);
        before += probabilities[rank];
      });
      kept = kept.map((v, token) => (dropped.has(token) ? -Infinity : v));
    }
    return kept;
  }

  // toolkit.search.sampling.sample for one prompt: each step draws the next token from the
  // model's distribution, reshaped by temperature, top-k and top-p, with the Gumbel-max
  // trick (argmax of the logits plus -log(-log(U)), one U per token); temperature 0 is greedy.
  Translator.prototype.sample = function (srcIds, limit, { temperature = 1, topK = null,
    topP = null, seed = 0 } = {}) {
    if (!(temperature >= 0)) throw new RangeError("the temperature must be 0 (greedy) or more");
    if (topK !== null && !(topK >= 1)) throw new RangeError("top-k must be 1 or more");
    if (topP !== null && !(topP > 0 && topP <= 1)) throw new RangeError("top-p must be in (0, 1]");
    const draw = uniforms(seed);
    let cache = this.begin(srcIds);
    const tokens = [BOS_ID];
    for (let step = 0; step < limit; step++) {
      const next = this.step(tokens[tokens.length - 1], cache);
      cache = next.cache;
      const chosen = temperature === 0 ? argmax(next.logits) : argmax(truncate(
        next.logits.map((v) => v / temperature), topK, topP)
        .map((v) => v - Math.log(-Math.log(Math.min(Math.max(draw(), TINY), NEAR_ONE)))));
      if (chosen === EOS_ID) return { tokens: tokens.slice(1), ended: true };
      tokens.push(chosen);
    }
    return { tokens: tokens.slice(1), ended: false };
  };

  // The translator a model file asks for: stage 08's one stream, or stage 07's two stacks.
  Translator.load = (payload) => (payload.stage === "stages.stage08_decoder_only"
    ? new DecoderOnly(payload) : new Translator(payload));

  Translator.tokenize = tokenize;
  Translator.detokenize = detokenize;
  Translator.Subwords = Subwords;
  root.Translator = Translator;
  root.TranslatorIds = { PAD_ID, UNK_ID, BOS_ID, EOS_ID };
  if (typeof module !== "undefined" && module.exports) module.exports = { Translator };
}

defineTranslator(globalThis);
