"""Configurations of paper 002's families, and their presets.

- `DependencyTransformerGrammarConfig`: Dependency Transformer Grammars, grammars "dtg" (arc-standard),
  "dtg_eager", "dtg_swift" (dependency_grammars.py).
- `DependencyTransformerXLConfig`: TXL (trans), their Transformer-XL baseline over the arc-standard transitions.
Beside the shared backbone's fields (configuration_slm.SyntacticTransformerConfig): the id layout of a
DependencyTokenizer, the variant and what an arc position reads. The model classes are in dependency_model.py.

Hub code: copied into every checkpoint; imports nothing from hf_slm.
"""

from .configuration_slm import SyntacticTransformerConfig, family_auto_classes
from .dependency_grammars import DTG_GRAMMARS, TXL_TRANS_GRAMMARS
from functools import partial

from .preset_settings import BLLIP, PTB_SYNTACTIC, TINY, preset

ARC_REPRESENTATIONS = ("w+arc", "arc", "w")  # paper 002, Table 4
DEPENDENCY_VARIANTS = ("paper", "reference")
# The hub files of these families' classes (their Auto classes name them: config.auto_map).
_CONFIG_FILE, _MODEL_FILE = "dependency_config", "dependency_model"


class DependencyTransformerGrammarConfig(SyntacticTransformerConfig):
    """Dependency Transformer Grammars (paper 002): grammars "dtg" (arc-standard), "dtg_eager", "dtg_swift"
    (modeling/dependency_grammars.py), over a DependencyTokenizer's vocabulary.

    Args (besides SyntacticTransformerConfig's; its nonterminal ranges are unused):
        root_token_id, left_arc_start, left_arc_stop, right_arc_start, right_arc_stop, pop_token_id,
            continuation_ids: the id layout (dependency_grammars.DependencyLayout, a DependencyTokenizer's
            `action_layout`): `<root>`, LA[1..K], RA[1..K], POP, and the pieces that continue a word.
        layout_bos_token_id: the layout's `<s>` id (the grammar's BOS kind; default: the given bos_token_id). The
            HF `bos_token_id` is the start of every sequence, as the tokenizer's `bos_token`: `<root>` in the
            paper's variant, `<s>` in the reference one.
        dependency_variant: "paper", or "reference" (arc-standard as in the authors' released code).
        arc_representation: what an arc position reads (paper 002, section 3.3 and Table 4): "w+arc" (the arc's
            embedding plus that of the head word's last piece), "arc" (the arc's only) or "w" (the head's only).
    """

    model_type = "dependency_transformer_grammar"
    grammar_classes = DTG_GRAMMARS
    auto_classes = family_auto_classes("DependencyTransformerGrammar", _CONFIG_FILE, _MODEL_FILE)

    def __init__(self, root_token_id=4, left_arc_start=5, left_arc_stop=6, right_arc_start=6, right_arc_stop=7,
                 pop_token_id=7, continuation_ids=None, dependency_variant="paper", arc_representation="w+arc",
                 layout_bos_token_id=None, **kwargs):
        if dependency_variant not in DEPENDENCY_VARIANTS:
            raise ValueError(f"dependency_variant must be one of {DEPENDENCY_VARIANTS}, got {dependency_variant!r}")
        if arc_representation not in ARC_REPRESENTATIONS:
            raise ValueError(f"arc_representation must be one of {ARC_REPRESENTATIONS}, got {arc_representation!r}")
        if kwargs.get("document_level"):
            rules = self.grammar_classes.get(kwargs.get("grammar") or self.default_grammar_name())
            if rules is not None:
                rules.check_document_level(dependency_variant)
        self.root_token_id, self.pop_token_id = root_token_id, pop_token_id
        self.left_arc_start, self.left_arc_stop = left_arc_start, left_arc_stop
        self.right_arc_start, self.right_arc_stop = right_arc_start, right_arc_stop
        self.continuation_ids = list(continuation_ids or [])
        self.dependency_variant, self.arc_representation = dependency_variant, arc_representation
        # A config written before layout_bos_token_id existed holds the layout's `<s>` in bos_token_id.
        self.layout_bos_token_id = kwargs.get("bos_token_id", 1) if layout_bos_token_id is None \
            else layout_bos_token_id
        kwargs["bos_token_id"] = self.layout_bos_token_id if dependency_variant == "reference" else root_token_id
        super().__init__(**kwargs)


class DependencyTransformerXLConfig(DependencyTransformerGrammarConfig):
    """TXL (trans), paper 002's baseline: a Transformer-XL over DTG's arc-standard transition sequences (grammar
    "txl_trans": causal attention, relative positions i - j, no head embeddings, so arc_representation is
    unused), over a DependencyTokenizer's vocabulary."""

    model_type = "dependency_transformer_xl"
    grammar_classes = TXL_TRANS_GRAMMARS
    auto_classes = family_auto_classes("DependencyTransformerXL", _CONFIG_FILE, _MODEL_FILE)

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


# Paper 002, section 4: its models train with TG's hyper-parameters (16 layers, 252M parameters: the BLLIP
# setting) and "a multiplier of 2.0 to the learning rate of embedding weights" (hf_slm.training.train.make_optimizer;
# the embedding is tied to the output layer, so that one matrix gets it). The paper states it for the models it
# trains, baselines not excepted, so the TXL (trans) twins keep it: a twin differs in its grammar only. The
# other presets' multiplier is 1.0 (no separate embedding learning rate, as TG).
_EMBEDDING_LR_X2 = dict(embedding_learning_rate_multiplier=2.0)

# Paper 002's released code (a PyTorch Transformer-XL) computes its feed-forward block with ReLU.
_preset = partial(preset, model={"hidden_act": "relu"})

# DTG (paper 002); --set grammar=dtg_eager or dtg_swift for DTG-eager / DTG-swift with the same settings.
DEPENDENCY_TRANSFORMER_GRAMMAR_PRESETS = {
    "dtg-ptb": _preset(PTB_SYNTACTIC, "dtg", "DTG, tg-ptb's setting, embedding LR x2 (paper 002, section 4)",
                      **_EMBEDDING_LR_X2),
    "dtg-bllip": _preset(BLLIP, "dtg", "DTG, paper 002's setting: tg-bllip's (252M parameters), embedding LR x2",
                        **_EMBEDDING_LR_X2),
    "dtg-tiny": _preset(TINY, "dtg", "DTG for CPUs: 4 layers, d 128 (the quickstart's sizes), embedding LR x2",
                       **_EMBEDDING_LR_X2),
}
DEPENDENCY_TRANSFORMER_XL_PRESETS = {
    "txl-trans-ptb": _preset(PTB_SYNTACTIC, "txl_trans", "TXL (trans) twin of dtg-ptb", **_EMBEDDING_LR_X2),
    "txl-trans-bllip": _preset(BLLIP, "txl_trans", "TXL (trans) twin of dtg-bllip (paper 002's baseline)",
                              **_EMBEDDING_LR_X2),
    "txl-trans-tiny": _preset(TINY, "txl_trans", "TXL (trans) twin of dtg-tiny", **_EMBEDDING_LR_X2),
}


DependencyTransformerGrammarConfig._auto_class = "AutoConfig"
DependencyTransformerXLConfig._auto_class = "AutoConfig"
