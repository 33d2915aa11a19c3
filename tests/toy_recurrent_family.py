"""A toy recurrent family, written as a package outside hf-slm would write one (tests/family_cases.py registers it):
an LSTM language model over TXL (CC)'s bracketed actions, Choe and Charniak's parsing as language modeling (2016)
with a plain LSTM. It is the outside-family proof of issue 40 for a model that is not a Transformer: its config
stands on SyntacticGrammarConfig, its LM class on SyntacticGenerationMixin, and its beam search on hf-slm's generic
re-encoding decoder, all through the declared hooks; nothing in hf-slm names it.

The grammar, "toy-lstm", is TXL (CC)'s legality (bracketed trees, top-down), read in order by the LSTM, which needs
no position structure; its collator says so (family_cases.py).

This file is hub code of its own: a checkpoint carries it beside hf-slm's hub files (modeling/hub_code.py), where the
relative imports below find them; with hf-slm installed (the tests) the absolute ones do. Beyond its base classes'
files it imports hf-slm's padding and search_decoders, which the checkpoint must carry too. transformers' import
check skips `try:` blocks, so a checkpoint loads without hf-slm.
"""

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput

try:  # inside a checkpoint: hf-slm's hub files lie beside this one
    from .configuration_base import check_whole_numbers
    from .configuration_slm import SyntacticGrammarConfig
    from .generation_mixin import SyntacticGenerationMixin
    from .grammars import CausalRules, grammar_for_config
    from .hub_code import SavesHubCode
    from .padding import check_padding_at_the_ends, shifted_action_loss
    from .safe_loading import SafetensorsOnlyLoading
    from .search_decoders import ReencodingSearchDecoder
except ImportError:  # imported by the tests, with hf-slm installed
    from hf_slm.modeling.configuration_base import check_whole_numbers
    from hf_slm.modeling.configuration_slm import SyntacticGrammarConfig
    from hf_slm.modeling.generation_mixin import SyntacticGenerationMixin
    from hf_slm.modeling.grammars import CausalRules, grammar_for_config
    from hf_slm.modeling.hub_code import SavesHubCode
    from hf_slm.modeling.padding import check_padding_at_the_ends, shifted_action_loss
    from hf_slm.modeling.safe_loading import SafetensorsOnlyLoading
    from hf_slm.modeling.search_decoders import ReencodingSearchDecoder

# what transformers' generate, the Trainer and users' tools may pass that an LSTM has no use for
IGNORED_INPUTS = ("position_ids", "cache_position", "use_cache", "past_key_values", "cache", "output_attentions",
                  "token_type_ids", "logits_to_keep", "output_hidden_states", "return_dict")


class ActionLSTMRules(CausalRules):
    """TXL (CC)'s legality over bracketed trees, read in order by an LSTM (module docstring)."""

    name = "toy-lstm"
    relative_position_meaning = "none: an LSTM reads the actions in order"
    supports_segments = False


TOY_LSTM_GRAMMARS = {"toy-lstm": ActionLSTMRules}


class ToyLSTMConfig(SyntacticGrammarConfig):
    """The toy's config: SyntacticGrammarConfig's fields, and the LSTM's width and depth."""

    model_type = "toy_action_lstm"
    grammar_classes = TOY_LSTM_GRAMMARS
    auto_classes = {"AutoConfig": "toy_recurrent_family.ToyLSTMConfig",
                    "AutoModel": "toy_recurrent_family.ToyLSTMModel",
                    "AutoModelForCausalLM": "toy_recurrent_family.ToyLSTMForCausalLM"}

    def __init__(self, hidden_size=32, num_hidden_layers=1, **kwargs):
        check_whole_numbers({"hidden_size": hidden_size, "num_hidden_layers": num_hidden_layers})
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        super().__init__(**kwargs)


class ToyLSTMPreTrainedModel(SafetensorsOnlyLoading, SavesHubCode, PreTrainedModel):
    config_class = ToyLSTMConfig
    base_model_prefix = "model"

    def hub_code_objects(self):
        return [self, self.config, self.grammar]

    def _init_weights(self, module):
        if isinstance(module, (nn.LSTM, nn.Embedding)):
            module.reset_parameters()


class ToyLSTMModel(ToyLSTMPreTrainedModel):
    """input_ids [B, T] (action ids, padded on either side) -> last_hidden_state [B, T, H] (zeros at padding)."""

    def __init__(self, config):
        super().__init__(config)
        self.grammar = grammar_for_config(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.lstm = nn.LSTM(config.hidden_size, config.hidden_size, config.num_hidden_layers, batch_first=True)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **unused):
        unknown = sorted(name for name, value in unused.items() if name not in IGNORED_INPUTS and value is not None)
        if unknown or input_ids is None:
            raise ValueError(f"the toy LSTM reads input_ids and attention_mask; got {unknown or 'no input_ids'}")
        keep = input_ids != self.config.pad_token_id if attention_mask is None else attention_mask.bool()
        check_padding_at_the_ends(keep.cpu(), self.config.pad_token_id, attention_mask is not None)
        self.grammar.validate_batch([row[real].tolist() for row, real in zip(input_ids.cpu(), keep.cpu())],
                                    require_complete=False)
        # The LSTM must not read a row's leading padding: read each row moved to the left, then put it back.
        width = input_ids.shape[1]
        leading = (~keep).long().cumprod(1).sum(1, keepdim=True)
        steps = torch.arange(width, device=input_ids.device)[None, :]
        moved = input_ids.gather(1, (steps + leading).clamp(max=width - 1))
        hidden, _ = self.lstm(self.embed_tokens(moved))
        back = (steps - leading).clamp(min=0)[..., None].expand(-1, -1, hidden.shape[-1])
        hidden = hidden.gather(1, back) * keep[..., None]
        return BaseModelOutput(last_hidden_state=hidden)


class ToyLSTMForCausalLM(ToyLSTMPreTrainedModel, SyntacticGenerationMixin):
    """The LSTM and an output layer tied to its embeddings: logits [B, T, V] predict action t + 1. transformers finds
    the embeddings (`model.embed_tokens`) and the output layer (`lm_head`) by their names."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config):
        super().__init__(config)
        self.model = ToyLSTMModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.name_tree_pipeline(config)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, labels=None, **unused):
        logits = self.lm_head(self.model(input_ids=input_ids, attention_mask=attention_mask, **unused).last_hidden_state)
        loss = None
        if labels is not None:
            loss, _ = shifted_action_loss(logits, labels, attention_mask, self.config.pad_token_id)
        return CausalLMOutput(loss=loss, logits=logits)

    def search_decoder(self, use_cache=True):
        """The beam search's decoder: hf-slm's generic one, which reads every hypothesis's prefix again (the toy
        keeps no state between steps, so use_cache changes nothing)."""
        return ReencodingSearchDecoder(self)
