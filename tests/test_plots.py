"""Figures must label what they show with the real tokens."""

import matplotlib

matplotlib.use("Agg")  # only in this test process; notebooks keep their inline backend

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from toolkit.figures.diagram import model_diagram  # noqa: E402
from toolkit.figures.plots import attention_heatmap, loss_curve  # noqa: E402
from toolkit.learning.training import History  # noqa: E402


def test_heatmap_axes_carry_the_actual_tokens():
    weights = torch.softmax(torch.randn(3, 5), dim=-1)
    queries, keys = ["<bos>", "Der", "Hund"], ["The", "dog", "sleeps", ".", "<eos>"]
    ax = attention_heatmap(weights, queries, keys)
    assert [t.get_text() for t in ax.get_xticklabels()] == keys
    assert [t.get_text() for t in ax.get_yticklabels()] == queries
    plt.close("all")


def test_mask_heatmap_labels_tokens_and_shows_hidden_cells():
    from toolkit.figures.plots import mask_heatmap

    mask = torch.ones(3, 3, dtype=torch.bool).triu(1)
    ax = mask_heatmap(mask, ["<bos>", "Der", "Hund"], ["<bos>", "Der", "Hund"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["<bos>", "Der", "Hund"]
    assert ax.collections[0].get_array().reshape(3, 3).tolist() == mask.float().tolist()
    plt.close("all")


def test_heatmap_refuses_tokens_that_do_not_match_the_weights():
    with pytest.raises(ValueError, match="3 query and 4 key tokens"):
        attention_heatmap(torch.rand(3, 5), ["a", "b", "c"], ["w", "x", "y", "z"])


def test_loss_curve_plots_every_step():
    history = History(losses=[3.0 / (i + 1) for i in range(100)])
    ax = loss_curve(history)
    raw, smooth = ax.get_lines()
    assert len(raw.get_xdata()) == 100 and len(smooth.get_xdata()) == 100 - 25 + 1
    plt.close("all")


@pytest.mark.parametrize("stage", range(1, 8))
def test_diagram_highlights_exactly_what_the_stage_adds(stage):
    ax = model_diagram(stage)
    labels = " ".join(text.get_text() for text in ax.texts)
    assert ("positional encoding" in labels) == (stage >= 4)
    assert ("feed-forward" in labels) == (stage >= 6)
    assert ("multi-head" in labels) == (stage >= 7)
    assert ("W_O" in labels) == (stage >= 6)  # the output projection arrives with stage 06
    assert ("× N" in labels) == (stage >= 5)
    plt.close("all")


def test_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="stages run from 1 to 7"):
        model_diagram(9)
    with pytest.raises(ValueError, match="stage 08 has no encoder to draw"):
        model_diagram(8)


def test_attention_titles_name_the_layer_and_the_kind():
    from toolkit.figures.plots import _title

    assert _title("decoder_layers.1.cross_attn") == "decoder layer 2: cross-attention"
    assert _title("encoder_layers.0.self_attn") == "encoder layer 1: self-attention"
    assert _title("decoder_self_attn") == "decoder self-attention"


@pytest.mark.parametrize("module", ["stage01_naive_attention", "stage03_masking"])
def test_sentence_attention_labels_every_map_with_its_own_tokens(module):
    import importlib

    from toolkit.figures.plots import sentence_attention
    from toolkit.text.vocab import Vocab

    stage = importlib.import_module(f"stages.{module}")
    src_vocab, tgt_vocab = Vocab(["The", "dog", "sleeps", "."]), Vocab(["Der", "Hund", "."])
    model = stage.Transformer(len(src_vocab), len(tgt_vocab), embed_dim=8)
    figure = sentence_attention(model, ["The", "dog", "sleeps", "."], ["Der", "Hund"],
                                src_vocab, tgt_vocab)
    source, target = ["The", "dog", "sleeps", ".", "<eos>"], ["<bos>", "Der", "Hund"]
    expected = {"encoder self-attention": (source, source),
                "decoder self-attention": (target, target),
                "decoder cross-attention": (target, source)}
    drawn = {ax.get_title(): ([t.get_text() for t in ax.get_yticklabels()],
                              [t.get_text() for t in ax.get_xticklabels()])
             for ax in figure.axes if ax.get_title()}
    assert drawn == expected
    plt.close("all")


def drawn_weights(figure: plt.Figure) -> dict[str, list]:
    """Each heatmap's title and the values it shows."""
    return {ax.get_title(): ax.collections[0].get_array().tolist()
            for ax in figure.axes if ax.get_title()}


def test_sentence_attention_draws_the_same_weights_with_the_sdpa_core_and_cleans_up():
    """The fused kernel returns no weights: plots must fall back to the stage's own attend."""
    from stages import stage07_multi_head as stage07
    from toolkit.figures.plots import sentence_attention
    from toolkit.text.vocab import Vocab
    from toolkit.variants.sdpa import use_sdpa

    src_vocab, tgt_vocab = Vocab(["The", "dog", "sleeps", "."]), Vocab(["Der", "Hund", "."])

    def model(fused: bool) -> stage07.Transformer:
        torch.manual_seed(0)
        built = stage07.Transformer(len(src_vocab), len(tgt_vocab), embed_dim=16, num_heads=4,
                                    ff_dim=40, dropout=0.1)
        return use_sdpa(built) if fused else built

    drawn = {}
    # (fused, training): eval mode is the reference; a model left training (as a notebook
    # does mid-run) must be drawn without dropout all the same, then stay training.
    for fused, training in [(False, False), (False, True), (True, True)]:
        translator = model(fused).train(training)
        figure = sentence_attention(translator, ["The", "dog", "sleeps", "."], ["Der", "Hund"],
                                    src_vocab, tgt_vocab)
        drawn[fused, training] = drawn_weights(figure)
        plt.close("all")
        assert translator.training is training
        attentions = [m for m in translator.modules() if hasattr(m, "keep_attention")]
        assert len(attentions) == 6
        assert all(m.keep_attention is False and m.attention is None for m in attentions)
    assert len(drawn[True, True]) == 6
    assert drawn[True, True] == drawn[False, True] == drawn[False, False]


def test_sentence_attention_says_so_when_the_model_keeps_no_weights():
    from spies import Spy

    from toolkit.figures.plots import sentence_attention
    from toolkit.text.vocab import Vocab

    vocab = Vocab(["a", "b"])
    model = Spy(vocab_size=len(vocab)).train()
    with pytest.raises(ValueError, match="kept no attention weights to draw"):
        sentence_attention(model, ["a"], ["b"], vocab, vocab)
    assert model.training
    plt.close("all")


def test_the_beam_tree_draws_each_kept_hypothesis_under_its_word_with_its_score():
    from toolkit.figures.plots import beam_tree
    from toolkit.search.beam_search import beam_search
    from toolkit.text.vocab import EOS, Vocab
    from toolkit.variants.hand_made import HandMadeModel

    vocab = Vocab(["Der", "Ein", "Hund"])
    model = HandMadeModel({(): {"Der": 0.6, "Ein": 0.4}, ("Der",): {"Hund": 0.4, EOS: 0.6},
                           ("Ein",): {"Hund": 1.0}}, vocab)
    steps = []
    beam_search(model, lambda *move: None, torch.tensor([4]), 2, alpha=1.0, watch=steps.append)
    ax = beam_tree(steps, vocab)
    labels = [t.get_text() for t in ax.texts]
    # <bos>; Der, Ein; Ein Hund (0.4), Der <eos> (0.36, ends among the best two) and Der Hund
    # (0.24, live in its place); then each ends: Ein Hund <eos>, Der Hund <eos>.
    assert labels == ["<bos>", "Der\n-0.51", "Ein\n-0.92", "Hund\n-0.92",
                      "<eos>\n-1.02\nscore -0.88",  # log 0.36 / ((5 + 2) / 6)^1
                      "Hund\n-1.43", "<eos>\n-0.92\nscore -0.69",  # log 0.4 / ((5 + 3) / 6)
                      "<eos>\n-1.43\nscore -1.07"]
    # Each line joins a box to its parent's: Der <eos> and Der Hund hang from Der (height 0),
    # Ein Hund from Ein (-1); at step 3, Ein Hund's <eos> from row 0, Der Hund's from row 2.
    lines = [(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in ax.lines]
    assert lines == [((0, 1), (0, 0)), ((0, 1), (0, -1)),
                     ((1, 2), (-1, 0)), ((1, 2), (0, -1)), ((1, 2), (0, -2)),
                     ((2, 3), (0, 0)), ((2, 3), (-2, -1))]
    plt.close("all")
