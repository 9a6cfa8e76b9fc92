"""The bug zoo: each classic Transformer bug (design §5) as a small, explicit source edit.

A `Mutation` names one bug and one place where it can occur: a stage module, or the toolkit
for the bugs that live there (padding, the loss, greedy decoding, the vocabulary). Its
`edits` are (original, mutated) fragments, each of which must occur exactly once in the
current source, so a mutation that no longer matches the code fails loudly instead of
silently testing nothing. `make mutants` (course_tools.mutants) applies each one to a copy of
the source and checks that a test fails; notebook 09 shows the same edits and their
symptoms.

Every mutation is a *silent* bug: the mutated code imports and runs on every input the
tests use, and only computes the wrong thing.
"""

import difflib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from toolkit.outline import STAGES

SRC = Path(__file__).resolve().parents[1]  # the `src` folder that holds stages/ and toolkit/

BUGS = {
    1: "the padding mask hides query rows instead of key columns",
    2: "cross-attention gets no source padding mask",
    3: "target padding is sized before <bos>/<eos> are added, cropping real tokens",
    4: "the causal mask is inverted or off by one",
    5: "scores are scaled by d_k or sqrt(embed_dim) instead of sqrt(head_dim)",
    6: "heads are split or merged with view/reshape but no transpose",
    7: "one head_dim x head_dim projection is shared by every head",
    8: "the positional-encoding frequencies are wrong",
    9: "a softmax is applied to the logits before cross_entropy",
    10: "a decoder residual adds the wrong tensor",
    11: "only one layer is built although num_layers > 1",
    12: "greedy decoding does not grow with its output or only works for batch size 1",
    13: "the vocabulary is ordered by set iteration, which changes with PYTHONHASHSEED",
    14: "a LayerNorm or Linear is created inside forward",
    15: "a fully masked row gives NaN",
    16: "beam search ranks, keeps or moves the wrong hypotheses",
}


class MutationDoesNotApply(ValueError):
    """The catalogue no longer matches the code: fix the fragment, never skip the mutation."""


@dataclass(frozen=True)
class Mutation:
    """One bug, planted in one module by exact find-and-replace edits."""

    bug: int  # its number in BUGS (design §5)
    variant: str  # a short slug saying which form of the bug this is
    module: str  # dotted name, e.g. "stages.stage03_masking" or "toolkit.batching.batches"
    edits: tuple[tuple[str, str], ...]  # (original fragment, mutated fragment)

    @property
    def name(self) -> str:
        """A stable name for reports and `make mutants ONLY=...`."""
        return f"bug{self.bug:02d}-{self.variant}@{self.module.split('.')[-1]}"

    @property
    def path(self) -> Path:
        """Where the module lives, relative to the `src` folder."""
        return Path(*self.module.split(".")).with_suffix(".py")

    def apply(self, source: str) -> str:
        """Plant the bug; refuse if any fragment is missing or ambiguous."""
        for original, mutated in self.edits:
            found = source.count(original)
            if found != 1:
                raise MutationDoesNotApply(
                    f"{self.name}: expected the fragment {original!r} once in {self.path}, "
                    f"found it {found} times: update the catalogue in course_tools/mutations.py"
                )
            source = source.replace(original, mutated)
        return source

    def line(self, source: str) -> int:
        """The line of the first edit, for reports."""
        return source[: source.index(self.edits[0][0])].count("\n") + 1

    def diff(self, src: Path = SRC, context: int = 1) -> str:
        """The bug as a unified diff against the current source."""
        original = (src / self.path).read_text(encoding="utf-8")
        return "".join(difflib.unified_diff(
            original.splitlines(keepends=True), self.apply(original).splitlines(keepends=True),
            f"a/src/{self.path}", f"b/src/{self.path}", n=context))

    def load(self, src: Path = SRC) -> ModuleType:
        """Import the mutated module under a private name, leaving the real one untouched."""
        source = self.apply((src / self.path).read_text(encoding="utf-8"))
        name = f"_mutant_{self.name.replace('-', '_').replace('@', '_')}"
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, None))
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        exec(compile(source, f"<{self.name}>", "exec"), module.__dict__)
        return module


def _stage(number: int) -> str:
    """The dotted module name of a stage, from the one outline of the course."""
    return f"stages.{next(s.module for s in STAGES if s.number == number)}"


def _in_stages(bug: int, variant: str, numbers, edits) -> list[Mutation]:
    """The same bug in every stage where it can occur; `edits` may depend on the stage."""
    return [Mutation(bug, variant, _stage(n), tuple(edits(n) if callable(edits) else edits))
            for n in numbers]


MASKED, POSITIONED, STACKED = range(3, 8), range(4, 8), range(5, 8)


def _query_mask(number: int) -> list[tuple[str, str]]:
    """Classic shape (batch, 1, src_len, 1): pad *queries* are hidden, pad keys stay visible."""
    shape = "[:, None, :, None]" if number == 7 else "[:, :, None]"
    return [("self_attn(x, x, key_padding_mask=src_padding)",
             f"self_attn(x, x, attn_mask=src_padding{shape})")]


def _decoder_residual(number: int) -> list[tuple[str, str]]:
    """The cross-attention residual adds the tensor from before self-attention."""
    # The literal tutorial form, `memory + cross_attn(y, memory)`, adds the encoder output;
    # it only runs when source and target lengths are equal, and the tests use unequal
    # ones, so it would crash rather than compute something wrong. This is its silent
    # relative: a residual that adds a tensor other than its sublayer's own input.
    self_attn = {1: "y = y + self.decoder_self_attn(y, y)",
                 2: "y = y + self.decoder_self_attn(y, y)",
                 3: "y = y + self.decoder_self_attn(y, y, attn_mask=future)",
                 4: "y = y + self.decoder_self_attn(y, y, attn_mask=future)",
                 5: "y = y + self.self_attn(y, y, attn_mask=future)",
                 6: "y = self.norm1(y + self.dropout(self.self_attn(y, y, attn_mask=future)))",
                 7: "y = self.norm1(y + self.dropout(self.self_attn("}
    own_input = self_attn[number]
    return [(own_input, "attended" + own_input[1:]),
            ("self.cross_attn(y, memory", "self.cross_attn(attended, memory")]


_SPLIT = "x = x.view(batch, length, self.num_heads, self.head_dim)"
_SHARED_PROJECTIONS = [
    *((f"self.{p}_proj = nn.Linear(embed_dim, embed_dim)",
       f"self.{p}_proj = nn.Linear(self.head_dim, self.head_dim)") for p in "qkv"),
    *((f"self.split_heads(self.{p}_proj({arg}))", f"self.{p}_proj(self.split_heads({arg}))")
      for p, arg in (("q", "query"), ("k", "key_value"), ("v", "key_value"))),
]
_FREQUENCY = "torch.exp(torch.arange(0, embed_dim, 2) * (-math.log(10000.0) / embed_dim))"
# The classic slip: the odd (cos) dimensions use their own index, 2i + 1, in the exponent.
_ODD_DIMENSION_FREQUENCY = _FREQUENCY.replace("arange(0,", "arange(1,")

CATALOGUE: list[Mutation] = [
    *_in_stages(1, "query-mask", MASKED, _query_mask),
    *_in_stages(2, "no-cross-mask", MASKED, [
        ("self.cross_attn(y, memory, key_padding_mask=src_padding", "self.cross_attn(y, memory")]),
    Mutation(3, "pad-to-word-count", "toolkit.batching.batches", (
        ("pad([tgt for _, tgt in pairs])",
         "pad([tgt for _, tgt in pairs])[:, : max(len(tgt) - 2 for _, tgt in pairs)]"),)),
    *_in_stages(4, "inverted-causal", MASKED, [(".triu(diagonal=1)", ".tril(diagonal=-1)")]),
    *_in_stages(4, "diagonal-hidden", MASKED, [(".triu(diagonal=1)", ".triu(diagonal=0)")]),
    Mutation(5, "scale-by-d_k", _stage(7), (
        ("self.scale = math.sqrt(self.head_dim)", "self.scale = self.head_dim"),)),
    Mutation(5, "scale-by-sqrt-embed_dim", _stage(7), (
        ("self.scale = math.sqrt(self.head_dim)",
         "self.scale = math.sqrt(self.num_heads * self.head_dim)"),)),
    Mutation(6, "split-without-transpose", _stage(7), (
        (_SPLIT, "x = x.view(batch, self.num_heads, length, self.head_dim)"),
        ("return x.transpose(1, 2)  # (batch, heads, len, head_dim)", "return x"))),
    Mutation(6, "merge-without-transpose", _stage(7), (
        ("x.transpose(1, 2).reshape(batch, length, -1)", "x.reshape(batch, length, -1)"),)),
    Mutation(7, "shared-head-projection", _stage(7), tuple(_SHARED_PROJECTIONS)),
    *_in_stages(8, "doubled-exponent", POSITIONED, [
        (_FREQUENCY, _FREQUENCY.replace("torch.arange(0, embed_dim, 2)",
                                        "2 * torch.arange(0, embed_dim, 2)"))]),
    *_in_stages(8, "cos-frequency-mismatch", POSITIONED, [
        ("torch.cos(position * frequency)", f"torch.cos(position * {_ODD_DIMENSION_FREQUENCY})")]),
    Mutation(9, "double-softmax", "toolkit.objectives", (
        ("logits.reshape(-1, logits.size(-1))",
         "logits.softmax(-1).reshape(-1, logits.size(-1))"),)),
    *_in_stages(10, "residual-skips-own-input", range(1, 8), _decoder_residual),
    *_in_stages(11, "one-encoder-layer", STACKED, [
        ("for _ in range(num_encoder_layers)", "for _ in range(1)")]),
    *_in_stages(11, "one-decoder-layer", STACKED, [
        ("for _ in range(num_decoder_layers)", "for _ in range(1)")]),
    # The "causal mask not rebuilt as the output grows" form cannot occur in greedy.py:
    # every step calls the model on the whole prefix, and the model builds its masks inside
    # forward. Its analogue in the cached decoder is a cache that does not grow.
    Mutation(12, "stops-when-any-row-ends", "toolkit.search.greedy", (
        ("if going.numel() == 0:", "if going.numel() < live.numel():"),)),
    Mutation(12, "first-row-token-for-all", "toolkit.search.greedy", (
        ("next_logits(tokens, step).argmax(dim=-1)",
         "next_logits(tokens, step)[:1].argmax(dim=-1).expand(live.numel())"),)),
    Mutation(12, "cache-not-grown", "toolkit.search.cached_decoding", (
        ("return self.keys[:, :, :end], self.values[:, :, :end]", "return k, v"),)),
    Mutation(13, "set-order", "toolkit.text.vocab", (
        ("ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))",
         "ranked = [(token, counts[token]) for token in set(counts)]"),)),
    *_in_stages(14, "linear-in-forward", range(1, 8), [
        ("return self.out_proj(y)",
         "return nn.Linear(y.size(-1), self.out_proj.out_features)(y)")]),
    *_in_stages(14, "layernorm-in-forward", range(6, 8), [
        ("x = self.norm1(x + ", "x = nn.LayerNorm(x.size(-1))(x + ")]),
    *_in_stages(15, "minus-infinity-fill", MASKED, [
        ("torch.finfo(scores.dtype).min)", 'float("-inf"))')]),
    # Planted by hand while beam search was built; each one still decodes every sentence.
    Mutation(16, "finished-left-in-the-beam", "toolkit.search.beam_search", (
        ("goes_on = real & ~ends", "goes_on = real.clone()"),)),
    Mutation(16, "penalty-without-eos", "toolkit.search.beam_search", (
        ("log_prob / length_penalty(length, alpha)",
         "log_prob / length_penalty(len(ids), alpha)"),)),
    Mutation(16, "penalty-ranks-live-hypotheses", "toolkit.search.beam_search", (
        ("log_probs = best.gather(1, order)",
         "log_probs = (best / length_penalty(length, alpha)).gather(1, order)"),)),
    Mutation(16, "beams-leak-between-sentences", "toolkit.search.beam_search", (
        ("rows = (keep[:, None] * width + beam[keep]).reshape(-1)",
         "rows = beam[keep].reshape(-1)"),)),
    Mutation(16, "top-k-across-sentences", "toolkit.search.beam_search", (
        (".view(live.numel(), -1)", ".view(-1, live.numel()).t()"),)),
    Mutation(16, "cache-not-reordered", "toolkit.search.cached_decoding", (
        ("        self.cache.select(rows, regrouped)",
         "        if regrouped:\n            self.cache.select(rows, regrouped)"),)),
    # What the explicit `regrouped` replaced: moving the cross-attention keys only when the
    # row count changes misses sentences leaving as the beams grow, the count unchanged.
    Mutation(16, "cross-keys-moved-by-count", "toolkit.search.cached_decoding", (
        ("if fixed.projected is not None and regrouped:",
         "if fixed.projected is not None and rows.numel() != fixed.projected[0].size(0):"),)),
]


def find(name: str) -> Mutation:
    """Look a mutation up by its printed name, e.g. 'bug04-inverted-causal@stage03_masking'."""
    for mutation in CATALOGUE:
        if mutation.name == name:
            return mutation
    raise KeyError(f"no mutation named {name!r}; see course_tools.mutations.CATALOGUE")
