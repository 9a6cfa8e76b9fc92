"""A decoder's next-token probabilities written by hand, so every choice a search makes can be
checked against the sentence probabilities worked out on paper (notebook 13)."""

import math

import torch

from toolkit.text.vocab import BOS_ID, EOS, Vocab

Table = dict[tuple[str, ...], dict[str, float]]  # prefix (words so far) -> next word -> p


class HandMadeModel:
    """The table gives p(next word | words so far); a prefix it does not list ends there."""

    def __init__(self, table: Table, vocab: Vocab):
        for prefix, choices in table.items():
            unknown = [word for word in [*prefix, *choices] if word not in vocab.stoi]
            if unknown:
                raise ValueError(f"the table uses words the vocabulary lacks: {unknown}")
            if not math.isclose(sum(choices.values()), 1.0, abs_tol=1e-9):
                raise ValueError(f"after {prefix}, the probabilities sum to "
                                 f"{sum(choices.values())}, not 1")
        self.table, self.vocab = table, vocab

    def choices(self, prefix: tuple[str, ...]) -> dict[str, float]:
        """What may follow `prefix`; a prefix the table does not list ends the sentence."""
        return {word: p for word, p in self.table.get(prefix, {EOS: 1.0}).items() if p > 0}

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of the next token for each row: (rows, length) -> (rows, vocab)."""
        rows = torch.full((tokens.size(0), len(self.vocab)), -torch.inf, dtype=torch.float64)
        for row, ids in enumerate(tokens.tolist()):
            assert ids[0] == BOS_ID, "every row starts with <bos>"
            prefix = tuple(self.vocab.itos[i] for i in ids[1:])
            for word, p in self.choices(prefix).items():
                rows[row, self.vocab.stoi[word]] = math.log(p)
        return rows

    def sentences(self, limit: int) -> list[tuple[tuple[str, ...], float]]:
        """Every sentence of at most `limit` tokens (<eos> included) and its log-probability,
        the likeliest first; one cut by the limit has no <eos>, as a search would leave it."""
        found, live = [], [((), 0.0)]
        for _ in range(limit):
            grown = []
            for prefix, log_prob in live:
                for word, p in self.choices(prefix).items():
                    sentence = (*prefix, word)
                    if word == EOS or len(sentence) == limit:
                        found.append((sentence, log_prob + math.log(p)))
                    else:
                        grown.append((sentence, log_prob + math.log(p)))
            live = grown
        return sorted(found, key=lambda item: -item[1])
