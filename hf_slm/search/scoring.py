"""Joint log-probabilities of given trees: log p(x, y) = sum over actions of log p(a_t | a_<t).

Works with any TG / TXL checkpoint, including one loaded with trust_remote_code (the model's config carries
its grammar and id layout; nothing here checks classes).
"""

import math

import numpy as np
import torch
from tqdm.auto import tqdm

from ..families import family_for_config
from ..modeling.grammars import grammar_for_config
from ..modeling.segment_recurrence import segment_log_probs


def collator_for(model, **kwargs):
    """The data collator that batches a model's sequences: its family record's (Family.collator; a family with a
    grammar: the grammar's SyntacticDataCollator for the config's id layout; SOM: its own)."""
    return family_for_config(model.config).collator(model, **kwargs)


@torch.no_grad()
def action_log_probs(model, sequences, batch_size=32, progress=False):
    """For each action-id sequence (`<s>` first), the array of log p(a_t | a_<t) for t = 1..n (natural log); for an
    action that comes with a start (a grammar that takes_start: the sequence is a mapping with the grammar's
    `start_input`), log p(a_t | a_<t) + log p(s_t | a_<=t), the pointer's term, as the beam search scores it.

    TG's COMPOSE copies predict nothing, so every grammar yields exactly one number per action after `<s>`.
    A model trained with segment recurrence (config.segment_length) reads the sequences as it was trained:
    segment by segment with its memory (modeling/segment_recurrence.py), whatever their length.
    A model that scores action sequences itself (its own `action_log_probs`: an ensemble, hf_slm.search.ensemble,
    scores with each member and mixes per action) is asked to.
    """
    own = getattr(model, "action_log_probs", None)
    if own is not None:
        return own(sequences, batch_size=batch_size, progress=progress)
    model.eval()
    if getattr(model.config, "segment_length", None):
        return _segment_action_log_probs(model, sequences, batch_size, progress)
    collate = collator_for(model)
    takes_start = family_for_config(model.config).grammar_classes is not None and \
        grammar_for_config(model.config).takes_start
    device = next(model.parameters()).device
    results = []
    batches = range(0, len(sequences), batch_size)
    for start in tqdm(batches, desc="scoring", disable=not progress, unit="batch"):
        batch = collate(list(sequences[start : start + batch_size]))
        output = model(**{k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items() if k != "labels"})
        # logits[:, t] predicts action t + 1 (the HF causal-LM contract)
        log_probs = torch.log_softmax(output.logits[:, :-1].float(), dim=-1).cpu()
        targets = batch["labels"][:, 1:]
        picked = log_probs.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
        if takes_start:  # an action that comes with a start: p(action) p(start | action) (the search's score)
            grammar = grammar_for_config(model.config)
            pointer = getattr(output, grammar.start_output)  # an output the grammar names, not a capability
            picked = picked + _pointed_log_probs(pointer, batch[grammar.start_input][:, 1:])
        for row in range(len(targets)):
            results.append(picked[row][targets[row] != -100].numpy().astype(np.float64))
    return results


def _pointed_log_probs(pointer, starts):
    """[B, T - 1] log p(start | action) of the actions t + 1 that have a start (`starts` [B, T - 1], -1 elsewhere,
    where 0 is added): `pointer` [B, T, T], the model's output that the grammar's start_output names (indexed by
    predicting position, then by the start's action index)."""
    pointed = pointer[:, :-1].float().cpu().gather(2, starts.clamp(min=0)[:, :, None])[:, :, 0]
    return torch.where(starts >= 0, pointed, torch.zeros_like(pointed))


def _segment_action_log_probs(model, sequences, batch_size, progress):
    """action_log_probs through segments (config.segment_length, memory_length, memory_update): batch_size sequences
    at a time, one per stream."""
    config = model.config
    results = []
    for start in tqdm(range(0, len(sequences), batch_size), desc="scoring", disable=not progress, unit="batch"):
        chunk = [list(ids) for ids in sequences[start : start + batch_size]]
        for values in segment_log_probs(model, model.grammar, chunk, config.segment_length,
                                        getattr(config, "memory_length", None), getattr(config, "memory_update", None)):
            results.append(values.numpy().astype(np.float64))
    return results


def joint_log_probs(model, sequences, **kwargs):
    """log p(x, y) of each action sequence."""
    return [float(values.sum()) for values in action_log_probs(model, sequences, **kwargs)]


def action_perplexity(log_prob_arrays):
    """exp(- total log-probability / number of predicted actions)."""
    total = sum(float(values.sum()) for values in log_prob_arrays)
    count = sum(len(values) for values in log_prob_arrays)
    return math.exp(-total / count)
