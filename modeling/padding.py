"""Where padding may be: at either end of a row, never between real tokens; and the start token: first, once.

The collators and tokenizers pad only on either side. A pad id between real tokens, without an attention_mask to
say otherwise, is a hole that would silently join the tokens around it; a 0 of the mask between real tokens, one
that would silently skip a token. Every family's model refuses both (modeling_slm.py, modeling_som.py).

A sequence begins with its start token, once. A second one right after the first is what a client gives that puts
its own start token before ids the tokenizer already began with one (lm-evaluation-harness does unless told
otherwise), and none what it gives that encodes text without special tokens; every family refuses both with the
messages of grammar_protocol.py, which say what to pass (a grammar's legality there; SOM, which has no grammar,
check_starts here).

Hub code: imports only torch and grammar_protocol.py (numpy).
"""

import torch
import torch.nn.functional as F

from .grammar_protocol import no_start_token_message, second_start_token_message


def check_padding_at_the_ends(keep, pad_token_id, mask_given):
    """Refuse a row whose padding is not at its ends (`keep`: [B, T] bool, a tensor or an array, True for a real
    token), naming the row and the position: of the attention_mask's 0 when `mask_given`, else of the pad id."""
    for row, real in enumerate(torch.as_tensor(keep, dtype=torch.bool)):
        where = torch.nonzero(real).flatten()
        if len(where) == 0 or int(where[-1] - where[0]) + 1 == len(where):
            continue
        hole = int(where[int(torch.nonzero(torch.diff(where) > 1).flatten()[0])]) + 1
        if mask_given:
            raise ValueError(f"attention_mask row {row} is 0 at position {hole}, between real tokens; padding goes "
                             "at either end of a row")
        raise ValueError(f"input_ids row {row} holds the pad id {pad_token_id} at position {hole}, between real "
                         "tokens; padding goes at either end of a row (give an attention_mask of ones to read a pad "
                         "id as a token)")


def check_starts(input_ids, keep, start_id):
    """Refuse a row (`input_ids` [B, T], `keep` [B, T] bool: its real tokens, padded at the ends) that does not begin
    with the start token `start_id`, or begins with it twice: for a model without a grammar to say so."""
    keep = torch.as_tensor(keep, dtype=torch.bool)
    rows, length = torch.arange(len(keep)), keep.shape[1]
    first = keep.int().argmax(1)  # each row's first real token (the padding sits at the ends only)
    second = (first + 1).clamp(max=length - 1)
    missing = keep.any(1) & (input_ids[rows, first] != start_id)
    doubled = ~missing & keep[rows, second] & (first + 1 < length) & (input_ids[rows, second] == start_id)
    if missing.any():
        row = int(torch.nonzero(missing)[0])
        raise ValueError(no_start_token_message(f"input_ids row {row} begins with id {int(input_ids[row, first[row]])}",
                                                start_id))
    if doubled.any():
        row = int(torch.nonzero(doubled)[0])
        raise ValueError(second_start_token_message(f"input_ids row {row}, token 1 (id {start_id})", start_id))


__all__ = ["check_padding_at_the_ends", "check_starts"]


def shifted_action_loss(logits, labels, attention_mask, pad_token_id, ignore_index=-100):
    """The HF causal-LM loss every family's forward gives for `labels` (labels=input_ids): the mean NLL of action
    t + 1 under logits[:, t], labels equal to the pad id, under a 0 of the attention mask or equal to `ignore_index`
    ignored. Returns (loss, targets: the labels with `ignore_index` where ignored)."""
    targets = labels.masked_fill(labels == pad_token_id, ignore_index)
    if attention_mask is not None and attention_mask.shape == labels.shape:
        targets = targets.masked_fill(attention_mask == 0, ignore_index)
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets[:, 1:].flatten(), ignore_index=ignore_index)
    return loss, targets
