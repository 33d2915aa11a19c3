"""A tiny model's sizes for any registered grammar: whichever of them its family's config takes (a Transformer's
widths and heads, a recurrent family's embedding size), so that one parametrized test builds every family's."""

from hf_slm.families import family_for_grammar
from hf_slm.modeling.configuration_slm import config_fields

TINY_SIZES = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, embedding_size=16)


def tiny_sizes(grammar, **sizes):
    """TINY_SIZES (updated with `sizes`) that the config of `grammar`'s family knows."""
    fields = config_fields(family_for_grammar(grammar).config_class)
    return {name: value for name, value in dict(TINY_SIZES, **sizes).items() if name in fields}
