"""Configurations of paper 000's families, and their presets.

- `TransformerGrammarConfig`: Transformer Grammars, grammar "tg" (transformer_grammars.py), and paper 000's
  variant "tg_txl_positions" (TG (TXL mem. & rel. pos.), Table 2).
- `TransformerXLConfig`: the Transformer-XL baselines over the same actions ("choe_charniak", TXL (CC)) or over
  words only ("terminals", TXL (terminals)).
Every field is the shared backbone's (configuration_slm.SyntacticTransformerConfig); the model classes are in
transformer_grammar_model.py.

Hub code: copied into every checkpoint; imports nothing from hf_slm.
"""

from .configuration_slm import SyntacticTransformerConfig, family_auto_classes
from functools import partial

from .preset_settings import BLLIP, PTB_SYNTACTIC, PTB_TERMINALS, TINY, preset
from .transformer_grammars import TRANSFORMER_GRAMMAR_GRAMMARS, TRANSFORMER_XL_GRAMMARS

# The hub files of these families' classes (their Auto classes name them: config.auto_map).
_CONFIG_FILE, _MODEL_FILE = "transformer_grammar_config", "transformer_grammar_model"


class TransformerGrammarConfig(SyntacticTransformerConfig):
    """Transformer Grammars (paper 000): grammar "tg", STACK/COMPOSE attention, depth relative positions; grammar
    "tg_txl_positions", the same attention with relative positions i - j (Table 2's TG (TXL mem. & rel. pos.))."""

    model_type = "transformer_grammar"
    grammar_classes = TRANSFORMER_GRAMMAR_GRAMMARS
    auto_classes = family_auto_classes("TransformerGrammar", _CONFIG_FILE, _MODEL_FILE)

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


class TransformerXLConfig(SyntacticTransformerConfig):
    """Transformer-XL language models, paper 000's baselines: causal attention with relative position i - j
    over the TG actions ("choe_charniak": TXL (CC)) or over words only ("terminals": TXL (terminals))."""

    model_type = "slm_transformer_xl"
    grammar_classes = TRANSFORMER_XL_GRAMMARS
    auto_classes = family_auto_classes("TransformerXL", _CONFIG_FILE, _MODEL_FILE)

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


# Paper 000's reference computes its feed-forward block with jax.nn.gelu, the tanh approximation by default, and
# drops its embeddings out twice: the embedding dropout, then the core dropout.
_preset = partial(preset, model={"hidden_act": "gelu_pytorch_tanh", "core_dropout_on_embeddings": True})


# Each family's presets (hf_slm/families records name them; hf_slm.all_presets() lists every family's). Paper 000's PTB
# models read words, the rare ones as Berkeley unknown-word classes (section 3): a tokenizer `hf-slm train` trains for
# them builds that vocabulary (training "pieces"), unless the command asks for pieces (--pieces, --vocab-size).
_PTB_WORDS = {"pieces": "words"}
TRANSFORMER_GRAMMAR_PRESETS = {
    "tg-ptb": _preset(PTB_SYNTACTIC, "tg", "TG, PTB setting of paper 000 (Figure 9): 16 layers, d 192, ~12M parameters",
                     **_PTB_WORDS),
    "tg-bllip": _preset(BLLIP, "tg", "TG, BLLIP-LG setting of paper 000: 16 layers, d 1024, 251,887,616 parameters"),
    # Table 2's TG (TXL mem. & rel. pos.) (section 3.5), in TG's settings: relative positions i - j and, on
    # documents, Transformer-XL's memory (the grammar's default memory update)
    "tg-txl-positions-ptb": _preset(PTB_SYNTACTIC, "tg_txl_positions",
                                   "TG (TXL mem. & rel. pos.) of paper 000's Table 2, tg-ptb's settings", **_PTB_WORDS),
    "tg-txl-positions-bllip": _preset(BLLIP, "tg_txl_positions",
                                     "TG (TXL mem. & rel. pos.) of paper 000's Table 2, tg-bllip's settings"),
    "tg-tiny": _preset(TINY, "tg", "TG for CPUs: 4 layers, d 128 (the quickstart's sizes), 200 warm-up steps"),
}
TRANSFORMER_XL_PRESETS = {
    "txl-cc-ptb": _preset(PTB_SYNTACTIC, "choe_charniak", "TXL (CC) twin of tg-ptb", **_PTB_WORDS),
    "txl-terminals-ptb": _preset(PTB_TERMINALS, "terminals", "TXL (terminals) twin of tg-ptb (its own dropouts and LR)",
                                **_PTB_WORDS),
    "txl-cc-bllip": _preset(BLLIP, "choe_charniak", "TXL (CC) twin of tg-bllip"),
    "txl-terminals-bllip": _preset(BLLIP, "terminals", "TXL (terminals) twin of tg-bllip"),
    "txl-cc-tiny": _preset(TINY, "choe_charniak", "TXL (CC) twin of tg-tiny"),
    "txl-terminals-tiny": _preset(TINY, "terminals", "TXL (terminals) twin of tg-tiny"),
}


TransformerGrammarConfig._auto_class = "AutoConfig"
TransformerXLConfig._auto_class = "AutoConfig"
