"""Where padding may be: at either end of a row, never between real tokens.

The collators and tokenizers pad only on either side. A pad id between real tokens, without an attention_mask to
say otherwise, is a hole that would silently join the tokens around it; a 0 of the mask between real tokens, one
that would silently skip a token. Every family's model refuses both (modeling_slm.py, modeling_som.py).

Hub code: imports only torch.
"""

import torch


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


__all__ = ["check_padding_at_the_ends"]
