"""Paper 001's family: Syntactic Ordered Memory (eSOM, dSOM), a recurrent model with its own parser; no grammar."""

from ...option_types import positive_int
from ..registry import Family, Variant, register_family

# `hf-slm train`'s options of SOM presets (hf_slm/families/ordered_memory/training.py's SomTrainingSetup fields): where
# the gold trees of the structural loss come from, the oracle ablation, and the word vocabulary's threshold.
TRAIN_OPTIONS = (
    ("--gold-tree", {
        "choices": ["dependency", "constituency", "left_branching"],
        "help": "the gold tree of the structural loss: 'dependency' (default, the paper's: each head with its "
                "dependents one constituent, from CoNLL-U files, or from PTB trees with --convert-to-dependencies), "
                "'constituency' (PTB trees, paper 001 Appendix B.1) or 'left_branching' (Table 2's ablation); "
                "--train and --eval then hold CoNLL-U files or PTB tree files"}),
    ("--convert-to-dependencies", {
        "action": "store_true",
        "help": "read PTB tree files as dependency trees, converted by Collins-style head rules "
                "(hf_slm/data/dependency_conversion.py; not the paper's CoreNLP UD conversion)"}),
    ("--oracle-trees", {
        "action": "store_true",
        "help": "Table 2's '- Predicted tree + Gold tree' (paper 001): the memory follows the gold tree's decisions "
                "instead of the parser's, in training and whenever the model is evaluated against gold trees "
                "(hf-slm eval parse: perplexity given the gold trees, p and p' accuracy); saved in the config as "
                "oracle_trees"}),
    ("--min-count", {
        "type": positive_int,
        "help": "a new word vocabulary keeps words seen this many times (default 2; the others become unknown-word "
                "classes); --pieces or --vocab-size train a piece vocabulary instead"}),
)

SYNTACTIC_ORDERED_MEMORY = register_family(Family(
    name="syntactic_ordered_memory",
    model_type="syntactic_ordered_memory",
    paper="001",
    config_class="hf_slm.modeling.configuration_som:SyntacticOrderedMemoryConfig",
    model_class="hf_slm.modeling.modeling_som:SyntacticOrderedMemoryModel",
    causal_lm_class="hf_slm.modeling.modeling_som:SyntacticOrderedMemoryForCausalLM",
    # words: a subword vocabulary, or the PTB set-up's word vocabulary (the default)
    tokenizer_classes=("hf_slm.tokenization.tokenization_slm:SyntacticTokenizer",
                       "hf_slm.tokenization.tokenization_slm:SyntacticWordTokenizer"),
    variants=(Variant("syntactic_ordered_memory", "Syntactic Ordered Memory (SOM)", "syntactic-ordered-memory",
                      "som.md", tree_format="words", is_grammar=False),),
    presets="hf_slm.families.ordered_memory.training:SOM_TRAINING_PRESETS",
    check_tokenizer="hf_slm.families.ordered_memory.data:check_som_tokenizer",
    train="hf_slm.families.ordered_memory.training:train_som",
    card_details="hf_slm.families.ordered_memory.card:model_details",
    card_values="hf_slm.families.ordered_memory.card:card_values",
    preset_columns="hf_slm.families.ordered_memory.training:som_preset_columns",
    collator="hf_slm.families.ordered_memory.data:collator_for_model",
    scorer="hf_slm.families.ordered_memory.scorer:SyntacticOrderedMemoryScorer",
    # eval parse: UF1 of its incremental parses against gold dependency trees (SyntacticOrderedMemoryScorer)
    evaluations=("ppl", "sg", "blimp", "parse"),
    train_options=TRAIN_OPTIONS,
    training_setup="hf_slm.families.ordered_memory.training:SomTrainingSetup",
    paper_table="hf_slm.families.ordered_memory.paper:PAPER_001",
))
