"""Properties that the tests assert and the exercise checkers explain, written once.

Each function returns None when its property holds, or a `Hint`: what is wrong (the
symptom), why (the cause) and what to write instead (the fix). A test asserts
`problem is None, problem` and shows all three; `toolkit.checkers.check` tells the learner the
symptom first and the rest when the mistake comes back. So a hint is only as good as the test
behind it. The properties of positions and stacked layers are in
`toolkit.checkers.layer_properties`.
"""

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from toolkit.checkers.verdicts import Cause, Hint
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab

Problem = Hint | None


def _first(hits: torch.Tensor) -> list[int] | None:
    """The index of the first True in a boolean tensor, or None if there is none."""
    found = hits.nonzero()
    return found[0].tolist() if len(found) else None


def _index(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    if not shape:
        return ()
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape)))


def tensor_problem(value: object, shape: Sequence[int],
                   dtype: torch.dtype | None = None) -> Problem:
    """Check type and shape first, so that later hints can index the tensor safely."""
    if not isinstance(value, torch.Tensor):
        return Hint(f"got {type(value).__name__}, not a tensor",
                    "the check reads the tensor your function returns, and it returned none",
                    "end the function with `return <tensor>`")
    if tuple(value.shape) != tuple(shape):
        return Hint(f"the shape is {tuple(value.shape)}, expected {tuple(shape)}",
                    "a dimension is missing, extra, or of another size than the exercise asks",
                    f"return a tensor of shape {tuple(shape)}")
    if dtype is not None and value.dtype != dtype:
        return Hint(f"the dtype is {value.dtype}, expected {dtype}",
                    "the values are stored as another type than the exercise asks for",
                    f"build the tensor with dtype={dtype}, or convert it with .to({dtype})")
    return None


def scores_problem(scores: object, shape: torch.Size) -> Problem:
    """Scores are floats of the given shape: a bool mask returned instead is a common slip."""
    if problem := tensor_problem(scores, shape):
        return problem
    if not scores.is_floating_point():
        return Hint(f"got a {scores.dtype} tensor",
                    "that is a mask, or a comparison of the scores; the softmax needs the scores "
                    "themselves",
                    "return the float scores, with the hidden ones filled")
    return None


def mismatch(actual: object, expected: torch.Tensor, what: str, atol: float = 1e-5) -> Problem:
    """Point at the largest difference: 'not close' alone does not say where to look."""
    if problem := tensor_problem(actual, expected.shape):
        return problem
    actual = actual.to(expected.dtype)
    if not torch.isfinite(actual).all():
        where = _index(int((~torch.isfinite(actual)).flatten().nonzero()[0]), actual.shape)
        return Hint(f"NaN or inf at index {where}, where {what} is {expected[where].item():.4g}")
    gap = (actual - expected).abs()
    if gap.max() <= atol:
        return None
    where = _index(int(gap.argmax()), gap.shape)
    at = f" at index {where}" if where else ""
    return Hint(f"differs from {what} by {gap.max().item():.2g}{at}: "
                f"expected {expected[where].item():.4g}, got {actual[where].item():.4g}")


def compare(actual: object, expected: torch.Tensor, what: str,
            mistakes: dict[Cause, torch.Tensor] | None = None, otherwise: Cause | None = None,
            atol: float = 1e-5) -> Problem:
    """Like `mismatch`, explained by the classic mistake whose known output the result equals,
    or else by `otherwise`, what the exercise asks for."""
    problem = mismatch(actual, expected, what, atol)
    if problem is None or not isinstance(actual, torch.Tensor) or problem.why:
        return problem
    for cause, wrong in (mistakes or {}).items():
        if actual.shape == wrong.shape and torch.allclose(actual.to(wrong.dtype), wrong, atol=atol):
            return problem.because(cause)
    return problem.because(otherwise)


# --- data: framing and padding ---------------------------------------------------------

FRAMED = "[BOS_ID] + [vocab.stoi.get(word, UNK_ID) for word in words] + [EOS_ID]"


def framing_problem(ids: object, words: list[str], vocab: Vocab) -> Problem:
    """A target is <bos>, one id per word (<unk> for unknown words), then <eos>."""
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        return Hint(f"got {ids!r}, not a list of ints",
                    "a sentence becomes one int id per token", "return a list of ints")
    if not ids or ids[0] != BOS_ID:
        return Hint(f"the ids of {words} are {ids}, which do not start with <bos> (id {BOS_ID})",
                    "<bos> is the decoder's first input: without it, the first word has nothing "
                    "to be predicted from", f"put BOS_ID first: {FRAMED}")
    if ids[-1] != EOS_ID:
        return Hint(f"the ids of {words} are {ids}, which do not end with <eos> (id {EOS_ID})",
                    "<eos> is the decoder's last target: without it the model never learns to "
                    "stop", f"put EOS_ID last: {FRAMED}")
    if len(ids) != len(words) + 2:
        return Hint(f"{words} has {len(words)} words, so {len(words) + 2} ids with <bos> and "
                    f"<eos>; got {len(ids)}",
                    "each word becomes exactly one id, in order, between <bos> and <eos>",
                    f"one id per word: {FRAMED}")
    for word, index in zip(words, ids[1:-1], strict=True):
        if word not in vocab.stoi and index != UNK_ID:
            if vocab.stoi.get(word.lower()) == index:
                return Hint(f"'{word}' got id {index}, the id of '{word.lower()}'",
                            f"the vocabulary is case-sensitive: it lacks '{word}', which must "
                            f"become <unk> (id {UNK_ID}); never change a word's case",
                            "look the word up as it is: vocab.stoi.get(word, UNK_ID)")
            return Hint(f"'{word}' is not in the vocabulary, and got id {index}",
                        f"a word the vocabulary has never seen must become <unk> (id {UNK_ID})",
                        "give dict.get a default: vocab.stoi.get(word, UNK_ID)")
        if word in vocab.stoi and index != vocab.stoi[word]:
            return Hint(f"'{word}' got id {index}, not its own id {vocab.stoi[word]}",
                        "a known word's id is the one vocab.stoi gives it",
                        "look each word up in vocab.stoi")
    return None


def lookup_problem(error: KeyError, words: list[str], vocab: Vocab) -> Problem:
    """`vocab.stoi[word]` fails on the very word the exercise asks to map to <unk>."""
    word = error.args[0] if error.args else None
    if word not in words or word in vocab.stoi:
        return None
    return Hint(f"it raised KeyError: '{word}', a word the vocabulary does not hold",
                f"indexing vocab.stoi fails on an unknown word; the exercise asks that a word "
                f"the vocabulary has never seen become <unk> (id {UNK_ID})",
                "give a default instead of failing: vocab.stoi.get(word, UNK_ID)")


PADDED = ("torch.full((len(sequences), longest), PAD_ID, dtype=torch.long), then copy each "
          "sequence into the left of its row")


def padded_batch_problem(padded: object, sequences: Sequence[list[int]]) -> Problem:
    """Every id of every sequence survives, <pad> fills the rest, and nothing is wider."""
    if not isinstance(padded, torch.Tensor) or padded.dim() != 2:
        return Hint(f"got {type(padded).__name__}, not a (batch, longest) tensor",
                    "a batch is one 2-D tensor, one row per sequence", PADDED)
    if padded.size(0) != len(sequences):
        return Hint(f"{padded.size(0)} rows for {len(sequences)} sequences",
                    "each sequence is one row of the batch", PADDED)
    longest = max(len(sequence) for sequence in sequences)
    for row, sequence in enumerate(sequences):
        if len(sequence) > padded.size(1):
            lost = sequence[padded.size(1):]
            symptom = (f"row {row} lost its last {len(lost)} ids {lost}: the batch has "
                       f"{padded.size(1)} columns, the longest sequence {longest} ids")
            if padded.size(1) == longest - 2:  # classic bug 3
                return Hint(symptom, "it pads to the longest *word count*, but each encoded "
                            "sequence also holds <bos> and <eos> (classic bug 3)",
                            "pad to the longest encoded sequence: "
                            "max(len(sequence) for sequence in sequences), <bos> and <eos> "
                            "included")
            return Hint(symptom, "the batch is narrower than its longest sequence, so the "
                        "longer sentences are cut",
                        f"make it as wide as the longest sequence: {PADDED}")
    if padded.dtype != torch.long:
        return Hint(f"the dtype is {padded.dtype}",
                    "ids index nn.Embedding's table, which takes integers, torch.long",
                    "build the batch with dtype=torch.long")
    if padded.size(1) > longest:
        return Hint(f"{padded.size(1)} columns, but the longest sequence has {longest} ids",
                    "a column of <pad> alone is work for the model and nothing to learn",
                    "pad only as far as the longest sequence")
    for row, sequence in enumerate(sequences):
        if padded[row, : len(sequence)].tolist() != list(sequence):
            return Hint(f"row {row} starts {padded[row, : len(sequence)].tolist()}, where the "
                        f"sequence is {list(sequence)}",
                        "right padding keeps each sequence untouched, at the left of its row",
                        "copy each sequence to the left: "
                        "padded[row, : len(sequence)] = torch.tensor(sequence)")
        tail = padded[row, len(sequence):]
        if (tail != PAD_ID).any():
            column = len(sequence) + int((tail != PAD_ID).nonzero()[0])
            return Hint(f"row {row} holds {int(padded[row, column])} at column {column}, after "
                        f"its sequence ends",
                        f"every place after a sequence's end must hold <pad> (id {PAD_ID}), "
                        f"which the loss and the masks skip",
                        "start from torch.full((len(sequences), longest), PAD_ID)")
    return None


def next_token_problem(answer: object, ids: list[int], n: int) -> Problem:
    """Without a causal mask, score one position: the prefix ids[:n] predicts ids[n].

    answer: the pair (prefix, target) given for the ids and prefix length n.
    """
    pair = Cause("the decoder's input and the token it must predict come back together: a "
                 "list of ids, then one int", "return (prefix, target)")
    if not isinstance(answer, tuple) or len(answer) != 2:
        return Hint(f"got {answer!r}, not a pair").because(pair)
    prefix, target = answer
    if not isinstance(prefix, list) or not isinstance(target, int):
        return Hint(f"got ({prefix!r}, {target!r}), not a list of ids and one int").because(pair)
    if prefix == ids[: n + 1]:
        return Hint(f"the prefix {prefix} holds ids[{n}] = {ids[n]}, the very token to predict",
                    "the model would learn to copy it, not to translate",
                    "the first n tokens only: ids[:n]")
    if prefix != ids[:n]:
        return Hint(f"for n = {n}, the prefix is {prefix}, {len(prefix)} ids",
                    "the prefix is what the decoder reads: the n tokens before the one it "
                    "predicts, never that token or a later one", "ids[:n]")
    if target == ids[n - 1] != ids[n]:
        return Hint(f"the target {target} is the last token of the prefix, which the model "
                    f"already sees",
                    "the target is the token the model must guess, the one right after the prefix",
                    "ids[n]")
    if target != ids[n]:
        return Hint(f"for n = {n}, the target is {target}, not the token right after the prefix",
                    "the model is scored on the next token, the one it has not seen", "ids[n]")
    return None


# --- attention: what each query may see --------------------------------------------------

CAUSAL = "torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)"


def causal_problem(visible: torch.Tensor) -> Problem:
    """Only the future hides; visible: (..., q_len, k_len), True where a query reaches a key."""
    visible = visible.reshape(-1, *visible.shape[-2:])  # (cases, q_len, k_len)
    future = torch.ones(visible.shape[-2:], dtype=torch.bool, device=visible.device).triu(1)
    seen_by_all = visible.all(0)
    # Inverted: the past hidden and the future shown, with or without the diagonal.
    if future.any() and (torch.equal(seen_by_all, future) or torch.equal(seen_by_all, ~future.T)):
        return Hint("every row sees its future and not its past",
                    "the mask is inverted: in this course True means hidden, as in "
                    "nn.MultiheadAttention's and nn.Transformer's masks "
                    "(F.scaled_dot_product_attention's boolean mask is the opposite: True there "
                    "means may attend)",
                    f"True strictly above the diagonal, where the key comes after the query: "
                    f"{CAUSAL}")
    if leak := _first(visible.any(0) & future):
        row, column = leak
        return Hint(f"row {row} can see position {column}",
                    "the mask lets the future through: a position must see none of the "
                    "positions after it",
                    f"True strictly above the diagonal: {CAUSAL}")
    if hidden := _first(~seen_by_all & ~future):
        row, column = hidden
        if row == column:
            return Hint(f"row {row} cannot see its own position",
                        "the diagonal is hidden too (an off-by-one): row 0 then has nothing "
                        "left to attend to",
                        f"hide only what comes after each position, triu with diagonal=1: "
                        f"{CAUSAL}")
        return Hint(f"row {row} cannot see position {column}, which is in its past",
                    "the mask hides more than the future",
                    f"hide only the future, where the column is after the row: {CAUSAL}")
    return None


FILL = "fill with torch.finfo(scores.dtype).min, the most negative finite number, never -inf"


def finite_problem(weights: torch.Tensor) -> Problem:
    """A row with every key hidden must still give finite weights (bug 15)."""
    if bad := _first((~torch.isfinite(weights)).flatten(1).any(1)):
        return Hint(f"NaN in the weights of sentence {bad[0]} (counting from 0)",
                    "a row whose keys are all hidden with -inf (or with a constant too large "
                    "for the dtype, which becomes -inf) is 0/0 after the softmax",
                    f"{FILL}: such a row then gets equal, finite weights")
    return None


def padding_problem(weights: torch.Tensor, key_padding: torch.Tensor,
                    attn_mask: torch.Tensor | None = None) -> Problem:
    """<pad> keys get exactly zero weight from every query; real keys keep some.

    weights: (batch, ..., q_len, kv_len); key_padding: (batch, kv_len), True at <pad>;
    attn_mask: (q_len, kv_len), True where a real key may be hidden too (the future).
    A sentence made only of <pad> is skipped: any weights are harmless there, if finite.
    """
    if problem := finite_problem(weights):
        return problem
    batch, q_len, kv_len = weights.size(0), weights.size(-2), weights.size(-1)
    heads = weights.reshape(batch, -1, q_len, kv_len)  # (batch, heads, q_len, kv_len)
    for sentence in range(batch):
        padding = key_padding[sentence]  # (kv_len,)
        if padding.all():
            continue
        where = f"sentence {sentence} (counting from 0)"
        if leak := _first((heads[sentence] != 0) & padding):
            head, query, key = leak
            head_text = f", head {head}" if heads.size(1) > 1 else ""
            return Hint(f"{where}{head_text}, query {query} puts weight "
                        f"{heads[sentence, head, query, key]:.2g} on the <pad> key {key}",
                        "the <pad> keys, the columns of the scores, are not hidden from every "
                        "query",
                        "hide columns: a padding mask with a 1 for the query rows (and heads) "
                        "broadcasts over all of them")
        allowed = ~padding if attn_mask is None else ~padding & ~attn_mask  # (q_len, kv_len)
        if starved := _first((heads[sentence] <= 0) & allowed):
            _, query, key = starved
            return Hint(f"{where}, query {query} puts no weight on key {key}, a real token",
                        "a real key is hidden too", "hide only the <pad> keys")
    return None


def scaling_problem(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> Problem:
    """weights = softmax(q k^T / sqrt(head_dim)); q, k: (batch, heads, len, head_dim)."""
    raw = q @ k.transpose(-2, -1)  # (batch, heads, q_len, kv_len)
    head_dim, embed_dim = q.size(-1), q.size(1) * q.size(-1)
    expected = (raw / math.sqrt(head_dim)).softmax(-1)
    scaled = "q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"
    return compare(weights, expected, "softmax(q k^T / √head_dim)", {
        Cause("the scores are not scaled: their spread grows with head_dim, and the softmax "
              "saturates", f"divide by √head_dim: {scaled}"): raw.softmax(-1),
        Cause("the scores are divided by head_dim, not by its square root (bug 5)",
              f"divide by math.sqrt(head_dim): {scaled}"): (raw / head_dim).softmax(-1),
        Cause("the scores are divided by √embed_dim: each head's dot product has only "
              "head_dim terms (bug 5)", f"divide by √head_dim, head_dim = q.size(-1): {scaled}"):
            (raw / math.sqrt(embed_dim)).softmax(-1),
    }, Cause("the scores are not q kᵀ / √head_dim, on every head", scaled), atol=1e-6)


SPLIT = ("view as (batch, len, heads, head_dim) first, then transpose(1, 2): "
         "x.view(batch, length, num_heads, embed_dim // num_heads).transpose(1, 2)")


def split_problem(split: object, x: torch.Tensor, num_heads: int) -> Problem:
    """Head h holds features h*head_dim .. (h+1)*head_dim - 1 of every position, in order."""
    batch, length, embed_dim = x.shape
    head_dim = embed_dim // num_heads
    expected = torch.stack(x.split(head_dim, dim=-1), dim=1)  # (batch, heads, len, head_dim)
    if problem := tensor_problem(split, expected.shape):
        if not isinstance(split, torch.Tensor):
            return problem
        return Hint(problem.symptom + " = (batch, heads, len, head_dim)",
                    "each head holds head_dim = embed_dim / heads features of every position",
                    SPLIT)
    if torch.equal(split, x.reshape(batch, num_heads, length, head_dim)):
        return Hint(f"head 0 does not hold features 0..{head_dim - 1} of every position: its "
                    f"rows mix positions",
                    "a reshape straight to (batch, heads, len, head_dim) cuts across positions "
                    "(bug 6)", SPLIT)
    for head in range(num_heads):
        if not torch.equal(split[:, head], expected[:, head]):
            first, last = head * head_dim, (head + 1) * head_dim - 1
            return Hint(f"head {head} does not hold features {first}..{last} of every position, "
                        f"in their original order",
                        "the features are not cut into consecutive slices, one per head", SPLIT)
    return None


# --- the loss ----------------------------------------------------------------------------

FLAT = ("F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD_ID): "
        "(batch * len, vocab) against (batch * len,)")


def _unflattened_problem(error: Exception, logits: torch.Tensor,
                         targets: torch.Tensor) -> Problem:
    """cross_entropy on (batch, len, vocab) reads len as the classes: recognised by the very
    error torch gives for that call, or for one of the two flattened alone."""
    flat_logits, flat_targets = logits.flatten(0, 1), targets.flatten()
    messages = set()
    for wrong in [(logits, targets), (flat_logits, targets), (logits, flat_targets)]:
        try:
            F.cross_entropy(*wrong)
        except (RuntimeError, ValueError) as torch_error:
            messages.add(str(torch_error))
    if str(error) not in messages:
        return None
    return Hint(f"it raised {type(error).__name__}: {error}",
                f"cross_entropy reads the second dimension of a 3-D input as the classes, so "
                f"logits {tuple(logits.shape)} = (batch, len, vocab) must be flattened to "
                f"(batch * len, vocab), and the targets with them to (batch * len,)", FLAT)


def loss_problem(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Problem:
    """Cross-entropy of raw logits, averaged over real targets; <pad> targets count for nothing."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=generator) * 3  # (batch, len, vocab)
    targets = torch.randint(4, 11, (3, 6), generator=generator)  # (batch, len)
    targets[1, 2:], targets[2, 4:] = PAD_ID, PAD_ID
    try:
        loss = loss_fn(logits, targets)
    except (RuntimeError, ValueError) as error:
        if problem := _unflattened_problem(error, logits, targets):
            return problem
        raise
    if tensor_problem(loss, ()):
        return Hint(f"got {type(loss).__name__} {tuple(getattr(loss, 'shape', ()))}",
                    "the loss to minimise is one number, a 0-dim tensor: the mean over the real "
                    "targets", f"reduce to one mean: {FLAT}")
    changed = logits.clone()
    padded = targets == PAD_ID  # (batch, len)
    changed[padded] = torch.randn(int(padded.sum()), 11, generator=generator) * 50
    if not torch.allclose(loss_fn(changed, targets), loss):
        return Hint("the loss changes when only the logits at <pad> targets change",
                    "<pad> targets are scored: the model would be graded on padding",
                    f"leave <pad> out with cross_entropy's ignore_index=PAD_ID: {FLAT}")
    flat_logits, flat_targets = logits.reshape(-1, 11), targets.reshape(-1)
    real = flat_targets != PAD_ID
    each = F.cross_entropy(flat_logits, flat_targets, reduction="none")  # (batch * len,)
    real_per_sentence = (targets != PAD_ID).sum(1)  # (batch,)
    per_sentence = (each * real).reshape(3, 6).sum(1) / real_per_sentence  # (batch,)
    return compare(loss, each[real].mean(), "the mean cross-entropy over real targets", {
        Cause("softmax was applied before cross_entropy, which applies log-softmax itself "
              "(bug 9)", f"pass the raw logits: {FLAT}"):
            F.cross_entropy(flat_logits.softmax(-1), flat_targets, ignore_index=PAD_ID),
        Cause("the loss is a sum: it grows with the number of targets",
              f"average over the real targets: {FLAT}"): each[real].sum(),
        Cause("the loss is divided by every position, <pad> included",
              f"average over the real targets only: {FLAT}"): each[real].sum() / len(flat_targets),
        Cause(f"it is a mean of per-sentence means: padded sentences of different lengths "
              f"({', '.join(map(str, real_per_sentence.tolist()))} real targets here) make it "
              f"weight tokens unequally, a token of a short sentence more than one of a long",
              f"average over all real targets of the batch at once: {FLAT}"):
            per_sentence.mean(),
    }, Cause("the result is not the mean cross-entropy of the raw logits over the real targets",
             FLAT))
