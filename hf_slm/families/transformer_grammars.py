"""Paper 000's families: Transformer Grammars, and its Transformer-XL baselines over the same actions (TXL (CC))
or over words only (TXL (terminals))."""

from .registry import Family, Variant, register_family

_CONFIGS = "hf_slm.modeling.transformer_grammar_config"
_MODELS = "hf_slm.modeling.transformer_grammar_model"
# A word vocabulary with Berkeley unknown-word classes (the PTB set-up of the papers), or SentencePiece (the default).
# Figure 9 beside both families' presets
_PAPER_TABLE = "hf_slm.families.transformer_grammar_paper:PAPER_000"
_TOKENIZERS = ("hf_slm.tokenization.tokenization_slm:SyntacticWordTokenizer",
               "hf_slm.tokenization.tokenization_slm:SyntacticTokenizer")

TRANSFORMER_GRAMMAR = register_family(Family(
    name="transformer_grammar",
    model_type="transformer_grammar",
    paper="000",
    config_class=f"{_CONFIGS}:TransformerGrammarConfig",
    model_class=f"{_MODELS}:TransformerGrammarModel",
    causal_lm_class=f"{_MODELS}:TransformerGrammarForCausalLM",
    tokenizer_classes=_TOKENIZERS,
    variants=(Variant("tg", "Transformer Grammar (TG)", "transformer-grammar", "tg.md"),
              # Table 2's TG (TXL mem. & rel. pos.): TG's attention, Transformer-XL's relative positions and memory
              Variant("tg_txl_positions", "TG (TXL mem. & rel. pos.)", "transformer-grammar", "tg_txl_positions.md")),
    grammar_classes="hf_slm.modeling.transformer_grammars:TRANSFORMER_GRAMMAR_GRAMMARS",
    presets=f"{_CONFIGS}:TRANSFORMER_GRAMMAR_PRESETS",
    paper_table=_PAPER_TABLE,
))

TRANSFORMER_XL = register_family(Family(
    name="transformer_xl",
    model_type="slm_transformer_xl",
    paper="000",
    config_class=f"{_CONFIGS}:TransformerXLConfig",
    model_class=f"{_MODELS}:TransformerXLModel",
    causal_lm_class=f"{_MODELS}:TransformerXLForCausalLM",
    tokenizer_classes=_TOKENIZERS,
    variants=(
        Variant("choe_charniak", "TXL (CC)", "txl-cc", "txl_cc.md"),
        # trained on trees' words; scores and writes words
        Variant("terminals", "TXL (terminals)", "txl-terminals", "txl_terminals.md", syntactic=False,
                tree_format="words"),
    ),
    grammar_classes="hf_slm.modeling.transformer_grammars:TRANSFORMER_XL_GRAMMARS",
    presets=f"{_CONFIGS}:TRANSFORMER_XL_PRESETS",
    paper_table=_PAPER_TABLE,
))
