"""Reliability: reproducible runs, clear errors for bad input, no NaN, no hanging downloads."""

import hashlib
import importlib
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from toolkit.batching.batches import encode_source, encode_target, endless, loader
from toolkit.learning.training import train
from toolkit.outline import STAGES
from toolkit.search.decoding import translate
from toolkit.text.corpus import DATA_DIR, SPLITS
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

MODULES = {stage.number: stage.module for stage in STAGES}
SRC_VOCAB = Vocab(f"w{i}" for i in range(16))  # 20 ids with the specials
TGT_VOCAB = Vocab(f"v{i}" for i in range(26))  # 30 ids
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])


def build(number: int, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    stage = importlib.import_module(f"stages.{MODULES[number]}")
    extra = {"num_heads": 4, "ff_dim": 40} if number == 7 else {}
    return stage.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), embed_dim=16,
                             **{**extra, **kwargs}).eval()


# --- Reproducibility -----------------------------------------------------------------------


def random_pairs(count: int = 64, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Sentence pairs of uneven lengths, so batches carry real padding."""
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(count):
        src_len, tgt_len = torch.randint(1, 9, (2,), generator=generator).tolist()
        words = torch.randint(0, 16, (src_len + tgt_len,), generator=generator).tolist()
        pairs.append((encode_source([f"w{i}" for i in words[:src_len]], SRC_VOCAB),
                      encode_target([f"v{i}" for i in words[src_len:]], TGT_VOCAB)))
    return pairs


@pytest.mark.parametrize("number", [1, 7])
def test_the_same_seed_gives_bit_identical_losses_over_50_steps(number):
    """Stage 01 draws random prefixes, stage 07 trains on every position: both must repeat."""
    runs = []
    for _ in range(2):
        model = build(number)
        stage = sys.modules[type(model).__module__]
        history = train(model, stage.objective, endless(loader(random_pairs(), 8, seed=3)),
                        steps=50, seed=5, progress=open(os.devnull, "w"))  # noqa: SIM115
        runs.append(history.losses)
    assert len(runs[0]) == 50
    assert runs[0] == runs[1]  # exactly equal floats, not merely close


HASH_CORPUS_AND_VOCAB = textwrap.dedent("""
    import hashlib, json, tempfile
    from pathlib import Path
    from toolkit.text.corpus import SPLITS, write_corpus
    from toolkit.batching.data import load_data
    folder = Path(tempfile.mkdtemp())
    write_corpus(folder)
    print(hashlib.sha256(b"".join((folder / f"{s}.jsonl").read_bytes() for s in SPLITS))
          .hexdigest())
    data = load_data()
    print(hashlib.sha256(json.dumps([data.src_vocab.itos, data.tgt_vocab.itos]).encode())
          .hexdigest())
""")


@pytest.mark.slow
def test_corpus_files_and_vocabularies_do_not_depend_on_python_hash_seed():
    """Set orders change with PYTHONHASHSEED; the corpus files and token ids must not."""
    outputs = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "HF_HUB_OFFLINE": "1"}
        result = subprocess.run([sys.executable, "-c", HASH_CORPUS_AND_VOCAB], env=env,
                                capture_output=True, text=True, check=True)
        outputs.add(tuple(result.stdout.split()))
    assert len(outputs) == 1, outputs
    corpus_digest, _ = outputs.pop()
    committed = b"".join((DATA_DIR / f"{split}.jsonl").read_bytes() for split in SPLITS)
    assert corpus_digest == hashlib.sha256(committed).hexdigest()


# --- Bad input gets a message that says what to fix ---------------------------------------


@pytest.mark.parametrize(("sentences", "error", "message"), [
    ([""], ValueError, "cannot translate an empty sentence"),
    (["w1 w2", "   "], ValueError, "cannot translate an empty sentence"),
    ([42], TypeError, r"sentences as text \(str\), got int 42"),
    ([["w1", "w2"]], TypeError, r"got list \['w1', 'w2'\]: pass the sentence itself"),
    ("w1 w2 w3", TypeError, r"a list of sentences, got one string .*\(model, \[sentence\]"),
])
@pytest.mark.parametrize("number", MODULES)
def test_bad_sentences_are_refused_with_what_to_do(number, sentences, error, message):
    with pytest.raises(error, match=message):
        translate(build(number), sentences, SRC_VOCAB, TGT_VOCAB)


@pytest.mark.parametrize("number", [4, 5, 6, 7])
def test_a_sentence_longer_than_max_seq_len_is_refused_with_what_to_do(number):
    """The 41 source tokens (40 words and <eos>) are refused on every stage, with how many
    positions the model has: by the encoder, or where the model says how many it has (stage
    07's `config`), by `translate` before any decoding."""
    long_sentence = " ".join(["w1"] * 40)
    with pytest.raises(ValueError, match=r"41 tokens is longer than max_seq_len=32: shorten it"
                       r"|41 source tokens leave no room for a translation in the model's 32"):
        translate(build(number, max_seq_len=32), [long_sentence], SRC_VOCAB, TGT_VOCAB)


def ends_at_once(model: nn.Module) -> nn.Module:
    """The same model, made to say <eos> first: a translation of no words."""
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] = 1e4
    return model


@pytest.mark.parametrize("number", [4, 5, 6, 7])
def test_a_translation_that_fits_is_given_though_its_limit_would_not(number):
    """26 source tokens fit max_seq_len=32, and so does a translation that ends at once,
    though translate would let it grow to 26 + 10 = 36 tokens."""
    sentence = " ".join(["w1"] * 25)
    model = ends_at_once(build(number, max_seq_len=32))
    assert translate(model, [sentence, "w2 w3"], SRC_VOCAB, TGT_VOCAB) == [[], []]


@pytest.mark.parametrize("number", [4, 5, 6, 7])
def test_a_translation_that_would_outgrow_the_positions_stops_where_they_end(number):
    """Without <eos>, 25 words and <eos> would be allowed 36 tokens; the model has 32
    target positions, so the translation stops at 32 tokens instead of failing at the 33rd."""
    sentence = " ".join(["w1"] * 25)
    model = build(number, max_seq_len=32)
    with torch.no_grad():
        model.out_proj.bias[[EOS_ID, PAD_ID, BOS_ID]] = -1e4  # never ends, always a word
    [words] = translate(model, [sentence], SRC_VOCAB, TGT_VOCAB)
    assert len(words) == 32


@pytest.mark.parametrize("number", [n for n in MODULES if n > 1])
@pytest.mark.parametrize(("src", "tgt", "error", "message"), [
    (SRC, TGT[:1], ValueError, "src holds 2 sentences but tgt holds 1: give one target row"),
    (SRC.masked_fill(SRC == 12, 25), TGT, ValueError,
     r"src holds ids outside 0..19 \(min 0, max 25\)"),
    (SRC, TGT - 5, ValueError, r"tgt holds ids outside 0..29 .*same vocabulary"),
    (SRC.int(), TGT, TypeError, r"src must hold token ids \(torch.long\), got torch.int32"),
    (SRC.float(), TGT, TypeError, r"src must hold token ids \(torch.long\), got torch.float32"),
    (SRC[:, :0], TGT, ValueError, "src is empty: give at least one token"),
    (SRC[None], TGT, ValueError, r"src must have shape \(batch, len\), got \(1, 2, 6\)"),
])
def test_bad_tensors_are_refused_before_they_reach_torch(number, src, tgt, error, message):
    with pytest.raises(error, match=message):
        build(number)(src, tgt)


# --- Numerical safety ----------------------------------------------------------------------


def test_float16_layernorm_linear_and_softmax_run_forward_and_backward_on_cpu():
    """The float16 checks of the masking tests rely on these kernels existing on CPU."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, dtype=torch.float16, requires_grad=True)
    norm = nn.LayerNorm(8).half()
    linear = nn.Linear(8, 8).half()
    out = linear(norm(x)).softmax(dim=-1)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    out[..., 0].sum().backward()
    for grad in (x.grad, norm.weight.grad, linear.weight.grad):
        assert grad.dtype == torch.float16 and torch.isfinite(grad).all() and grad.abs().sum() > 0


# --- The Hub path fails at once without a network ------------------------------------------

LOAD_OPUS100 = textwrap.dedent("""
    import socket
    from toolkit.text.corpus import CorpusUnavailable, load_corpus
    attempts, connect = [], socket.socket.connect
    def counted(self, address):
        attempts.append(address)
        return connect(self, address)
    socket.socket.connect = counted
    try:
        load_corpus("opus100")
    except CorpusUnavailable as err:
        print(len(attempts))
        print(err)
""")


@pytest.mark.slow
def test_opus100_without_a_network_fails_at_once_pointing_to_the_builtin_corpus():
    """No HF_HUB_OFFLINE, and a Hub address where nothing listens: a refused connection."""
    env = {key: value for key, value in os.environ.items() if key != "HF_HUB_OFFLINE"}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # the discard port: nothing answers here
    result = subprocess.run([sys.executable, "-c", LOAD_OPUS100], env=env, capture_output=True,
                            text=True, check=True, timeout=60)
    attempts, message = result.stdout.split("\n", 1)
    assert "unreachable" in message and 'load_corpus("builtin")' in message
    # "At once" counted in tries, not seconds: the failure it catches is 5 to 23 s of retries,
    # a connection after a connection (here: the dataset's card, then its files).
    assert int(attempts) <= 2, f"{attempts} connections to an address that refuses them"
