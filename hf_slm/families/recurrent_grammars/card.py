"""What the model card of a generative RNNG says (its record's card_details; hf_slm/publishing/model_card.py renders
card.md, beside this file, with them)."""

from ...publishing.model_card import NOT_RECORDED, config_value


def model_details(config, parameters):
    """The "Model details" rows of an RNNG config (rnng-pytorch's names in brackets)."""
    open_nts = config.get("open_nt_stop", 0) - config.get("open_nt_start", 0) if "open_nt_stop" in config else None
    return [
        ("grammar", f"`{config.get('grammar', NOT_RECORDED)}` (top-down actions; REDUCE closes the innermost open "
                    "constituent)"),
        ("stack LSTM", f"{config_value(config, 'num_hidden_layers')} layers, hidden size "
                       f"{config_value(config, 'hidden_size')} [num_layers, h_dim]"),
        ("embeddings and compositions", f"{config_value(config, 'embedding_size')} dimensions [w_dim]"),
        ("composition", "bidirectional LSTM over (nonterminal, children, nonterminal) (Dyer et al. 2016)"),
        ("vocabulary", f"{config_value(config, 'vocab_size')} action ids"
                       + (f" ({open_nts} nonterminal labels)" if open_nts else "")),
        ("parameters", f"{parameters:,}" if parameters is not None else "not counted (no safetensors weights)"),
        ("max sequence length", f"{config_value(config, 'max_sequence_length')} actions"),
        ("dropout", f"{config_value(config, 'dropout')} (embeddings, between LSTM layers, before the composition's and "
                    "the action context's linear layers)"),
        ("tied input and output embeddings", "the word softmax's weights are the input embeddings, with a bias"),
    ]
