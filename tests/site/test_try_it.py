"""The Try-it page in headless Chromium, from file://: the site's page (notebook 10's model)
and a page `python -m toolkit.web` writes for a BPE checkpoint of `python -m toolkit.train`.
Both translate in a worker exactly as PyTorch does (the same ids on 200 test sentences,
greedy and beam 4, attention within 1e-4), a bug planted in the page's cache fails that,
bad input gets the command line's messages, every part fits at 1280, 800 and 390 px, and a
model of the size a learner trains on real text (2.4M parameters, 8,000 BPE pieces) keeps
to 12 MB of page and runs its longest search to the end, with its times (the first
translation, a 60-word sentence with beam 4) printed beside their budgets of 2 s and 1 s."""

import copy
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from chromium import OVERFLOWING, SCREENS, SITE, WIDTHS, open_page, wait_for

pytestmark = pytest.mark.slow  # starts Chromium, Node and the training command
TRY_SENTENCES = 200  # test sentences translated through each page, greedy and beam 4
PHONE = 390  # a phone's CSS width, portrait
# The page's worker answers each request as Translator.answer does; a test asks it directly.
ASK = """
const [sentences, beamSize] = arguments;
return Promise.all(sentences.map((text) => window.tryIt.ask({ text, beamSize, alpha: 0.6 })))
  .then((replies) => replies.map((r) => r.error !== undefined ? { error: r.error }
    : { ids: r.result.ids, ended: r.result.ended, text: r.result.text, ms: r.ms, ...r.attention }));
"""
CACHE_BUGS = {  # planted in the page's cached decoder: each must fail the comparison
    "a key not kept": ("layers.push({ ...state, keys, values });",
                       "layers.push({ ...state, keys: state.keys, values });"),
    "positions off by one": ('this.embed("tgt_embed.weight", [token], cache.length)',
                             'this.embed("tgt_embed.weight", [token], cache.length + 1)'),
}


def open_try(browser, page: Path, width: int) -> float:
    """Open a Try-it page and wait for its first translation; return when it was shown (ms
    after the page began to load)."""
    open_page(browser, page.as_uri(), width)
    first = wait_for(browser, "return window.tryIt && window.tryIt.firstTranslation;")
    assert first, "the page showed no translation within 30 s"
    assert browser.execute_script("return window.tryIt.inWorker();"), "no worker started"
    return first


def ask(browser, sentences: list[str], beam: int) -> list[dict]:
    replies = []
    for start in range(0, len(sentences), 25):  # in chunks, within the script timeout
        replies += browser.execute_script(ASK, sentences[start:start + 25], beam)
    return replies


def pytorch_side(model, vocab, sentences: list[str], beams=(1, 4)) -> dict[int, list]:
    """The ids PyTorch writes for each sentence, greedy and beam 4, within the page's limits."""
    import torch

    from toolkit.batching.batches import encode_source
    from toolkit.search.decoding import EXTRA_LEN, decoder, room

    torch.set_num_threads(1)
    found = {}
    for beam in beams:
        search = decoder(model, beam, 0.6)
        found[beam] = []
        for sentence in sentences:
            src = torch.tensor([encode_source(vocab.split(sentence), vocab)])
            limit = min(src.size(1) + EXTRA_LEN, room(model, src.size(1)))
            with torch.inference_mode():
                found[beam].append(search(model, src, torch.tensor([limit]))[0])
    return found


def attention_difference(model, vocab, sentence: str, page: dict) -> float:
    """The largest difference between the page's attention weights and the model's own."""
    import torch

    from toolkit.batching.batches import encode_source
    from toolkit.stage_api import keeping_attention

    src = torch.tensor([encode_source(vocab.split(sentence), vocab)])
    with keeping_attention(model), torch.no_grad():
        read = page["ids"] if page["ended"] else page["ids"][:-1]  # cut at its limit: no row after
        model(src, torch.tensor([[2, *read]]))
        if hasattr(model, "language_model"):  # stage 08: one stream
            ours = {"stream": [layer.self_attn.attention[0] for layer in model.decoder_layers]}
        else:
            ours = {"encoder": [layer.self_attn.attention[0] for layer in model.encoder_layers],
                    "self": [layer.self_attn.attention[0] for layer in model.decoder_layers],
                    "cross": [layer.cross_attn.attention[0] for layer in model.decoder_layers]}
    return max((torch.tensor(page[kind][layer], dtype=torch.float64) - weights.double())
               .abs().max().item() for kind, layers in ours.items()
               for layer, weights in enumerate(layers))


def weight_of(folder: Path) -> int:
    return sum(path.stat().st_size for path in (folder / "_static").iterdir()
               if path.name in ("model.js", "translator.js", "try_it.js", "try_it.css"))


def held_to_pytorch(browser, page: Path, model, vocab, sentences, label: str) -> None:
    """The page's ids, greedy and beam 4, are PyTorch's; its attention within 1e-4 on 20."""
    first = open_try(browser, page, 1280)
    expected = pytorch_side(model, vocab, sentences)
    replies = {beam: ask(browser, sentences, beam) for beam in (1, 4)}
    same = {beam: sum(r["ids"] == e for r, e in zip(replies[beam], expected[beam], strict=True))
            for beam in (1, 4)}
    differences = [attention_difference(model, vocab, s, r)
                   for s, r in zip(sentences[:20], replies[1], strict=False)]
    print(f"{label}: page weight {weight_of(page.parent) / 1e6:.2f} MB; first translation "
          f"{first:.0f} ms after loading began; greedy {same[1]}/{len(sentences)} and beam 4 "
          f"{same[4]}/{len(sentences)} sentences equal ({sum(map(len, expected[1]))} and "
          f"{sum(map(len, expected[4]))} tokens); largest attention difference on 20 sentences "
          f"{max(differences):.1e}")
    assert [r["ids"] for r in replies[1]] == expected[1]
    assert [r["ids"] for r in replies[4]] == expected[4]
    assert max(differences) < 1e-4


def planted_in_the_page(browser, page: Path, tmp_path: Path, bug: tuple[str, str], model,
                        vocab, sentences) -> bool:
    """Whether the page, with `bug` planted in a copy of its translator.js, still agrees."""
    copy_ = tmp_path / "page"
    shutil.copytree(page.parent, copy_)
    script = copy_ / "_static" / "translator.js"
    original, planted = bug
    assert script.read_text().count(original) == 1
    script.write_text(script.read_text().replace(original, planted))
    open_try(browser, copy_ / page.name, 1280)
    replies = ask(browser, sentences, 4)
    return ([r["ids"] for r in replies] == pytorch_side(model, vocab, sentences, (4,))[4]
            and attention_difference(model, vocab, sentences[0], replies[0]) < 1e-3)


# --- The site's page: notebook 10's model ---------------------------------------------------

@pytest.fixture(scope="module")
def site_model():
    from course_site.build import site_run

    run = site_run()
    return run.model, run.data.src_vocab, run.data.sources("test")[:TRY_SENTENCES]


def test_the_site_page_translates_as_pytorch_does(browser, site_model):
    model, vocab, sentences = site_model
    held_to_pytorch(browser, SITE / "try_it.html", model, vocab, sentences, "site page")
    assert weight_of(SITE) <= 12e6


@pytest.mark.parametrize("bug", CACHE_BUGS)
def test_a_bug_planted_in_the_site_page_is_caught(browser, site_model, tmp_path, bug):
    model, vocab, sentences = site_model
    assert not planted_in_the_page(browser, SITE / "try_it.html", tmp_path, CACHE_BUGS[bug],
                                   model, vocab, sentences[:50])


@pytest.mark.parametrize("text, message", [
    ("", "cannot translate an empty sentence"),
    ("the zebra sees the dog", "words not in the vocabulary, read as <unk>: zebra"),
    ("the dog " * 200, "more than the model's"),
])
def test_the_page_explains_bad_input_as_the_python_translator_does(browser, text, message):
    open_try(browser, SITE / "try_it.html", 800)
    browser.execute_script("document.getElementById('try-source').value = arguments[0];"
                           "return window.tryIt.run();", text)
    assert message in browser.find_element("id", "try-message").text


def show_a_beam_search(browser, page: Path, width: int, name: str) -> None:
    """The page as a learner leaves it, beam tree and heatmap shown and one row hovered, on
    one screenshot as tall as the page; the wide parts scroll in their own boxes."""
    from selenium.webdriver.common.action_chains import ActionChains

    open_try(browser, page, width)
    browser.execute_script("document.getElementById('try-search').value = 'beam';"
                           "document.getElementById('try-search').dispatchEvent("
                           "new Event('change'));"
                           "return window.tryIt.run();")
    assert browser.find_element("id", "try-alpha").is_displayed()
    row = browser.find_element("css selector", "#try-map tbody tr:nth-child(3)")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
    ActionChains(browser).move_to_element(row).perform()
    read = browser.find_element("id", "try-read").text
    assert re.fullmatch(r"\S+ read: .+ \d\.\d\d(, .+ \d\.\d\d)*", read), read
    assert browser.find_elements("css selector", "#try-beam svg text")
    browser.set_window_size(width, browser.execute_script(
        "return document.documentElement.scrollHeight;") + 100)
    browser.execute_script("window.scrollTo(0, 0);")
    browser.save_screenshot(str(SCREENS / f"{name}_{width}.png"))
    assert browser.execute_script(OVERFLOWING) == []


@pytest.mark.parametrize("width", [*WIDTHS, PHONE])
def test_the_whole_site_page_fits_with_a_beam_search_drawn(browser, width):
    show_a_beam_search(browser, SITE / "try_it.html", width, "try_it_whole")


def test_enter_translates_and_a_bad_alpha_clears_the_old_result(browser):
    from selenium.webdriver.common.keys import Keys

    open_try(browser, SITE / "try_it.html", 1280)
    box = browser.find_element("id", "try-source")
    box.clear()
    box.send_keys("The dog sees the cat.")
    box.send_keys(Keys.ENTER)
    assert wait_for(browser, "return document.getElementById('try-output').textContent"
                             " === 'Der Hund sieht die Katze.';")
    browser.execute_script("document.getElementById('try-search').value = 'beam';"
                           "document.getElementById('try-alpha').value = '-1';"
                           "return window.tryIt.run();")
    assert "alpha must be 0 or more" in browser.find_element("id", "try-message").text
    assert browser.find_element("id", "try-output-pieces").text == ""


def test_typing_never_waits_for_a_search(browser):
    """While the worker searches a sentence as long as the model takes, with beam 4, the
    page's own thread stays free: a timer set for 10 ms fires within a quarter of the
    search's time (on the page's own thread it would wait for all of it). Then what is
    typed is what ends up translated."""
    open_try(browser, SITE / "try_it.html", 1280)
    long = " ".join(["the small dog does not see the red cars because the cat sleeps ."] * 18)
    late, searched = browser.execute_script("""
      const asked = performance.now();
      const answer = window.tryIt.ask({ text: arguments[0], beamSize: 4, alpha: 0.6 });
      return new Promise((resolve) => setTimeout(() => {
        const late = performance.now() - asked - 10;
        answer.then((reply) => resolve([late, reply.ms]));
      }, 10));""", long)
    assert searched > 150, f"a search of {searched:.0f} ms is too short to tell"
    assert late < searched / 4, f"the page waited {late:.0f} ms for a {searched:.0f} ms search"
    browser.execute_script("document.getElementById('try-source').value = arguments[0];"
                           "return window.tryIt.run();", "The dog sees the cat.")
    assert browser.find_element("id", "try-output").text == "Der Hund sieht die Katze."


# --- A learner's own model: a BPE checkpoint of the training command -------------------------

BPE_RUN = ["--tokenizer", "bpe", "--vocab-size", "300", "--shared-vocab", "--tie-embeddings",
           "all", "--steps", "600", "--seed", "0"]


@pytest.fixture(scope="module")
def bpe_page(tmp_path_factory):
    """`python -m toolkit.train` on the built-in corpus with 300 shared BPE pieces (about a
    minute on one thread), then `python -m toolkit.web` on its best.pt."""
    from chromium import browser_or_skip

    browser_or_skip()  # before a minute of training, not after
    from toolkit.batching.data import load_data
    from toolkit.learning.checkpoints import load_checkpoint

    folder = tmp_path_factory.mktemp("bpe")
    env = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    for command in (["toolkit.train", *BPE_RUN, "--output", str(folder / "run")],
                    ["toolkit.web", str(folder / "run" / "best.pt"), "--output",
                     str(folder / "web"), "--example", "The small dog sees the red car."]):
        done = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    saved = load_checkpoint(folder / "run" / "best.pt")
    model = as_stored(saved.model, "float16")  # the page's default
    return folder / "web" / "index.html", model, saved.src_vocab, load_data().sources("test")


def as_stored(model, dtype: str):
    """The model with its weights rounded as the page stores them (tied ones stay tied)."""
    import torch

    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.to(getattr(torch, dtype)).float())
    return rounded


def test_a_bpe_checkpoint_s_page_translates_as_pytorch_does(browser, bpe_page):
    page, model, vocab, sentences = bpe_page
    held_to_pytorch(browser, page, model, vocab, sentences[:TRY_SENTENCES], "BPE page")


@pytest.mark.parametrize("bug", CACHE_BUGS)
def test_a_bug_planted_in_a_bpe_page_is_caught(browser, bpe_page, tmp_path, bug):
    page, model, vocab, sentences = bpe_page
    assert not planted_in_the_page(browser, page, tmp_path, CACHE_BUGS[bug], model, vocab,
                                   sentences[:50])


@pytest.mark.parametrize("width", [*WIDTHS, PHONE])
def test_the_whole_bpe_page_fits_with_a_beam_search_drawn(browser, bpe_page, width):
    show_a_beam_search(browser, bpe_page[0], width, "bpe_page")


def test_the_bpe_page_names_unknown_characters_and_refuses_what_is_too_long(browser, bpe_page):
    open_try(browser, bpe_page[0], 800)
    for text, message in [("the dog 🦒 sees Ω", "characters not in the vocabulary, read as "
                                                "<unk>: Ω 🦒"),
                          ("the dog " * 200, "more than the model's 256 positions")]:
        browser.execute_script("document.getElementById('try-source').value = arguments[0];"
                               "return window.tryIt.run();", text)
        assert message in browser.find_element("id", "try-message").text, text


# --- The size a learner trains on real text: the budgets --------------------------------------

@pytest.fixture(scope="module")
def large_page(tmp_path_factory):
    """The page benchmarks/page.py times (make bench): a model of the size a learner trains
    on real text, untrained, that runs every search to its limit."""
    from chromium import browser_or_skip

    browser_or_skip()
    spec = importlib.util.spec_from_file_location("page", SITE.parent / "benchmarks" / "page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    index, sentence, parameters, pieces = page.write_large_page(tmp_path_factory.mktemp("large"))
    return index, sentence, parameters, pieces


def test_a_real_text_sized_model_keeps_to_the_page_budgets(browser, large_page):
    page, sentence, parameters, pieces = large_page
    first = open_try(browser, page, 1280)
    timed = browser.execute_script("""
      const started = performance.now();
      return window.tryIt.ask({ text: arguments[0], beamSize: 4, alpha: 0.6 }).then((reply) =>
        ({ wall: performance.now() - started, ms: reply.ms, ids: reply.result.ids.length,
           pieces: reply.result.srcIds.length }));""", sentence)
    weight = weight_of(page.parent)
    print(f"{parameters / 1e6:.2f}M parameters, {pieces:,} pieces: page weight "
          f"{weight / 1e6:.2f} MB; first translation {first:.0f} ms after loading began; "
          f"{len(sentence.split())} words ({timed['pieces']} source ids) with beam 4, "
          f"{timed['ids']} output ids: {timed['wall']:.0f} ms asked to answered "
          f"({timed['ms']:.0f} ms in the worker)")
    assert 2.3e6 < parameters < 2.5e6 and pieces == 8_000
    assert timed["ids"] == min(timed["pieces"] + 10, 256)  # ran to its limit
    assert weight <= 12e6
    # The times are reported beside their budgets (2,000 ms to the first translation, 1,000
    # ms for the 60 words), never asserted: a slower laptop or a busy CI machine takes longer
    # with no bug at all, and a speed goal is a ratio measured side by side, not a test.
    print(f"budgets: first translation {first:.0f} of 2,000 ms; 60 words with beam 4 "
          f"{timed['wall']:.0f} of 1,000 ms")


# --- Stage 08 on the page: one stream, and sampling -------------------------------------------

SETTINGS = [{"temperature": 0.8, "topK": 10, "topP": None, "seed": 7},
            {"temperature": 1.2, "topK": None, "topP": 0.9, "seed": 8}]


@pytest.fixture(scope="module")
def stream_page(tmp_path_factory):
    """Notebook 14's decoder-only model, as the notebooks kept it, saved as a checkpoint and
    written out by `python -m toolkit.web`."""
    from chromium import browser_or_skip

    browser_or_skip()
    import torch

    from course_tools.paper_run import decoder_only_run
    from toolkit.learning.checkpoints import save_checkpoint
    from toolkit.web.__main__ import main

    torch.set_num_threads(1)  # the key the notebooks kept it under: read back, not trained
    run = decoder_only_run()
    folder = tmp_path_factory.mktemp("stage08")
    save_checkpoint(folder / "best.pt", run.model, run.data.src_vocab, run.data.tgt_vocab)
    assert main([str(folder / "best.pt"), "--output", str(folder / "web")]) == 0
    model = as_stored(run.model, "float16")
    return folder / "web" / "index.html", model, run.data.src_vocab, run.data.sources("test")


def test_a_stage_08_page_translates_as_pytorch_does(browser, stream_page):
    page, model, vocab, sentences = stream_page
    held_to_pytorch(browser, page, model, vocab, sentences[:TRY_SENTENCES], "stage-08 page")


def test_a_stage_08_page_samples_as_in_node(browser, stream_page):
    """The worker gets the form's settings: the page samples what Node samples from the same
    files (tests/test_web_decoder_only.py holds Node to toolkit.search.sampling)."""
    from toolkit.web.node_runner import run_in_node

    page, model, vocab, sentences = stream_page
    open_try(browser, page, 1280)
    for setting in SETTINGS:
        mine = browser.execute_script("""
          const [sentences, sampling] = arguments;
          return Promise.all(sentences.map((text) => window.tryIt.ask({ text, sampling })))
            .then((replies) => replies.map((r) => r.result.ids));""", sentences[:20], setting)
        node = run_in_node(page.parent / "_static" / "model.js", sentences[:20], 1, setting)
        assert mine == [n["ids"] for n in node], setting
        greedy = ask(browser, sentences[:20], 1)
        assert mine != [g["ids"] for g in greedy], setting  # the noise is at work


@pytest.mark.parametrize("width", [*WIDTHS, PHONE])
def test_the_whole_stage_08_page_fits_with_a_sample_drawn(browser, stream_page, width):
    page = stream_page[0]
    open_try(browser, page, width)
    browser.execute_script("document.getElementById('try-search').value = 'sample';"
                           "document.getElementById('try-search').dispatchEvent("
                           "new Event('change'));"
                           "document.getElementById('try-top-k').value = '5';"
                           "return window.tryIt.run();")
    assert browser.find_element("id", "try-output").text
    assert browser.find_element("id", "try-time").text.startswith("sampled")
    assert [o.text for o in browser.find_elements("css selector", "#try-kind option")] == [
        "the stream's self-attention"]
    header = browser.find_elements("css selector", "#try-map thead th span")
    assert "<bos>" in [h.text for h in header]
    browser.set_window_size(width, browser.execute_script(
        "return document.documentElement.scrollHeight;") + 100)
    browser.execute_script("window.scrollTo(0, 0);")
    browser.save_screenshot(str(SCREENS / f"stage08_page_{width}.png"))
    assert browser.execute_script(OVERFLOWING) == []


@pytest.mark.parametrize("field, value, message", [
    ("try-temperature", "-1", "the temperature must be 0 (greedy) or more"),
    ("try-top-k", "2.5", "top-k must be a whole number"),
    ("try-top-p", "0", "top-p must be in (0, 1]"),
    ("try-seed", "", "the seed must be a whole number"),
])
def test_a_bad_sampling_setting_gets_its_message(browser, stream_page, field, value, message):
    open_try(browser, stream_page[0], 800)
    browser.execute_script("document.getElementById('try-search').value = 'sample';"
                           "document.getElementById(arguments[0]).value = arguments[1];"
                           "return window.tryIt.run();", field, value)
    assert message in browser.find_element("id", "try-message").text
    assert browser.find_element("id", "try-output").text == ""
