"""What the model card of a dependency family's checkpoint says (DTG, TXL (trans): their records' card_values;
hf_slm/publishing/model_card.py renders model_cards/dtg.md and txl_trans.md with them)."""

from .registry import grammar_class


def card_values(config):
    """What dtg.md and txl_trans.md read: the transition system, the arc input and the variant."""
    return dict(transition_system=grammar_class(config["grammar"]).linearization.replace("_", "-"),
                arc_representation=config.get("arc_representation", "w+arc"),
                dependency_variant=config.get("dependency_variant", "paper"))
