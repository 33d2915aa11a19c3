"""Register hf-slm's classes with the transformers Auto factories (done on `import hf_slm`).

With hf_slm installed, AutoConfig / AutoModel / AutoModelForCausalLM / AutoTokenizer load hf-slm
checkpoints from the installed code, without trust_remote_code. Without it, the hub code saved inside each
checkpoint serves the same classes to `trust_remote_code=True`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

from .modeling.configuration_tg import TransformerGrammarConfig
from .modeling.modeling_tg import TransformerGrammarForCausalLM, TransformerGrammarModel
from .tokenization.tokenization_slm import SyntacticTokenizer, SyntacticWordTokenizer


def register_auto_classes():
    AutoConfig.register(TransformerGrammarConfig.model_type, TransformerGrammarConfig, exist_ok=True)
    AutoModel.register(TransformerGrammarConfig, TransformerGrammarModel, exist_ok=True)
    AutoModelForCausalLM.register(TransformerGrammarConfig, TransformerGrammarForCausalLM, exist_ok=True)
    # AutoTokenizer finds a checkpoint's tokenizer by the class name in its tokenizer_config.json among the
    # registered classes; one config maps to one default class, so the word tokenizer is registered first
    # (its name stays known) and the SentencePiece one last (the default).
    AutoTokenizer.register(TransformerGrammarConfig, tokenizer_class=SyntacticWordTokenizer, exist_ok=True)
    AutoTokenizer.register(TransformerGrammarConfig, tokenizer_class=SyntacticTokenizer, exist_ok=True)
