"""From sentence pairs to tensors: padded batches, length buckets, and `load_data`, which
prepares a corpus, its vocabularies and its batches in one call."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.batching import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "batches": ["collate", "encode_source", "encode_target", "endless", "loader", "pad",
                "padding_fraction"],
    "data": ["build_vocabularies", "load_data"],
})
