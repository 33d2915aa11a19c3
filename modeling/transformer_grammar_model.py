"""Paper 000's families as transformers models: Transformer Grammars and the Transformer-XL baselines.

Thin classes over the shared ones (modeling_slm.py): their grammars (transformer_grammars.py) expand actions into
positions, and they read nothing beside the action ids, so no family hook is needed.

Hub code: imports only torch, transformers and its sibling files.
"""

from .modeling_slm import SyntacticTransformerForCausalLM, SyntacticTransformerModel
from .transformer_grammar_config import TransformerGrammarConfig, TransformerXLConfig


class TransformerGrammarModel(SyntacticTransformerModel):
    """Transformer Grammar (paper 000) backbone: see SyntacticTransformerModel."""

    config_class = TransformerGrammarConfig


class TransformerGrammarForCausalLM(SyntacticTransformerForCausalLM):
    """Transformer Grammar (paper 000) language model: see SyntacticTransformerForCausalLM."""

    config_class = TransformerGrammarConfig
    base_model_class = TransformerGrammarModel


class TransformerXLModel(SyntacticTransformerModel):
    """Transformer-XL baseline backbone (TXL (CC) / TXL (terminals)): see SyntacticTransformerModel."""

    config_class = TransformerXLConfig


class TransformerXLForCausalLM(SyntacticTransformerForCausalLM):
    """Transformer-XL baseline language model (TXL (CC) / TXL (terminals)): see SyntacticTransformerForCausalLM."""

    config_class = TransformerXLConfig
    base_model_class = TransformerXLModel


# save_pretrained copies this file, its sibling imports and its config's file into every checkpoint (hub_code.py),
# and config.auto_map names all the Auto classes (configuration_slm.family_auto_classes), so that
# AutoModel / AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True) work without hf_slm.
for _model, _causal_lm in ((TransformerGrammarModel, TransformerGrammarForCausalLM),
                          (TransformerXLModel, TransformerXLForCausalLM)):
    _model._auto_class = "AutoModel"
    _causal_lm._auto_class = "AutoModelForCausalLM"
