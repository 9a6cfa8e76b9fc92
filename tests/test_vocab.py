"""The vocabulary must be stable across runs and total over any input."""

import os
import subprocess
import sys

import pytest

from toolkit.text.tokens import detokenize, tokenize
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocab

SENTENCES = [tokenize(s) for s in [
    "The dog sees the cat.", "The cats sleep.", "Twenty-one dogs see a bird.",
    "Der Hund sieht die Katze.", "Ein und zwanzig Hunde sehen einen Vogel.",
]]

BUILD_IN_SUBPROCESS = """
from toolkit.text.tokens import tokenize
from toolkit.text.vocab import Vocab
words = "zebra apple mango kiwi lime fig date plum pear yam oat rye".split()
print(Vocab.build([words, words[::2], ["z", "y", "x", "w", "v"]]).itos)
"""


@pytest.mark.slow
def test_order_does_not_depend_on_python_hash_seed():
    """A checkpoint must survive a restart: set iteration order changes with PYTHONHASHSEED."""
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", BUILD_IN_SUBPROCESS], env=env,
                                capture_output=True, text=True, check=True)
        outputs.add(result.stdout)
    assert len(outputs) == 1, outputs


def test_specials_come_first_with_fixed_ids():
    vocab = Vocab.build(SENTENCES)
    assert vocab.itos[: len(SPECIALS)] == list(SPECIALS)
    assert (vocab.stoi["<pad>"], vocab.stoi["<unk>"]) == (PAD_ID, UNK_ID)
    assert (vocab.stoi["<bos>"], vocab.stoi["<eos>"]) == (BOS_ID, EOS_ID)


def test_frequent_tokens_first_then_alphabetical():
    vocab = Vocab.build([["b", "a", "c", "a"]])
    assert vocab.itos[len(SPECIALS):] == ["a", "b", "c"]


def test_unknown_words_map_to_unk():
    vocab = Vocab.build(SENTENCES)
    assert vocab.encode(["The", "platypus", "sleeps"]) == [
        vocab.stoi["The"], UNK_ID, UNK_ID]
    assert vocab.unknown(["The", "platypus"]) == ["platypus"]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_encode_decode_round_trip(sentence):
    vocab = Vocab.build(SENTENCES)
    assert vocab.decode(vocab.encode(sentence)) == sentence


def test_decode_stops_at_eos_and_drops_bos_and_pad():
    vocab = Vocab.build([["a", "b"]])
    a, b = vocab.stoi["a"], vocab.stoi["b"]
    assert vocab.decode([BOS_ID, a, PAD_ID, b, EOS_ID, a]) == ["a", "b"]


def test_duplicate_tokens_are_rejected():
    with pytest.raises(ValueError, match="twice"):
        Vocab(["a", "a"])


@pytest.mark.parametrize("text", [
    "The dog sees the cat.", "Der Mann sagt, dass der Hund schläft.", "Twenty-one dogs sleep.",
])
def test_detokenize_undoes_tokenize(text):
    assert detokenize(tokenize(text)) == text


def test_tokenize_splits_punctuation_and_hyphens():
    assert tokenize("Twenty-one dogs, today.") == ["Twenty", "-", "one", "dogs", ",", "today", "."]


@pytest.mark.parametrize(("min_count", "kept"), [
    (1, ["cat", "the", "dog", "a"]),  # the default keeps every word, even one seen once
    (2, ["cat", "the", "dog"]),  # seen exactly twice is enough
    (3, ["cat", "the"]),
    (4, []),
])
def test_min_count_keeps_exactly_the_words_seen_that_often(min_count, kept):
    sentences = [["the", "cat"], ["the", "dog", "cat"], ["the", "cat", "dog"], ["a"]]
    vocab = Vocab.build(sentences, min_count=min_count)
    assert vocab.itos[len(SPECIALS):] == kept
    dropped = [word for word in ("cat", "dog", "the", "a") if word not in kept]
    assert vocab.encode(dropped) == [UNK_ID] * len(dropped)


def test_a_token_spaced_in_a_way_never_seen_reads_as_its_plain_self():
    """"sleeps ." marks its full stop ("▁."), which the vocabulary only knows unmarked: it
    must not become <unk>, nor be reported as an unknown word."""
    vocab = Vocab.build([Vocab.split("The dog sleeps.")])
    tokens = Vocab.split("The dog sleeps .")
    assert tokens[-1] == "▁." and "▁." not in vocab.stoi
    assert vocab.encode(tokens) == vocab.encode(Vocab.split("The dog sleeps."))
    assert vocab.unknown(tokens) == []
    assert vocab.unknown(Vocab.split("The cat sleeps .")) == ["cat"]
