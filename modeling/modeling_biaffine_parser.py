"""A biaffine dependency parser (Dozat and Manning 2017) with a projective tree CRF: q(y | x) over the single-root
projective trees DTG's transition systems build (paper 002 drew its proposals from such a parser).

The words' vectors (parser_encoder.WordEncoder; position 0, `<s>`, stands for the root) give an arc from head h to
dependent d the score s(h, d) = [MLP_dep(x_d); 1]^T U MLP_head(x_h) and a relation r the score
[MLP'_dep(x_d); 1]^T U_r [MLP'_head(x_h); 1]. A tree scores the sum of its arcs; q(y | x) normalizes over every
projective tree with one root word (Eisner's inside algorithm, modeling/projective_crf.py). Relations are predicted
per arc (argmax), beside the tree: they are not part of q.

Hub code: imports torch, transformers and its siblings only.
"""

import torch

from .configuration_parser import DependencyParserConfig
from .parser_encoder import PairScorer, WordEncoder
from .projective_crf import best_trees, log_partition, sample_trees, tree_scores
from .proposal_parser import ProposalParserOutput, ProposalParserPreTrainedModel, sentence_mean_nll


def head_rows(structures, size, device):
    """heads [B, size] (word d's head at d - 1, -1 beyond the sentence) of structures {"heads": [...]}."""
    heads = torch.full((len(structures), size), -1, dtype=torch.long)
    for row, structure in enumerate(structures):
        heads[row, : len(structure["heads"])] = torch.as_tensor(list(structure["heads"]), dtype=torch.long)
    return heads.to(device)


class BiaffineDependencyParser(ProposalParserPreTrainedModel):
    """forward(input_ids [B, T], attention_mask [B, T], char_ids [B, T, C] (or the pretrained encoder's pieces),
    heads [B, T-2] (word d's head at d - 1, 0 the root, -1 padding), relations [B, T-2] (relation ids, -100
    padding)) -> ProposalParserOutput with arc scores [B, T-1, T-1] ([head, dependent], position 0 the root) and
    relation scores [B, T-1, T-1, R] ([head, dependent, relation]), T = n + 2."""

    config_class = DependencyParserConfig
    tree_kind = "dependency"

    def __init__(self, config):
        super().__init__(config)
        size = config.word_vector_size
        self.encoder = WordEncoder(config)
        # left: the dependent, right: the head
        self.arc_scorer = PairScorer(size, config.arc_mlp_size, 1, config.mlp_dropout, right_bias=False)
        self.relation_scorer = PairScorer(size, config.relation_mlp_size, config.num_relations, config.mlp_dropout)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, char_ids=None, heads=None, relations=None, piece_ids=None,
                piece_attention_mask=None, word_piece_spans=None, **_):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        states = self.encoder(input_ids, attention_mask, char_ids=char_ids, piece_ids=piece_ids,
                              piece_attention_mask=piece_attention_mask, word_piece_spans=word_piece_spans)
        states = states[:, :-1]  # `</s>` is no word and no root
        # the biaffines score [dependent, head]; the CRF reads [head, dependent]
        arcs = self.arc_scorer(states, states)[..., 0].transpose(1, 2)
        relation_scores = self.relation_scorer(states, states).transpose(1, 2)
        lengths = self.sentence_lengths(attention_mask)
        log_z = log_partition(arcs, lengths)
        loss = None
        if heads is not None:
            loss = (log_z - tree_scores(arcs, heads)).mean()
            if relations is not None:
                # the relation of each word's gold arc: relation_scores[b, head, dependent]
                dependents = torch.arange(1, heads.shape[1] + 1, device=heads.device).expand_as(heads)
                at_gold = relation_scores[torch.arange(heads.shape[0], device=heads.device)[:, None],
                                          heads.clamp(min=0), dependents.clamp(max=relation_scores.shape[2] - 1)]
                loss = loss + sentence_mean_nll(at_gold, relations)
        return ProposalParserOutput(loss=loss, scores=arcs, log_partition=log_z, label_logits=relation_scores)

    def _relations(self, relation_scores, heads):
        best = relation_scores.argmax(-1)  # [B, head, dependent]
        return [[int(best[row, head, dependent]) for dependent, head in enumerate(sentence, start=1)]
                for row, sentence in enumerate(heads)]

    @torch.no_grad()
    def best_structures(self, **inputs):
        out = self(**inputs)
        found = best_trees(out.scores, self.sentence_lengths(inputs["attention_mask"]))
        relations = self._relations(out.label_logits, [heads for heads, _ in found])
        return [{"heads": heads, "relations": sentence_relations, "log_prob": score - float(log_z)}
                for (heads, score), sentence_relations, log_z in zip(found, relations, out.log_partition)]

    @torch.no_grad()
    def sample_structures(self, num_samples, generator=None, **inputs):
        out = self(**inputs)
        drawn = self.draw_per_sentence(
            lambda scores, rows, count, draws: sample_trees(scores, rows, num_samples=count, generator=draws),
            out.scores, self.sentence_lengths(inputs["attention_mask"]), num_samples, generator)
        best = out.label_logits.argmax(-1)
        return [[{"heads": heads, "relations": [int(best[row, head, dependent])
                                                 for dependent, head in enumerate(heads, start=1)],
                  "log_prob": log_q} for heads, log_q in samples] for row, samples in enumerate(drawn)]

    @torch.no_grad()
    def structure_log_probs(self, structures, **inputs):
        out = self(**inputs)
        heads = head_rows(structures, out.scores.shape[1] - 1, out.scores.device)
        return tree_scores(out.scores, heads) - out.log_partition


BiaffineDependencyParser._auto_class = "AutoModel"
