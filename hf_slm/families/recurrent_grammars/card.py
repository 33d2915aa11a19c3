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


def parser_rows(config):
    """The "Model details" rows of the discriminative RNNG's own parts (its parser kind's model_rows)."""
    return [
        ("stack LSTM", f"{config.get('stack_layers')} layers of {config.get('stack_hidden_size')}, over elements of "
                       f"{config.get('stack_input_size')} dimensions (nonterminals, projected words, compositions)"),
        ("composition", "bidirectional LSTM over (nonterminal, children, nonterminal), as the generative RNNG's"),
        ("actions", f"NT(X) for {config.get('num_span_labels')} bracketing labels, SHIFT, REDUCE, from an MLP "
                    f"({config.get('action_mlp_size')}) over the stack's top and the next word's encoder state, "
                    f"renormalized over the legal actions; at most {config.get('max_open_nonterminals')} open "
                    "constituents"),
        ("tagger", f"{config.get('num_tags')} POS tags" if config.get("num_tags") else "none (no POS tags in training)"),
    ]
