"""Turning a trained model into text: greedy decoding, the key-value cache, the paper's beam
search, and sampling from a decoder-only model."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.search import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "beam_search": ["length_penalty", "sentence_log_probs"],
    "decoding": ["PAPER_BEAM_SIZE", "PAPER_EXTRA_LEN", "PAPER_LENGTH_PENALTY", "translate"],
    "sampling": ["sample", "truncate"],
    "stream_decoding": ["stream_greedy_decode"],
})
