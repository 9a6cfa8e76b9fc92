"""The Try-it page's speed in headless Chromium, side by side in one run (make bench, part
"page"): what the page's budgets became once they left the tests.

On a page `python -m toolkit.web` writes for a model of the size a learner trains on real
text (stage 07, 2.4M parameters, 8,000 shared BPE pieces, untrained and with <eos> held back,
so every search runs to its limit: the slowest case), interleaved round by round:
- the cached search against decoding the whole prefix: greedy on one sentence, each token
  from the decoder's cache (`Translator.step`) against rerunning the decoder over every token
  so far (`Translator.decode`), both on the page's own thread;
- the worker's overhead: the same beam-4 request through the page's worker (`tryIt.ask`,
  a message each way) against `Translator.answer` on the page's own thread;
- a 60-word sentence with beam 4 through the worker, reported beside its budget of 1 s, and
  the first translation after loading beside its budget of 2 s: reported, never asserted
  (another machine takes other times; tests/site/test_try_it.py asserts the page's weight).
"""

import importlib.util
import random
import shutil
import statistics
import tempfile
from pathlib import Path

SIXTY_WORDS = 60
BUDGETS_MS = {"first translation": 2_000, "60 words, beam 4, in the worker": 1_000}
QUICK = {"rounds": 2}
FULL = {"rounds": 7}
# Greedy, on the page's thread: with the cache, then from the whole prefix at every step.
CACHED_AGAINST_PREFIX = """
const [text] = arguments;
const t = window.tryIt.translator();
const srcIds = [...t.vocab.encode(text).ids, window.TranslatorIds.EOS_ID];
const limit = t.limitFor(srcIds.length);
let started = performance.now();
const cached = t.greedySearch(srcIds, limit).tokens;
const cachedMs = performance.now() - started;
started = performance.now();
const memory = t.encode(srcIds).memory;
const tokens = [window.TranslatorIds.BOS_ID];
for (let i = 0; i < limit; i++) {
  const { logits } = t.decode(tokens, memory);
  let best = 0;
  for (let j = 1; j < logits.length; j++) if (logits[j] > logits[best]) best = j;
  tokens.push(best);
}
const prefixMs = performance.now() - started;
return { cachedMs, prefixMs, same: JSON.stringify(cached) === JSON.stringify(tokens.slice(1)),
         tokens: cached.length };
"""
WORKER_AGAINST_PAGE = """
const [text] = arguments;
let started = performance.now();
return window.tryIt.ask({ text, beamSize: 4, alpha: 0.6 }).then((reply) => {
  const workerMs = performance.now() - started;
  started = performance.now();
  const here = window.tryIt.translator().answer({ id: 0, text, beamSize: 4, alpha: 0.6 });
  const pageMs = performance.now() - started;
  return { workerMs, inWorkerMs: reply.ms, pageMs,
           same: JSON.stringify(reply.result.ids) === JSON.stringify(here.result.ids) };
});
"""


def has_chromium() -> bool:
    return all(shutil.which(name) for name in ("chromium", "chromedriver"))


def chromium():
    """The site tests' own headless Chromium (tests/site/chromium.py): one way to start it."""
    path = Path(__file__).resolve().parents[1] / "tests" / "site" / "chromium.py"
    spec = importlib.util.spec_from_file_location("chromium", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_large_page(folder: Path) -> tuple[Path, str, int, int]:
    """The page, the 60-word sentence, the model's parameters and its pieces.

    An untrained stage 07 of 2.4M parameters (8,000 shared BPE pieces, embed_dim 128, 3 + 3
    layers, ff_dim 512, every embedding tied), <eos> held back so that each search runs to its
    limit; the pieces are learnt from the corpus and, to reach 8,000, from made-up words.
    """
    import torch

    from stages import stage07_multi_head as stage
    from toolkit.batching.data import load_data
    from toolkit.learning.checkpoints import save_checkpoint
    from toolkit.text.subwords import SubwordVocab
    from toolkit.text.tokens import split_words
    from toolkit.web.__main__ import main

    data = load_data()
    made_up = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [" ".join("".join(made_up.choices(letters, k=made_up.randint(3, 9)))
                      for _ in range(10)) for _ in range(4_000)]
    text = [*data.sources("train"), *data.reference_texts("train"), *words]
    vocab = SubwordVocab.train(map(split_words, text), 8_000)
    torch.manual_seed(0)
    model = stage.Transformer(len(vocab), len(vocab), embed_dim=128, num_heads=4,
                              num_encoder_layers=3, num_decoder_layers=3, ff_dim=512,
                              tie_embeddings="all").eval()
    with torch.no_grad():
        model.out_proj.bias[3] = -1e4  # <eos> never wins
    save_checkpoint(folder / "best.pt", model, vocab, vocab)
    assert main([str(folder / "best.pt"), "--output", str(folder / "web")]) == 0
    sentence, tests = [], iter(data.sources("test"))
    while len(sentence) < SIXTY_WORDS:
        sentence += next(tests).split()
    parameters = sum(p.numel() for p in model.parameters())
    return folder / "web" / "index.html", " ".join(sentence[:SIXTY_WORDS]), parameters, len(vocab)


def median_ratio(rounds: list[dict], slow: str, fast: str) -> float:
    return statistics.median(r[slow] / r[fast] for r in rounds)


def run(rounds: int) -> dict:
    """Every row, `rounds` times each, interleaved, in one Chromium on one page."""
    site = chromium()
    with tempfile.TemporaryDirectory(prefix="page-bench-") as folder:
        page, sentence, parameters, pieces = write_large_page(Path(folder))
        browser = site.start_chromium(Path(folder) / "profile", need_site=False)
        try:
            site.open_page(browser, page.as_uri(), 1280)
            first = site.wait_for(browser, "return window.tryIt && window.tryIt.firstTranslation;")
            short = " ".join(sentence.split()[:12])
            cached, worker, sixty = [], [], []
            for _ in range(rounds):
                cached.append(browser.execute_script(CACHED_AGAINST_PREFIX, short))
                worker.append(browser.execute_async_script(
                    "const done = arguments[arguments.length - 1];"
                    f"(() => {{ {WORKER_AGAINST_PAGE} }})(...arguments).then(done);", short))
                sixty.append(browser.execute_async_script(
                    "const done = arguments[arguments.length - 1];"
                    f"(() => {{ {WORKER_AGAINST_PAGE} }})(...arguments).then(done);",
                    sentence)["workerMs"])
        finally:
            browser.quit()
    assert all(r["same"] for r in cached + worker), "the paths wrote different tokens"
    return {
        "model": f"stage 07, {parameters:,} parameters, {pieces:,} BPE pieces, untrained, "
                 f"<eos> held back (every search runs to its limit)",
        "rounds": rounds,
        "cached against the whole prefix": {
            "tokens": cached[0]["tokens"],
            "cached ms": statistics.median(r["cachedMs"] for r in cached),
            "whole prefix ms": statistics.median(r["prefixMs"] for r in cached),
            "x faster with the cache": median_ratio(cached, "prefixMs", "cachedMs")},
        "worker against the page's thread, beam 4": {
            "worker ms": statistics.median(r["workerMs"] for r in worker),
            "page's thread ms": statistics.median(r["pageMs"] for r in worker),
            "x the page's thread": median_ratio(worker, "workerMs", "pageMs")},
        "against the budgets (reported, not asserted)": {
            "first translation ms": first, "first translation budget ms":
                BUDGETS_MS["first translation"],
            "60 words, beam 4, in the worker ms": statistics.median(sixty),
            "60 words budget ms": BUDGETS_MS["60 words, beam 4, in the worker"]},
    }


def summary(result: dict) -> str:
    cache = result["cached against the whole prefix"]
    worker = result["worker against the page's thread, beam 4"]
    budgets = result["against the budgets (reported, not asserted)"]
    return "\n".join([
        f"page: {result['model']}; median of {result['rounds']} rounds",
        f"  greedy, {cache['tokens']} tokens: cached {cache['cached ms']:.0f} ms, whole prefix "
        f"{cache['whole prefix ms']:.0f} ms: the cache {cache['x faster with the cache']:.1f}x "
        f"faster",
        f"  beam 4 through the worker {worker['worker ms']:.0f} ms against "
        f"{worker['page' + chr(39) + 's thread ms']:.0f} ms on the page's thread: "
        f"{worker['x the page' + chr(39) + 's thread']:.2f}x",
        f"  first translation {budgets['first translation ms']:.0f} ms (budget "
        f"{budgets['first translation budget ms']:,}); 60 words with beam 4 in the worker "
        f"{budgets['60 words, beam 4, in the worker ms']:.0f} ms (budget "
        f"{budgets['60 words budget ms']:,})"])
