"""Checkers of what goes in and what is scored: framed and padded sentences, the
decoder's prefix and target, the loss over real tokens only, stage 08's German targets."""

from collections.abc import Callable

import torch

from stages import stage08_decoder_only as stage08
from toolkit.batching.batches import Batch, collate, encode_source, encode_target, pad
from toolkit.checkers import properties
from toolkit.checkers.position_checks import STREAMS
from toolkit.checkers.verdicts import Cause, Hint, exercise, fail_on, name_of, passed
from toolkit.objectives import sequence_loss, token_loss
from toolkit.text.vocab import PAD_ID, Vocab

VOCAB = Vocab("the dog cat sees a house".split())
SENTENCES = [["the", "dog"], ["a", "cat", "sees", "the", "house"], ["the", "zebra", "sees"],
             ["dog"]]


CAPITALISED = ["The", "dog"]  # VOCAB holds "the": to it, "The" is an unknown word


# The untouched stubs' placeholders, each its own mistake.
NO_IDS = Cause("the list is empty, as the stub returns it: no id is written yet",
               f"frame the words' ids: {properties.FRAMED}")
NO_COLUMNS = Cause("the batch has no columns, as the stub returns it: no id is copied in yet",
                   properties.PADDED)
WHOLE = Cause("the prefix is the whole sentence and the target its last token, whatever n is, "
              "as the stub returns them", "the first n tokens, then the one after them: "
              "(ids[:n], ids[n])")


# The toolkit's own framing: the exercise asks for it without them.
@exercise(encode_target, encode_source, Vocab.encode, Vocab.encode_batch)
def frame_target(fn: Callable[[list[str], Vocab], list[int]]) -> None:
    """Exercise: a target sentence as ids, framed by <bos> and <eos>, unknown words as <unk>."""
    for words in [*SENTENCES, CAPITALISED]:
        case = f"{name_of(fn)}({words})"
        try:
            ids = fn(words, VOCAB)
        except KeyError as error:  # vocab.stoi[word], on the word the exercise is about
            fail_on(properties.lookup_problem(error, words, VOCAB), case)
            raise
        fail_on(properties.framing_problem(ids, words, VOCAB), case,
                stub=NO_IDS if isinstance(ids, list) and not ids else None)
    passed(name_of(fn), f"{len(SENTENCES) + 1} sentences, one with a word the vocabulary lacks "
                       f"and one with a word it holds only in another case")


@exercise(pad, collate)  # the toolkit's padding
def pad_batch(fn: Callable[[list[list[int]]], torch.Tensor]) -> None:
    """Exercise: right-pad encoded sentences into one (batch, longest) tensor, losing nothing."""
    batches = [[encode_target(words, VOCAB) for words in SENTENCES],
               [encode_target(["dog"], VOCAB)],
               [encode_target(words, VOCAB) for words in reversed(SENTENCES[:3])]]
    for sequences in batches:
        lengths = [len(sequence) for sequence in sequences]
        padded = fn(sequences)
        empty = isinstance(padded, torch.Tensor) and padded.dim() == 2 and padded.size(1) == 0
        fail_on(properties.padded_batch_problem(padded, sequences),
                f"{name_of(fn)} on sequences of lengths {lengths}",
                stub=NO_COLUMNS if empty else None)
    passed(name_of(fn), f"{len(batches)} batches: the longest sentence second of four, alone, "
                       "and in the middle of three")


@exercise()  # the stage's objective does it for a batch of tensors, never for a list
def prefix_and_target(fn: Callable[[list[int], int], tuple[list[int], int]]) -> None:
    """Exercise: stage 01's honest objective, the prefix ids[:n] and the token after it."""
    ids = [2, 14, 9, 21, 7, 3]  # <bos> four words <eos>
    for n in range(1, len(ids)):
        answer = fn(list(ids), n)
        fail_on(properties.next_token_problem(answer, ids, n), f"{name_of(fn)}(ids, n={n})",
                stub=WHOLE if _whole(answer, ids) else None)
    passed(name_of(fn), f"every prefix length of a {len(ids)}-token target")


def _whole(answer: object, ids: list[int]) -> bool:
    """Whether the answer is the stub's (ids, ids[-1]), whatever n is."""
    return (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], list)
            and answer[0] == ids and isinstance(answer[1], int) and answer[1] == ids[-1])


@exercise(sequence_loss, token_loss)  # the toolkit's loss; F.cross_entropy is the tool to use
def loss(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the loss of a padded batch, where <pad> targets must count for nothing."""
    fail_on(properties.loss_problem(fn), f"{name_of(fn)} on 3 sentences with <pad> targets")
    passed(name_of(fn), "a padded batch, its <pad> logits changed at random")


@exercise()  # stage 08 scores its German inside its objective: no function gives the targets
def german_only_targets(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise: targets for language_model(stream[:, :-1]) that score the German alone."""
    torch.manual_seed(0)
    model = stage08.Transformer(12, 12, embed_dim=16, num_heads=2, num_layers=2, ff_dim=32)
    src, tgt = STREAMS[:, :4], STREAMS[:, 4:]  # (2, 4) each: English, then <bos> German
    stream = model.join(src, tgt)  # (2, 8)
    case = f"{name_of(fn)} on the stream {stream.tolist()}, the German from column 4"
    targets = fn(stream, src.size(1))
    fail_on(properties.tensor_problem(targets, (2, 7)), case)
    expected = stream[:, 1:].clone()  # (batch, len - 1): each position's next token
    expected[:, : src.size(1)] = PAD_ID  # positions before <bos> predict English, or <bos>
    fail_on(_targets_problem(targets, expected, src.size(1)), case)
    with torch.no_grad():
        ours = token_loss(model.language_model(stream[:, :-1]), targets).mean()
        own = stage08.objective(model, Batch(src, tgt)).mean()
    if not torch.allclose(ours, own):
        fail_on(Hint(f"the loss is {float(ours):.4f}, stage 08's own {float(own):.4f}",
                     "the targets score other positions than stage 08's objective does",
                     GERMAN_ONLY), case)
    passed(name_of(fn), f"two streams, one of them padded: the loss equals stage 08's own "
                        f"({float(own):.4f})")


GERMAN_ONLY = ("targets = stream[:, 1:].clone(); targets[:, :src_len] = PAD_ID: the positions up "
               "to the English's <eos> predict nothing scored")


def _targets_problem(targets: torch.Tensor, expected: torch.Tensor,
                     src_len: int) -> properties.Problem:
    """The first target that differs, with the mistake that explains it."""
    if torch.equal(targets, expected):
        return None
    row, column = (int(i) for i in (targets != expected).nonzero()[0])
    got, wanted = int(targets[row, column]), int(expected[row, column])
    symptom = (f"row {row}, column {column} has target {got}, so that position is scored"
               if wanted == PAD_ID else
               f"row {row}, column {column} has target {got}, where the next token is {wanted}")
    scored = (targets != PAD_ID) & (expected == PAD_ID)  # (batch, len - 1)
    german = expected != PAD_ID
    if not torch.equal(targets[german], expected[german]):
        return Hint(symptom, "the targets must be each position's next token, stream[:, 1:], "
                    "wherever the German is scored", GERMAN_ONLY)
    if scored.nonzero()[:, 1].tolist() == [src_len - 1] * len(targets):  # the <eos> columns
        return Hint(symptom, "it scores the <bos> that the English's <eos> predicts: that token "
                    "is given, not translated", GERMAN_ONLY)
    return Hint(symptom, "it scores English words: only the German is translated", GERMAN_ONLY)
