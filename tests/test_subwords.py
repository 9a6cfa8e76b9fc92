"""Subwords must keep `Vocab`'s contract (fixed specials, the same every run) and give text back
exactly as it went in, in every script."""

import hashlib
import json
import os
import subprocess
import sys
import unicodedata

import pytest
from multilingual import SAMPLE

from toolkit.text.corpus import DATA_DIR
from toolkit.text.subwords import WORD_START, SubwordVocab
from toolkit.text.tokens import split_words
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK, UNK_ID

SENTENCES = [
    "The girl sees the dog, and the dog sees the girl.",
    "Does the teacher know that the cat sleeps?",
    "Twenty-one small birds sing in the garden!",
    'The boy says "hello" to the old man.',
    "Das Mädchen läuft über die Straße.",
    "Der Übermut der Kinder ist groß, sagt die Lehrerin.",
    "Weiß der Hund, dass die Katze schläft?",
    "Ein und zwanzig Vögel singen im Garten!",
    'Der Junge sagt "hallo" zu dem alten Mann.',
    "Hier wartet eine müde Katze, nicht ein Hund.",
]
WORDS = [SubwordVocab.split(sentence) for sentence in SENTENCES]
UNSEEN = [  # words and sentences made of the corpus's characters, never in it as a whole
    "The old girl sings, and the small cat waits!",
    "Die Lehrerin weiß, dass der Junge über die Straße läuft.",
]

HASH_IN_SUBPROCESS = """
import hashlib, sys
from toolkit.text.subwords import SubwordVocab
corpus = [line.split() for line in sys.stdin.read().splitlines()]
for size in (60, 12):  # 12 is fewer than the characters: the alphabet is cut, ties included
    print(hashlib.sha256(SubwordVocab.train(corpus, max_size=size).to_json().encode()).hexdigest())
"""
TIED_CORPUS = ["abcd efgh ijkl mnop", "dcba hgfe lkji ponm", "qrst uvwx yzab", "ab cd ef gh"]


@pytest.fixture(scope="module")
def vocab() -> SubwordVocab:
    return SubwordVocab.train(WORDS, max_size=200)


def built_in_corpus(rows: int) -> list[list[str]]:
    """Both sides of the first training rows, split into whitespace words."""
    lines = (DATA_DIR / "train.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
    translations = [json.loads(line)["translation"] for line in lines]
    return [SubwordVocab.split(pair[lang]) for pair in translations for lang in ("en", "de")]


def test_specials_take_ids_0_to_3_in_vocab_order(vocab):
    assert vocab.pieces(range(len(SPECIALS))) == list(SPECIALS)


@pytest.mark.parametrize("size", [50, 120, 300])
def test_the_vocabulary_has_the_requested_size_when_the_corpus_has_enough_material(size):
    assert len(SubwordVocab.train(built_in_corpus(300), max_size=size)) == size


@pytest.mark.parametrize("size", [5, 12, 40])
def test_the_vocabulary_is_never_larger_than_asked_even_with_many_characters(size):
    """BPE keeps every character it meets; 60 distinct ones must not give 60+ tokens."""
    letters = "abcdefghijklmnopqrstuvwxyzäöüßABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÜ!?"
    corpus = [[letter * (1 + index % 3)] for index, letter in enumerate(letters)]
    trained = SubwordVocab.train(corpus, max_size=size)
    assert len(trained) == size
    kept = [piece for piece in trained.pieces(range(len(SPECIALS), size)) if len(piece) == 1]
    assert WORD_START in kept  # without it no word could start


def test_a_vocabulary_without_room_for_pieces_is_refused():
    with pytest.raises(ValueError, match="max_size must leave room"):
        SubwordVocab.train(WORDS, max_size=len(SPECIALS))


def round_trip(vocab: SubwordVocab, text: str) -> str:
    """Text to ids and back, the way the course reads a sentence and writes a translation."""
    return vocab.join(vocab.decode(vocab.encode(vocab.split(text))))


@pytest.mark.parametrize("sentence", SENTENCES + UNSEEN)
def test_every_sentence_comes_back_exactly_as_written(vocab, sentence):
    assert UNK_ID not in vocab.encode(vocab.split(sentence))
    assert round_trip(vocab, sentence) == sentence


@pytest.fixture(scope="module")
def multilingual() -> SubwordVocab:
    return SubwordVocab.train([SubwordVocab.split(text) for text in SAMPLE.values()], 400)


@pytest.mark.parametrize("name", SAMPLE)
def test_text_in_any_script_comes_back_up_to_nfc_and_whitespace(multilingual, name):
    """German to Korean, emoji, quotes, apostrophes, decimals and URLs: exact, once composed
    (NFC) and with runs of whitespace read as one space."""
    text = SAMPLE[name]
    assert round_trip(multilingual, text) == " ".join(unicodedata.normalize("NFC", text).split())
    assert round_trip(multilingual, "  " + text.replace(" ", " \t ") + "\n") == round_trip(
        multilingual, text)


def test_punctuation_is_a_piece_of_its_own_and_comes_back_unspaced(vocab):
    """A word keeps its pieces whatever punctuation touches it; the decoder glues it back."""
    marked = vocab.split('The boy says "hello", and hello.')
    pieces = vocab.pieces(vocab.encode(marked))
    assert [piece for piece in pieces if not piece.strip(WORD_START).isalpha()
            and piece != WORD_START] == ['"', '"', ",", "."]
    hello = vocab.pieces(vocab.encode(["hello"]))
    assert vocab.pieces(vocab.encode(["hello,"])) == hello + [","]
    assert round_trip(vocab, " ".join(marked)) == 'The boy says "hello", and hello.'


def test_an_unseen_word_becomes_several_pieces_not_unk():
    corpus = [split_words(s) for s in ["A bear eats bread.", "The zoo is a large area.",
                                    "Zero bees, zero birds.", "A red bra was there."] * 3]
    assert not any("zebra" in word.lower() for words in corpus for word in words)
    trained = SubwordVocab.train(corpus, max_size=60)
    ids = trained.encode(["zebra"])
    assert len(ids) > 1 and UNK_ID not in ids
    assert trained.decode(ids) == ["zebra"]


def test_only_an_unseen_character_becomes_unk_and_the_output_shows_it(vocab):
    """"ç" never occurs in the corpus: it alone is <unk>, its neighbours keep their pieces,
    and the text shows where it was rather than dropping it."""
    ids = vocab.encode(["Straçe", "girl"])
    assert ids.count(UNK_ID) == 1
    spelled = "".join(vocab.pieces(ids)).replace(UNK, "ç")
    assert spelled == f"{WORD_START}Straçe{WORD_START}girl"
    assert vocab.decode(ids) == [f"Stra{UNK}e", "girl"]


def test_decode_stops_at_eos_and_skips_pad_and_bos_as_vocab_decode_does(vocab):
    words = vocab.split(UNSEEN[1])
    ids = vocab.encode(words)
    middle = len(ids) // 2
    framed = [BOS_ID, *ids[:middle], PAD_ID, *ids[middle:], EOS_ID, *vocab.encode(["Hund"])]
    assert vocab.decode(framed) == words
    assert vocab.decode([*ids, PAD_ID, PAD_ID]) == words
    assert vocab.decode(framed[:1] + [EOS_ID] + ids) == []


def test_pieces_mark_exactly_the_first_piece_of_each_word(vocab):
    words = vocab.split(UNSEEN[0] + " " + UNSEEN[1])
    pieces = vocab.pieces(vocab.encode(words))
    starts = [piece for piece in pieces if piece.startswith(WORD_START)]
    assert [piece.removeprefix(WORD_START) for piece in starts] == [
        word[: len(piece) - 1] for word, piece in zip(words, starts, strict=True)]
    assert "".join(pieces) == "".join(WORD_START + word for word in words)


def test_no_merge_crosses_a_word_boundary(vocab):
    """A piece holds at most one word start, and a sentence encodes word by word."""
    learned = vocab.pieces(range(len(SPECIALS), len(vocab)))
    assert [piece for piece in learned if WORD_START in piece[1:]] == []
    for words in WORDS:
        by_word = [vocab.encode([word]) for word in words]
        assert vocab.encode(words) == [index for ids in by_word for index in ids]
        assert [vocab.decode(ids) for ids in by_word] == [[word] for word in words]


def test_encode_batch_equals_encoding_one_sentence_at_a_time(vocab):
    sentences = WORDS + [vocab.split(sentence) for sentence in UNSEEN] + [["Straçe"], ["a"]]
    assert vocab.encode_batch(iter(sentences)) == [vocab.encode(words) for words in sentences]


def test_training_twice_gives_the_same_vocabulary():
    corpus = built_in_corpus(200)
    assert SubwordVocab.train(corpus, max_size=150).to_json() == SubwordVocab.train(
        corpus, max_size=150).to_json()
    tied = [line.split() for line in TIED_CORPUS]
    assert SubwordVocab.train(tied, max_size=12).to_json() == SubwordVocab.train(
        tied, max_size=12).to_json()


@pytest.mark.slow
def test_training_does_not_depend_on_hash_seed_or_tokenizers_parallelism():
    """A checkpoint's vocabulary must be the one a fresh process would train again."""
    expected = "".join(
        hashlib.sha256(SubwordVocab.train([line.split() for line in TIED_CORPUS],
                                          max_size=size).to_json().encode()).hexdigest() + "\n"
        for size in (60, 12))
    for hash_seed, parallel in (("1", "true"), ("2", "false"), ("3", "true")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "TOKENIZERS_PARALLELISM": parallel}
        result = subprocess.run([sys.executable, "-c", HASH_IN_SUBPROCESS], env=env, check=True,
                                input="\n".join(TIED_CORPUS), capture_output=True, text=True)
        assert result.stdout == expected, (hash_seed, parallel)


def test_a_saved_vocabulary_encodes_and_decodes_as_the_original(vocab):
    restored = SubwordVocab.from_json(vocab.to_json())
    assert len(restored) == len(vocab)
    assert restored.to_json() == vocab.to_json()
    for words in WORDS + [vocab.split(sentence) for sentence in UNSEEN] + [["Straçe"]]:
        ids = vocab.encode(words)
        assert restored.encode(words) == ids
        assert restored.decode(ids) == vocab.decode(ids)
