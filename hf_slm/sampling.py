"""Ancestral sampling of well-formed trees, restricted to the grammar's legal actions.

Every step re-reads each sample's whole prefix (no cache): this is for looking at what a small model has
learned. Word-synchronous beam search and `generate` are the efficient, batched decoders.
"""

import numpy as np
import torch

from .modeling.grammars import ActionKind, ActionLayout, grammar_for_config
from .scoring import collator_for


@torch.no_grad()
def sample_trees(model, num_samples=3, max_actions=120, temperature=1.0, word_start_mask=None, incomplete_word_ids=(),
                 seed=None):
    """Sample `num_samples` action-id sequences (`<s>` first) from a TG / TXL (CC) / TXL (terminals) model.

    Only legal actions are sampled: the grammar's next kinds, the closing NT matching the innermost open
    one, no `<unk>`/padding, and (given the tokenizer's `word_start_mask`) a word continuation piece only
    right after another piece, and one right after any of `incomplete_word_ids` (SentencePiece's bare `▁`,
    which starts a word but spells none of it). When the open constituents need all the remaining budget of `max_actions`
    to close, only closing actions are allowed, so every sample is a complete tree.
    """
    model.eval()
    layout = ActionLayout.from_config(model.config)
    grammar = grammar_for_config(model.config)
    collate = collator_for(model, validate=False)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    vocab = model.config.vocab_size
    kinds = torch.from_numpy(layout.kinds(np.arange(vocab)).astype(np.int64))
    starts = torch.tensor(word_start_mask, dtype=torch.bool) if word_start_mask is not None else torch.ones(vocab, dtype=torch.bool)
    unusable = torch.zeros(vocab, dtype=torch.bool)
    unusable[[layout.pad_token_id, layout.bos_token_id]] = True
    unk_id = getattr(model.config, "unk_token_id", None)
    if unk_id is None and layout.open_nt_start > 3:
        unk_id = 3  # hf-slm tokenizers put <unk> right after <pad> <s> </s>
    if unk_id is not None:
        unusable[unk_id] = True
    device = next(model.parameters()).device

    incomplete = set(incomplete_word_ids)
    sequences = [[layout.bos_token_id] for _ in range(num_samples)]
    states = [grammar.start() for _ in range(num_samples)]
    for state, sequence in zip(states, sequences):
        grammar.step(state, sequence[0])
    while True:
        # A document-level model could go on after a closed root: a sample is one tree either way.
        active = [i for i, state in enumerate(states) if not (state.finished or state.trees_complete)]
        if not active:
            return sequences
        batch = collate([sequences[i] for i in active])
        logits = model(**{k: v.to(device) for k, v in batch.items() if k != "labels"}).logits.float().cpu()
        last = (batch["input_ids"] != layout.pad_token_id).sum(1) - 1
        for row, index in enumerate(active):
            state, sequence = states[index], sequences[index]
            allowed = torch.zeros(vocab, dtype=torch.bool)
            for kind in grammar.allowed_next_kinds(state):
                allowed |= kinds == kind
            allowed &= ~unusable
            previous_is_piece = kinds[sequence[-1]] == ActionKind.TERMINAL
            if not previous_is_piece:
                allowed &= starts | (kinds != ActionKind.TERMINAL)
            elif sequence[-1] in incomplete:
                allowed &= (kinds == ActionKind.TERMINAL) & ~starts
            if ActionKind.CLOSE_NT in grammar.allowed_next_kinds(state):
                closing = grammar.allowed_closing_id(state)
                allowed &= (kinds != ActionKind.CLOSE_NT) | (torch.arange(vocab) == closing)
            budget = max_actions - len(sequence)
            open_count = len(state.open_ids)
            if budget <= open_count + 1 and state.open_ids and sequence[-1] not in incomplete:
                must_close = allowed & (kinds == ActionKind.CLOSE_NT)
                if must_close.any():
                    allowed = must_close
                else:  # an empty constituent needs one word first
                    allowed &= kinds == ActionKind.TERMINAL
            if budget <= 1 and ActionKind.EOS in grammar.allowed_next_kinds(state):
                allowed = torch.arange(vocab) == layout.eos_token_id
            scores = logits[row, last[row]] / temperature
            scores[~allowed] = float("-inf")
            action = int(torch.multinomial(torch.softmax(scores, -1), 1, generator=generator))
            grammar.step(state, action)
            sequence.append(action)
