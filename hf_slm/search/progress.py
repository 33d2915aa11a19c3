"""Progress bars for the searches and generations a user waits on (`hf-slm parse`, `score`, `generate`).

One rule for when a bar shows: after PROGRESS_DELAY seconds of work, so that a quick command prints nothing and a
long one (a big beam, a long sentence, an untrained model's long words) says how far it is and how long is left.
The word-synchronous search reports each word step (WordSynchronousBeamSearch's `on_word`); transformers' own
generate (models it runs: no grammar search) each token, through a stopping criterion that never stops.
"""

import torch
from tqdm.auto import tqdm
from transformers import StoppingCriteria

# Seconds of work before a bar shows.
PROGRESS_DELAY = 2.0


def progress_bar(total, description, unit, enabled=True):
    """A tqdm bar of `total` units that shows after PROGRESS_DELAY seconds (never when not `enabled`), and goes
    when its work is done (under a bar over sentences, each batch's search has one)."""
    return tqdm(total=total, desc=description, unit=unit, disable=not enabled, delay=PROGRESS_DELAY, leave=False)


class TokenProgress(StoppingCriteria):
    """For transformers' generate: advances `bar` by one step per generated token, and stops nothing."""

    def __init__(self, bar):
        self.bar = bar

    def __call__(self, input_ids, scores=None, **kwargs):
        self.bar.update(1)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


__all__ = ["PROGRESS_DELAY", "TokenProgress", "progress_bar"]
