"""The configuration every hf-slm model extends, with a grammar or without one (SOM).

`SyntacticModelConfig` holds what any language model of the project configures whatever it reads: the vocabulary's
size and fingerprint, the special ids, tied embeddings, and the Auto classes a checkpoint serves. Its subclasses:
- `configuration_slm.SyntacticGrammarConfig`, a model over a grammar's actions (the grammar, the id layout, word
  boundaries, the longest sequence), which RNNG's config and, through `SyntacticTransformerConfig`, every Transformer
  family's extend;
- SOM's config (configuration_som.py), a recurrent model of words, which has no grammar and no longest sequence.
`check_whole_numbers` checks a config's size fields for all of them.

Hub code: copied into every checkpoint; imports only transformers.
"""

from typing import Any

from transformers import PreTrainedConfig


def check_whole_numbers(fields: dict[str, Any], minimum: int = 1) -> None:
    """ValueError naming the first of `fields` ({name: value}) that is not a whole number >= `minimum`."""
    for name, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")


class SyntacticModelConfig(PreTrainedConfig):
    """What every hf-slm model configures (module docstring); use a family's subclass.

    Args:
        vocab_size: the number of token ids (actions of a grammar, or words and pieces).
        pad_token_id, bos_token_id, eos_token_id, unk_token_id: the tokenizer's special ids (unk None: no unknown id).
        vocabulary_fingerprint: the `vocabulary_fingerprint` of the tokenizer the model was trained with (None:
            unknown); a tokenizer with another vocabulary is refused even if its ids agree.
        tie_word_embeddings: the output layer shares the input embeddings.
    """

    model_type = "syntactic_model"
    # Auto class -> "file.Class": every Auto class a checkpoint serves, each family's (family_auto_classes). A type
    # comment, not an annotation: transformers makes a config's annotated attributes dataclass fields.
    auto_classes = {}  # type: dict[str, str]

    def __init__(self, vocab_size: int = 32768, pad_token_id: int = 0, bos_token_id: int = 1, eos_token_id: int = 2,
                 unk_token_id: int | None = None, vocabulary_fingerprint: str | None = None,
                 tie_word_embeddings: bool = True, **kwargs: Any) -> None:
        check_whole_numbers({"vocab_size": vocab_size})
        self.vocab_size = vocab_size
        self.unk_token_id = unk_token_id
        self.vocabulary_fingerprint = vocabulary_fingerprint
        # Every Auto class a checkpoint serves, for trust_remote_code loading without hf_slm installed
        # (transformers records only the saved class by itself). This class's own entries replace a loaded
        # config's: a checkpoint saved by older code names the files its classes were in then, and saving it again
        # copies the files they are in now.
        kwargs["auto_map"] = {**(kwargs.get("auto_map") or {}), **self.auto_classes}
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                         tie_word_embeddings=tie_word_embeddings, **kwargs)
