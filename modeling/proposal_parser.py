"""What every proposal parser is: the declared interface hf-slm's proposals, parsing and training call.

A proposal parser q(y | x) reads a sentence's words (its tokenizer's input_ids, attention_mask and the encoder's
other inputs) and gives:
- `forward(**inputs, **targets)`: a ProposalParserOutput whose `loss` is the mean negative log-likelihood of the
  target trees (what transformers.Trainer minimizes);
- `best_structures(**inputs)`: per sentence, its most probable tree (or a search's choice: `best_is_exact`);
- `sample_structures(num_samples, generator=None, **inputs)`: per sentence, `num_samples` independent exact samples
  (`generator`: one torch.Generator, or a list of one per sentence, `draw_per_sentence`);
- `structure_log_probs(structures, **inputs)`: log q(y | x) of given trees, [B].
A structure is a dict the parser's tokenizer writes as a tree (`tokenizer.decode_tree(words, structure)`) with its
"log_prob", log q(y | x) in nats: a constituency parser's {"spans", "tags"}, a dependency parser's {"heads",
"relations"}. Any parser hf-slm trains or loads (a discriminative RNNG included) subclasses this class.

Hub code: imports torch, transformers and its siblings only.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .safe_loading import SafetensorsOnlyLoading

IGNORE_INDEX = -100


@dataclass
class ProposalParserOutput(ModelOutput):
    """loss: the mean over sentences of -log q(y | x) of the target trees, plus each sentence's summed tagging or
    relation cross-entropy where the parser predicts those (sentence_mean_nll), when targets are given.
    scores: the CRF's potentials (span-label scores [B, N+1, N+1, L], or arc scores [B, N+1, N+1], [head, dependent]).
    log_partition: log Z [B]. label_logits: tag logits [B, T, num_tags] or relation scores [B, T, T, R]."""

    loss: torch.FloatTensor | None = None
    scores: torch.FloatTensor | None = None
    log_partition: torch.FloatTensor | None = None
    label_logits: torch.FloatTensor | None = None


def sentence_mean_nll(logits, targets):
    """The mean over sentences of each sentence's summed negative log-likelihood of `targets` [B, T] under `logits`
    [B, T, C] (IGNORE_INDEX where none): the tree's loss is a mean over sentences too, so the whole loss of a batch
    is the mean of its sentences' losses, and N processes' average of their batches' gradients is one process's."""
    per_position = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX,
                                   reduction="none").view(targets.shape)
    return per_position.sum(-1).mean()


class ProposalParserPreTrainedModel(SafetensorsOnlyLoading, PreTrainedModel):
    """The interface of every proposal parser (module docstring); a subclass sets `tree_kind` ("constituency" or
    "dependency") and implements the four methods."""

    base_model_prefix = "parser"
    supports_gradient_checkpointing = False
    main_input_name = "input_ids"
    tree_kind = None
    # best_structures gives the most probable tree exactly (a CRF's best tree); False: a search's choice (the
    # discriminative RNNG's greedy parse), which a sample may beat
    best_is_exact = True

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()

    @staticmethod
    def sentence_lengths(attention_mask):
        """Words per sentence [B]: the real positions minus `<s>` and `</s>`."""
        return attention_mask.long().sum(-1) - 2

    @staticmethod
    def draw_per_sentence(sample, scores, lengths, num_samples, generator):
        """`sample(scores, lengths, num_samples, generator)` (a CRF's sample_trees) over the batch with one
        generator, or sentence by sentence when `generator` is a list of one per sentence: each sentence's samples
        then depend on its own generator only, not on what else is in its batch."""
        if not isinstance(generator, (list, tuple)):
            return sample(scores, lengths, num_samples, generator)
        if len(generator) != len(lengths):
            raise ValueError(f"{len(generator)} generators for {len(lengths)} sentences; expected one per sentence")
        # each sentence's chart cut to its own size: the draws' random numbers then follow its length, not the
        # longest sentence's in its batch
        return [sample(scores[row : row + 1, : int(lengths[row]) + 1, : int(lengths[row]) + 1],
                       lengths[row : row + 1], num_samples, generator[row])[0] for row in range(len(lengths))]

    def best_structures(self, **inputs):
        raise NotImplementedError

    def sample_structures(self, num_samples, generator=None, **inputs):
        raise NotImplementedError

    def structure_log_probs(self, structures, **inputs):
        raise NotImplementedError
