"""What the model card of a paper 003 checkpoint says (the compositional family's card_details and card_values;
hf_slm/publishing/model_card.py renders model_cards/compositional.md and gpt2_token.md with them)."""

from .compositional import VARIANT_NAMES
from .registry import grammar_class

# Paper 003's four options (section 2), as a card states them: grammar attribute -> (aspect, (when true, when false)).
COMPOSITIONAL_OPTIONS = {
    "binary": ("tree form (section 2.1)",
               ("Bi: binary trees: unary chains removed, then left-binarized (Chomsky normal form)",
                "Nb: non-binary trees, unary chains removed")),
    "top_down": ("linearization (section 2.2)",
                 ("Dn: top-down, a `(` opens and a `)` closes each constituent",
                  "Up: bottom-up, only `)`, each closing the items on top of the stack")),
    "internal": ("composition (section 2.3)",
                 ("In: internal, by the main Transformer: each `)` is input twice, the first copy attends only its "
                  "constituent and composes it, the second predicts the next action",
                  "Ex: external, by a small separate Transformer over the children's representations, whose output is "
                  "the `)` position's input")),
    "masked": ("masking (section 2.4)",
               ("M: once composed, a constituent's children are masked from every later position",
                "Nm: composed children stay visible to later positions")),
}


def compositional_options(config):
    """(aspect, this model's choice, the other choice) for each of paper 003's four options, or None for a grammar
    that is not one of its sixteen variants (a baseline)."""
    if config.get("grammar") not in VARIANT_NAMES:
        return None
    rules = grammar_class(config["grammar"])
    rows = []
    for name, (aspect, (when_true, when_false)) in COMPOSITIONAL_OPTIONS.items():
        chosen, other = (when_true, when_false) if getattr(rules, name) else (when_false, when_true)
        rows.append((aspect, chosen, other))
    return rows


def composer_rows(config):
    """The external composer's row of an Ex variant's "Model details" (section 2.3), none for the others."""
    from ..publishing.model_card import config_value

    if config.get("grammar") not in VARIANT_NAMES or grammar_class(config["grammar"]).internal:
        return []
    return [("external composer", f"a Transformer of {config_value(config, 'composer_num_layers')} layers, "
             f"width {config_value(config, 'composer_hidden_size')}, {config_value(config, 'composer_num_heads')} "
             f"heads, feed-forward {config_value(config, 'composer_intermediate_size')}, with down- and "
             "up-projections")]


def model_details(config, parameters):
    """The shared "Model details" rows and an Ex variant's composer."""
    from ..publishing.model_card import model_details as shared_details

    return shared_details(config, parameters, architecture_rows=composer_rows(config))


def card_values(config):
    """What compositional.md and gpt2_token.md read: the variant's four options, its tree form, its end token."""
    rules = grammar_class(config["grammar"])
    return dict(compositional=compositional_options(config), binary=rules.linearization.startswith("bi-"),
                uses_eos=bool(rules.uses_eos))
