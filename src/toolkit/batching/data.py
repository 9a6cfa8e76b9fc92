"""Everything a notebook needs from a corpus, prepared in one call."""

from dataclasses import dataclass

from datasets import Dataset, DatasetDict

from toolkit.batching.batches import ENCODE_CHUNK, EncodedPair, encode_pairs, texts
from toolkit.text.corpus import load_corpus
from toolkit.text.sources import CorpusError
from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import Vocab

TOKENIZERS = ("word", "bpe")  # the course's word-level Vocab, or byte-pair-encoded subwords


@dataclass
class CourseData:
    """The corpus splits, the vocabularies built on train only, and the encoded pairs."""

    splits: DatasetDict
    src_vocab: Vocab | SubwordVocab
    tgt_vocab: Vocab | SubwordVocab
    train: list[EncodedPair]
    validation: list[EncodedPair]
    src_lang: str = "en"
    tgt_lang: str = "de"

    def sources(self, split: str) -> list[str]:
        return [row[self.src_lang] for row in self.splits[split]["translation"]]

    def references(self, split: str) -> list[list[str]]:
        """The references as the target vocabulary's tokens: words and punctuation for the
        word level, whitespace words for subwords."""
        return [self.tgt_vocab.split(text) for text in self.reference_texts(split)]

    def reference_texts(self, split: str) -> list[str]:
        """The references as written, the form BLEU and chrF compare."""
        return [row[self.tgt_lang] for row in self.splits[split]["translation"]]

    def phenomena(self, split: str) -> list[list[str]]:
        """Tags per sentence; corpora without tags (opus100) give none."""
        if "phenomena" not in self.splits[split].column_names:
            return [[] for _ in range(len(self.splits[split]))]
        return self.splits[split]["phenomena"]


def load_data(
    source: str = "builtin", src_lang: str = "en", tgt_lang: str = "de", *,
    config: str | None = None, tokenizer: str = "word", vocab_size: int | None = None,
    shared_vocab: bool = False, max_len: int | None = None, max_train_pairs: int | None = None,
    dedupe: bool = False, seed: int = 0,
    vocabularies: tuple[Vocab | SubwordVocab, Vocab | SubwordVocab] | None = None,
) -> CourseData:
    """Build vocabularies from the training split only, so test words can really be unknown.

    `source` is "builtin" (the course's corpus, the default), "opus100", a local JSONL or
    TSV file or folder, or a Hugging Face dataset id with its `config` (toolkit.text.sources).
    `max_train_pairs`, `dedupe` and `seed` choose the pairs; `tokenizer`, `vocab_size` and
    `shared_vocab` the vocabularies (`vocab_size` counts the special tokens; BPE defaults to
    8,000); `max_len` drops every pair with a side longer than that many tokens once encoded,
    <bos> and <eos> included, so all pairs fit a model built with `max_seq_len=max_len`.
    `vocabularies` (source, target) are used as given instead of built: a resumed run reads
    the ones its checkpoint saved, so it never trains BPE again.
    """
    splits = load_corpus(source, src_lang=src_lang, tgt_lang=tgt_lang, config=config,
                         max_train_pairs=max_train_pairs, dedupe=dedupe, seed=seed)
    src_vocab, tgt_vocab = vocabularies or build_vocabularies(
        splits["train"], src_lang, tgt_lang, tokenizer, vocab_size, shared_vocab)
    encoded = {split: encode_pairs(rows, src_vocab, tgt_vocab, src_lang, tgt_lang)
               for split, rows in splits.items()}
    if max_len is not None:
        splits, encoded = drop_long_pairs(splits, encoded, max_len)
    return CourseData(splits, src_vocab, tgt_vocab, encoded["train"], encoded["validation"],
                      src_lang, tgt_lang)


def build_vocabularies(
    train: Dataset, src_lang: str, tgt_lang: str, tokenizer: str = "word",
    vocab_size: int | None = None, shared: bool = False,
) -> tuple[Vocab | SubwordVocab, Vocab | SubwordVocab]:
    """One vocabulary per language, or one for both sides (the paper's shared BPE)."""
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; choose one of {', '.join(TOKENIZERS)}")
    build, split = ((Vocab.build, Vocab.split) if tokenizer == "word"
                    else (SubwordVocab.train, SubwordVocab.split))
    rows = train.with_format("arrow")

    def words(*langs: str):  # a generator, so a million sentences never sit in memory as words
        for lang in langs:
            for start in range(0, len(rows), ENCODE_CHUNK):
                yield from (split(text) for text in texts(rows[start : start + ENCODE_CHUNK],
                                                              lang))

    if shared:
        vocab = build(words(src_lang, tgt_lang), max_size=vocab_size)
        return vocab, vocab
    return build(words(src_lang), max_size=vocab_size), build(words(tgt_lang), max_size=vocab_size)


def drop_long_pairs(
    splits: DatasetDict, encoded: dict[str, list[EncodedPair]], max_len: int
) -> tuple[DatasetDict, dict[str, list[EncodedPair]]]:
    """Keep the training and validation pairs whose both sides fit in `max_len` tokens, and
    say how many went. The test split is kept whole: a score on a filtered test split covers
    an easier subset and compares with nothing (`evaluate` scores a sentence the model
    cannot take as an empty translation)."""
    if max_len < 3:
        raise ValueError(f"max_len={max_len} leaves no room for a word between <bos> and <eos>")
    kept_splits, kept_pairs = {}, {}
    for split, pairs in encoded.items():
        if split == "test":
            kept_splits[split], kept_pairs[split] = splits[split], pairs
            print(f"test: kept all {len(pairs):,} pairs, the long ones too: scores count every "
                  f"test sentence")
            continue
        keep = [i for i, (src, tgt) in enumerate(pairs) if max(len(src), len(tgt)) <= max_len]
        if split == "train" and not keep:
            raise CorpusError(f"every training pair is longer than max_len={max_len} tokens "
                              f"once encoded (<bos> and <eos> included): raise max_len")
        print(f"{split}: dropped {len(pairs) - len(keep):,} of {len(pairs):,} pairs longer "
              f"than max_len={max_len} tokens")
        kept_splits[split] = splits[split].select(keep)
        kept_pairs[split] = [pairs[i] for i in keep]
    return DatasetDict(kept_splits), kept_pairs
