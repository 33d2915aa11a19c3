"""Each family's presets compute what its paper's released code computes (issue 39, section 1), with values written
out by hand: the feed-forward activation (paper 000's reference: jax.nn.gelu, the tanh approximation; paper 002's:
ReLU; paper 003's GPT-2: gelu_new, the tanh approximation), configs saved before the field keeping the exact GELU
they computed; paper 000's embeddings dropped out twice (the embedding dropout, then the core dropout); and the clip
range of relative positions i - j covering a segment and its memory (L + M), as the reference's sinusoids do."""

import pytest
import torch

from hf_slm.families import all_presets, config_for_grammar
from hf_slm.modeling.backbone import SyntacticTransformerLayer
from hf_slm.modeling.configuration_slm import config_fields
from hf_slm.modeling.transformer_grammar_config import TransformerGrammarConfig

# GELU at 1.0, -0.5 and 2.0: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) and 0.5 x (1 + erf(x / sqrt(2)))
TANH_GELU = [0.8411919906082768, -0.15428599017485606, 1.954597694087775]
EXACT_GELU = [0.8413447460685429, -0.15426876936299344, 1.9544997361036416]
RELU = [1.0, 0.0, 2.0]


@pytest.mark.parametrize("hidden_act,expected", [("gelu_pytorch_tanh", TANH_GELU), ("gelu", EXACT_GELU),
                                                 ("relu", RELU)])
def test_the_feed_forward_block_computes_its_activation(hidden_act, expected):
    config = TransformerGrammarConfig(hidden_size=3, num_attention_heads=1, intermediate_size=3, num_hidden_layers=1,
                                      hidden_act=hidden_act)
    layer = SyntacticTransformerLayer(config, unrestricted_layer=False).eval()
    with torch.no_grad():  # W1 = I, W2 = 2 I, b2 = 1: the block gives 2 act(x) + 1
        for linear, scale, bias in ((layer.ffn_in, 1.0, 0.0), (layer.ffn_out, 2.0, 1.0)):
            linear.weight.copy_(scale * torch.eye(3))
            linear.bias.fill_(bias)
        out = layer.feed_forward(torch.tensor([[1.0, -0.5, 2.0]]))
    assert out[0].tolist() == pytest.approx([2 * value + 1 for value in expected], abs=1e-6)
    if hidden_act != "gelu":  # the approximation differs from the exact form by more than float32 rounding
        assert out[0].tolist() != pytest.approx([2 * value + 1 for value in EXACT_GELU], abs=1e-6)


def test_a_config_saved_before_the_field_keeps_the_exact_gelu_and_an_unknown_one_is_refused():
    saved = TransformerGrammarConfig(hidden_size=8, num_attention_heads=2).to_dict()
    del saved["hidden_act"]  # what config.json held before the field
    assert TransformerGrammarConfig.from_dict(saved).hidden_act == "gelu"
    with pytest.raises(ValueError, match=r"hidden_act must be one of .*'gelu_pytorch_tanh'.* got 'swish'"):
        TransformerGrammarConfig(hidden_act="swish")


# The activation of each paper's released code (its family record's paper)
RELEASED_ACTIVATION = {"000": "gelu_pytorch_tanh", "002": "relu", "003": "gelu_pytorch_tanh"}


def test_every_transformer_preset_takes_its_papers_activation():
    checked = set()
    for name, (family, chosen) in all_presets().items():
        if family.paper in RELEASED_ACTIVATION and "hidden_act" in config_fields(family.config_class):  # a Transformer
            assert chosen["model"]["hidden_act"] == RELEASED_ACTIVATION[family.paper], name
            checked.add(family.paper)
    assert checked == set(RELEASED_ACTIVATION)


SMALL = dict(hidden_size=8, num_attention_heads=2, max_sequence_length=16)


@pytest.mark.parametrize("grammar,hybrid,field", [("choe_charniak", {}, "max_relative_position"),
                                                  ("terminals", {}, "max_relative_position"),
                                                  ("tg", {"num_unrestricted_heads": 1}, "max_sequence_length"),
                                                  ("tg", {"num_unrestricted_layers": 1}, "max_sequence_length")])
def test_segments_whose_reach_exceeds_the_clip_range_are_refused(grammar, hybrid, field):
    """L = 10, M = 8: a position attends up to 18 positions, distances 0..17; max_sequence_length 16 clips at 15."""
    with pytest.raises(ValueError, match=rf"run to 17, beyond their clip range \({field} .*raise {field} to 1[78] "):
        config_for_grammar(grammar=grammar, segment_length=10, memory_length=8, **SMALL, **hybrid)
    # the range follows L + M once the field allows it; M = L when not given: 2 L - 1 = 15 fits
    wider = {"max_relative_position": 17} if field == "max_relative_position" else {"max_sequence_length": 18}
    config_for_grammar(grammar=grammar, segment_length=10, memory_length=8, **dict(SMALL, **wider), **hybrid)
    config_for_grammar(grammar=grammar, segment_length=8, **SMALL, **hybrid)


def test_tg_without_hybrid_heads_reads_depths_and_takes_any_segment():
    """TG's own heads read depth differences clipped to [-1, 62], as the reference: segments never change them."""
    config = config_for_grammar(grammar="tg", segment_length=10, memory_length=8, **SMALL)
    assert (config.min_relative_position, config.max_relative_position) == (-1, 62)


@pytest.mark.parametrize("twice,zeroed", [(True, 0.75), (False, 0.5)])
def test_paper_000s_embeddings_are_dropped_out_by_both_rates(twice, zeroed):
    """Embedding dropout 0.5, core dropout 0.5: dropped twice, 1 - 0.5 * 0.5 = 75% of the embedding values are zero and
    the others are scaled by 1 / 0.25 (the reference's); once, 50% and 1 / 0.5."""
    from hf_slm.families import causal_lm_for_config

    config = config_for_grammar(grammar="terminals", vocab_size=40, hidden_size=64, num_attention_heads=2,
                                num_hidden_layers=1, intermediate_size=16, embedding_dropout=0.5, core_dropout=0.5,
                                core_dropout_on_embeddings=twice)
    torch.manual_seed(0)
    model = causal_lm_for_config(config).train()
    ids = torch.tensor([[1] + [5] * 199])  # one word's embedding 199 times: 12,736 values of one known vector
    embedded = model(input_ids=ids, output_hidden_states=True).hidden_states[0][0, 1:]
    assert (embedded == 0).float().mean().item() == pytest.approx(zeroed, abs=0.02)
    kept = embedded != 0
    scale = embedded[kept] / model.model.decoder.embed_tokens.weight[5].expand_as(embedded)[kept]
    assert scale.detach() == pytest.approx(torch.full_like(scale, 1 / (1 - zeroed)), rel=1e-5)

