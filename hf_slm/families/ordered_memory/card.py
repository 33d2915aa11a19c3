"""What the model card of a Syntactic Ordered Memory checkpoint says (its record's card_details and card_values;
hf_slm/publishing/model_card.py renders model_cards/som.md with them)."""

from ...publishing.model_card import NOT_RECORDED, config_value


def model_details(config, parameters):
    """The "Model details" rows of a Syntactic Ordered Memory config (paper 001's names: D, N, D_sem, D_syn)."""
    if config.get("disentangle"):
        kind = (f"dSOM (disentangled, section 3.4): D_sem = {config_value(config, 'semantic_size')} semantic and "
                f"D_syn = {config_value(config, 'syntactic_size')} syntactic features; the parsers read the semantic "
                "segment through a gradient stop")
    else:
        kind = "eSOM (one entangled state, section 3.4)"
    return [
        ("variant", kind),
        ("hidden size D", config_value(config, "hidden_size")),
        ("memory slots N", f"{config_value(config, 'num_slots')} (the deepest tree the memory holds; deeper trees "
                           "are flattened at the bottom)"),
        ("cell MLP size", config_value(config, "intermediate_size")),
        ("parser scorer size", config_value(config, "parser_size")),
        ("prediction network", _prediction_network(config)),
        ("memory decisions", "the gold tree's whenever one is given, in training and evaluation (oracle_trees: "
                             "Table 2's '- Predicted tree + Gold tree'); its own parser's on plain text"
         if config.get("oracle_trees") else "the model's own parser's (p_t)"),
        ("structural loss", f"{config_value(config, 'structure_loss')} (weight "
                            f"{config_value(config, 'structure_loss_weight')}; language-model loss weight "
                            f"{config_value(config, 'lm_loss_weight')})"),
        ("vocabulary", f"{config_value(config, 'vocab_size')} token ids"),
        ("parameters", f"{parameters:,}" if parameters is not None else "not counted (no safetensors weights)"),
        ("dropout", f"cells and scorers {config_value(config, 'dropout')}, whole word embeddings "
                    f"{config_value(config, 'embedding_dropout')}, before the output "
                    f"{config_value(config, 'output_dropout')}"),
        ("tied input and output embeddings", "yes"),
    ]


def _prediction_network(config):
    """The "prediction network" row: absent (Table 2's ablation), section 3.2's sampled slot, or the mixture (a
    config saved before `prediction_network` existed reads as the mixture)."""
    if not config.get("use_prediction_network", True):
        return "no (Table 2's ablation): the top candidate slot predicts the next token"
    if config.get("prediction_network", "mixture") == "sampled":
        return ("yes (section 3.2): an RNN over the memory up to a slot drawn from the zero-step look-ahead parser "
                "p'_t in training, its argmax in evaluation")
    return ("yes, as a mixture: the RNN outputs of every slot weighted by the zero-step look-ahead parser p'_t (the "
            "expectation of section 3.2's sampled slot)")


def card_values(config):
    """What som.md reads: eSOM or dSOM, D, N, the prediction network and the oracle."""
    return dict(disentangle=bool(config.get("disentangle")), hidden_size=config.get("hidden_size", NOT_RECORDED),
                num_slots=config.get("num_slots", NOT_RECORDED), semantic_size=config.get("semantic_size"),
                syntactic_size=config.get("syntactic_size"),
                use_prediction_network=config.get("use_prediction_network", True),
                prediction_network=config.get("prediction_network", "mixture"),
                oracle_trees=bool(config.get("oracle_trees")))
