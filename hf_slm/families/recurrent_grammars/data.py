"""The RNNG family's collator (its record's `collator`): the generic collator without the position structure, which
a stack LSTM reading the actions in order has no use for."""

from ...data.collator import collator_for_model as positions_collator


def collator_for_model(model, tokenizer=None, **options):
    """The SyntacticDataCollator of the model's grammar, giving input_ids, attention_mask and labels only."""
    return positions_collator(model, tokenizer, positions=False, host_counts=False, **options)
