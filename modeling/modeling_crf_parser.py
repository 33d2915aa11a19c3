"""A span CRF constituency parser (after Zhang, Zhou and Li 2020): q(y | x) over labelled binary bracketings.

The words' vectors (parser_encoder.WordEncoder) give every fencepost i = 0..n a vector [f_i; b_(i+1)], the first
half of position i's vector and the second half of position i + 1's (with a BiLSTM: the forward state before the
fencepost and the backward state after it). A span (i, j) scores
    s(i, j, l) = biaffine_span(MLP_l(r_i), MLP_r(r_j)) + biaffine_label(MLP'_l(r_i), MLP'_r(r_j))[l]
(parser_encoder.PairScorer each),
a structure score shared by its labels plus a score per label, and a tree the sum of its spans' scores (its 2n - 1
spans, one-word spans included; modeling/span_crf.py). The bracketings are those of tokenization/parser_trees.py:
unary chains collapsed into labels, left binarization's nodes labelled `<binarized>` (left children only) and words
that are no constituent `<word>`, so each n-ary tree is exactly one bracketing. Which label may sit where
(`label_kinds`): `<word>` on one-word spans only, `<binarized>` on inner spans only, the treebank labels anywhere
(for unlabelled trees, which have no unary chains, `<constituent>` on spans of two words or more, or on a one-word
sentence). With POS tags in its training trees the parser also tags each word (argmax, not part of q).

Hub code: imports torch, transformers and its siblings only.
"""

import torch
from torch import nn

from .configuration_parser import ConstituencyParserConfig
from .parser_encoder import MLP, PairScorer, WordEncoder
from .proposal_parser import ProposalParserOutput, ProposalParserPreTrainedModel, sentence_mean_nll
from .span_crf import best_trees, log_partition, sample_trees, tree_scores

ONE_WORD, INNER, SENTENCE = 0, 1, 2


def label_kinds(config):
    """allowed [3, L]: which labels may label a one-word span, an inner span and the whole sentence."""
    allowed = torch.ones(3, config.num_span_labels, dtype=torch.bool)
    allowed[:, config.no_constituent_label_id] = torch.tensor([True, False, False])
    allowed[:, config.dummy_label_id] = torch.tensor([False, True, False])
    if not config.labelled:  # no unary chains: a word inside a sentence is never a constituent of its own
        allowed[ONE_WORD] = False
        allowed[ONE_WORD, config.no_constituent_label_id] = True
    return allowed


def span_chart(structures, size, device):
    """The gold chart [B, size, size] of label ids (-1 where no span) of structures {"spans": [(i, j, l), ...]}."""
    chart = torch.full((len(structures), size, size), -1, dtype=torch.long)
    for row, structure in enumerate(structures):
        spans = torch.as_tensor([list(span) for span in structure["spans"]], dtype=torch.long).reshape(-1, 3)
        chart[row, spans[:, 0], spans[:, 1]] = spans[:, 2]
    return chart.to(device)


class CrfConstituencyParser(ProposalParserPreTrainedModel):
    """forward(input_ids [B, T], attention_mask [B, T], char_ids [B, T, C] (or the pretrained encoder's pieces),
    span_labels [B, T-1, T-1] (a target tree's label id per span, -1 elsewhere), tags [B, T] (tag ids of the
    words, -100 at `<s>`, `</s>` and padding)) -> ProposalParserOutput (T = n + 2)."""

    config_class = ConstituencyParserConfig
    tree_kind = "constituency"

    def __init__(self, config):
        super().__init__(config)
        size = config.word_vector_size
        self.encoder = WordEncoder(config)
        self.span_scorer = PairScorer(size, config.span_mlp_size, 1, config.mlp_dropout, right_bias=False)
        self.label_scorer = PairScorer(size, config.label_mlp_size, config.num_span_labels, config.mlp_dropout)
        if config.num_tags:
            self.tagger = nn.Sequential(MLP(size, config.tag_mlp_size, config.mlp_dropout),
                                        nn.Linear(config.tag_mlp_size, config.num_tags))
        self.post_init()

    @property
    def allowed_labels(self):
        """label_kinds(config) on the model's device: built when asked (a buffer would be left uninitialized when
        transformers builds the model on the meta device to load its weights)."""
        return label_kinds(self.config).to(self.device)

    def _scores(self, input_ids, attention_mask, **encoder_inputs):
        """(span-label scores [B, T-1, T-1, L], the words' vectors [B, T, D])."""
        states = self.encoder(input_ids, attention_mask, **encoder_inputs)
        before, after = states.chunk(2, -1)
        fenceposts = torch.cat([before[:, :-1], after[:, 1:]], -1)  # fencepost i: between position i and i + 1
        return self.span_scorer(fenceposts, fenceposts) + self.label_scorer(fenceposts, fenceposts), states

    def forward(self, input_ids, attention_mask=None, char_ids=None, span_labels=None, tags=None, piece_ids=None,
                piece_attention_mask=None, word_piece_spans=None, **_):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        scores, states = self._scores(input_ids, attention_mask, char_ids=char_ids, piece_ids=piece_ids,
                                      piece_attention_mask=piece_attention_mask, word_piece_spans=word_piece_spans)
        lengths = self.sentence_lengths(attention_mask)
        log_z = log_partition(scores, lengths, self.allowed_labels, self.config.dummy_label_id)
        tag_logits = self.tagger(states) if self.config.num_tags else None
        loss = None
        if span_labels is not None:
            loss = (log_z - tree_scores(scores, span_labels)).mean()
            if tag_logits is not None and tags is not None:
                loss = loss + sentence_mean_nll(tag_logits, tags)
        return ProposalParserOutput(loss=loss, scores=scores, log_partition=log_z, label_logits=tag_logits)

    def _tags(self, tag_logits, lengths):
        if tag_logits is None:
            return [None] * len(lengths)
        best = tag_logits.argmax(-1).tolist()
        return [row[1 : 1 + int(n)] for row, n in zip(best, lengths)]

    @torch.no_grad()
    def best_structures(self, **inputs):
        out = self(**inputs)
        lengths = self.sentence_lengths(inputs["attention_mask"])
        found = best_trees(out.scores, lengths, self.allowed_labels, self.config.dummy_label_id)
        tags = self._tags(out.label_logits, lengths)
        return [{"spans": spans, "tags": sentence_tags, "log_prob": score - float(log_z)}
                for (spans, score), sentence_tags, log_z in zip(found, tags, out.log_partition)]

    @torch.no_grad()
    def sample_structures(self, num_samples, generator=None, **inputs):
        out = self(**inputs)
        lengths = self.sentence_lengths(inputs["attention_mask"])
        allowed, dummy = self.allowed_labels, self.config.dummy_label_id
        drawn = self.draw_per_sentence(
            lambda scores, rows, count, draws: sample_trees(scores, rows, allowed, dummy, num_samples=count,
                                                            generator=draws),
            out.scores, lengths, num_samples, generator)
        tags = self._tags(out.label_logits, lengths)
        return [[{"spans": spans, "tags": sentence_tags, "log_prob": log_q} for spans, log_q in samples]
                for samples, sentence_tags in zip(drawn, tags)]

    @torch.no_grad()
    def structure_log_probs(self, structures, **inputs):
        out = self(**inputs)
        chart = span_chart(structures, out.scores.shape[1], out.scores.device)
        return tree_scores(out.scores, chart) - out.log_partition


CrfConstituencyParser._auto_class = "AutoModel"
