"""Everything a notebook needs from the corpus, prepared in one call."""

from dataclasses import dataclass

from datasets import DatasetDict

from toolkit.batches import EncodedPair, encode_pairs
from toolkit.corpus import load_corpus
from toolkit.tokens import tokenize
from toolkit.vocab import Vocab


@dataclass
class CourseData:
    """The corpus splits, the vocabularies built on train only, and the encoded pairs."""

    splits: DatasetDict
    src_vocab: Vocab
    tgt_vocab: Vocab
    train: list[EncodedPair]
    validation: list[EncodedPair]
    src_lang: str = "en"
    tgt_lang: str = "de"

    def sources(self, split: str) -> list[str]:
        return [row[self.src_lang] for row in self.splits[split]["translation"]]

    def references(self, split: str) -> list[list[str]]:
        return [tokenize(row[self.tgt_lang]) for row in self.splits[split]["translation"]]

    def phenomena(self, split: str) -> list[list[str]]:
        """Tags per sentence; corpora without tags (opus100) give none."""
        if "phenomena" not in self.splits[split].column_names:
            return [[] for _ in range(len(self.splits[split]))]
        return self.splits[split]["phenomena"]


def load_data(source: str = "builtin", src_lang: str = "en", tgt_lang: str = "de") -> CourseData:
    """Build vocabularies from the training split only, so test words can really be unknown."""
    splits = load_corpus(source)
    train_rows = splits["train"]["translation"]
    src_vocab = Vocab.build(tokenize(row[src_lang]) for row in train_rows)
    tgt_vocab = Vocab.build(tokenize(row[tgt_lang]) for row in train_rows)
    return CourseData(
        splits=splits,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        train=encode_pairs(splits["train"], src_vocab, tgt_vocab, src_lang, tgt_lang),
        validation=encode_pairs(splits["validation"], src_vocab, tgt_vocab, src_lang, tgt_lang),
        src_lang=src_lang,
        tgt_lang=tgt_lang,
    )
