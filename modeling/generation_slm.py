"""Word-synchronous beam search (Stern et al. 2017) for every syntactic LM family, batched.

Semantics follow rnng-pytorch's word-synchronous beam search. For each word position t:
  repeat: expand every hypothesis of the frontier by every legal action; per sentence keep the `beam_size`
  best successors (action beam); those that generate word t go to the word beam, plus up to `fast_track`
  word-generating successors from outside the top (fast track); the others form the next frontier;
  until the successors that reached word t *within* the action beam number `beam_size` (fast-tracked ones
  do not count), the word beam holds min(2 b, b + 5 fast_track) hypotheses, or the frontier is empty.
  Then prune the word beam to `word_beam_size`; it is the frontier of word t + 1. After the last word a
  final round closes the trees.
The marginal log p(x_<=t) is the logsumexp of the word beam's joint scores (after pruning by default, or
before, as the DTG reference); surprisal(t) = marginal(t - 1) - marginal(t).

A grammar whose actions come with a start (`grammar.takes_start`, paper 003's Nb-Up `)`, section 2.2): the search
never picks its `grammar.pointer_action_id` bare: each hypothesis that may take it gets one candidate successor per
feasible start s (the grammar's `legal_starts`), scored log p(action) + log p(s | action) with the decoder's start
pointer, and the chosen start goes to the grammar's step. Its trees are ActionIds: ids that carry their starts,
and `syntactic_generate`'s output carries them as the grammar's `start_input`.

Words are pieces: after the first piece of a word only its next piece is legal, and a hypothesis has
generated word t when it generates the word's last piece. In free generation hypotheses synchronize on
every terminal piece.

All hypotheses of all sentences advance together, one model call per round. The search keeps them as rows
of tensors (scores, counters, action histories, and the grammar's states as hypothesis_rows.py's rows: TG's
stacks as arrays, stepped for all successors at once) and knows no model family: a decoder (search_decoders.py) advances rows by actions and returns next-action
log-probabilities. Legality comes from the grammar, the decoding limits from search_constraints.py.
The model runs only on what is used: successors that complete the word wait until the word beam is pruned
(the kept ones then run in one call, which gives the next word's frontier its log-probabilities), and a
sentence whose word just ended sends no more rows. Nothing per round or per word loops over sentences: the action
beam, the fast track, each sentence's pruning and marginal are tensor operations over all of them, and equal scores
go to the hypothesis that came first (stable sorts), so that a sentence searched with others keeps what a search
of it alone keeps.

Hub code: imports only numpy, torch and its sibling files.
"""

from dataclasses import dataclass

import numpy as np
import torch

from .configuration_slm import position_limit
from .grammars import ActionKind, grammar_for_config
from .hypothesis_rows import NewPositions, prefix_rows
from .search_constraints import DecodingStatus, SearchConstraints, SentenceWords
from .search_decoders import search_decoder_for


# Paper 003's search constraints (section 4 and appendix), for its unlabeled, unary-free trees: n_c = the
# number of words, p_c = 3 for SyntaxGym and 5 for summaries. BeamSearchOptions(**CONSTRAINT_SETTINGS[name]).
CONSTRAINT_SETTINGS = {
    "default": dict(max_nonterminals_per_word=2.0, max_consecutive_open=6),
    "paper003-sg": dict(max_nonterminals_per_word=1.0, max_consecutive_open=3),
    "paper003-summaries": dict(max_nonterminals_per_word=1.0, max_consecutive_open=5),
}


@dataclass
class BeamSearchOptions:
    """Options of word-synchronous beam search.

    beam_size: the action beam (successors kept per round and sentence); 300 in papers 002 and 003.
    word_beam_size: hypotheses kept after each word.
    fast_track: word-generating successors admitted from outside the action beam each round.
    max_nonterminals: n_c, the most opening nonterminals a tree may have (None: max_nonterminals_per_word
        times the number of words, rounded up).
    max_nonterminals_per_word: the n_c per word when max_nonterminals is None. 2 lets every gold tree of the
        GUM and PTB samples through under the default normalization (unary chains make NTs outnumber words:
        n_c = the number of words, paper 003's value for its unary-free trees, excludes 9.8% of GUM's and 3.9%
        of the PTB sample's).
    max_consecutive_open: p_c, the most opening nonterminals in a row (None: no limit). The default 6 lets
        every gold tree of both samples through; paper 003's 3 (SyntaxGym) and 5 (summaries), meant for its
        unlabeled, unary-free trees, exclude 5.4% / 0.05% of GUM's and 10.4% / 0.03% of the PTB sample's
        (named settings: CONSTRAINT_SETTINGS). Some cap matters: without one, cheap runs of opening
        nonterminals crowd the action beam.
    max_structural_per_word: the most structural actions between two words: nonterminals, or a dependency
        grammar's arcs and POPs (None: no limit). Paper 002's text has no such cap; its section 3.5 constrains
        arcs by the stack only. The option is this library's (its design notes attribute a per-word action cap
        to the DTG reference implementation, not to the paper).
    marginal: "after_pruning" (rnng-pytorch) or "before_pruning" (the DTG reference) for log p(x_<=t).
    num_trees: how many best trees to return per sentence.
    use_cache: keep a KV cache (True) or re-encode every prefix each round (False).
    """

    beam_size: int = 100
    word_beam_size: int = 10
    fast_track: int = 1
    max_nonterminals: int | None = None
    max_nonterminals_per_word: float = 2.0
    max_consecutive_open: int | None = 6
    max_structural_per_word: int | None = None
    marginal: str = "after_pruning"
    num_trees: int = 1
    use_cache: bool = True

    def check(self):
        for name in ("beam_size", "word_beam_size", "num_trees"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.word_beam_size > self.beam_size:
            raise ValueError(f"word_beam_size ({self.word_beam_size}) cannot be larger than beam_size ({self.beam_size})")
        if not isinstance(self.fast_track, int) or self.fast_track < 0:
            raise ValueError(f"fast_track must be a non-negative integer, got {self.fast_track!r}")
        for name in ("max_nonterminals", "max_consecutive_open", "max_structural_per_word"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be None or a positive integer, got {value!r}")
        if not (isinstance(self.max_nonterminals_per_word, (int, float)) and self.max_nonterminals_per_word > 0):
            raise ValueError(f"max_nonterminals_per_word must be a positive number, got {self.max_nonterminals_per_word!r}")
        if self.marginal not in ("after_pruning", "before_pruning"):
            raise ValueError(f"marginal must be 'after_pruning' or 'before_pruning', got {self.marginal!r}")
        return self


@dataclass
class _Task:
    words: list  # per sentence, the forced words (lists of piece ids)
    max_new_words: list  # per sentence, how many free words may follow (0: forced words only)
    top_k: int | None = None  # sample among the top-k actions instead of beam search
    temperature: float = 1.0  # sampling: divide log-probabilities by it
    top_p: float | None = None  # sampling: keep the most probable actions whose probabilities add up to top_p
    seed: int | None = None
    prefixes: list | None = None  # per sentence, the action ids before it (document-level models)


class ActionIds(list):
    """Action ids (a list) that also carry `starts`: per action, the start (action index, `<s>` = 0) of a Nb-Up
    `)` (paper 003, section 2.2), -1 elsewhere. The beam search's trees for a grammar that `takes_start` are
    these, so that they still read as (ids, score) pairs and a tokenizer's `tree_with_words(ids, words)` finds
    the starts without being told."""

    def __init__(self, ids, starts):
        super().__init__(ids)
        if len(starts) != len(self):
            raise ValueError(f"{len(self)} action ids but {len(starts)} starts; expected one per action")
        self.starts = list(starts)


@dataclass
class SentenceResult:
    """What forced-word beam search finds for one sentence (natural logarithms)."""

    surprisals: list  # per word, marginal(t - 1) - marginal(t)
    end_surprisal: float  # marginal(last word) - log p(x): the cost of ending the sentence there
    log_prob: float  # log p(x) lower bound: logsumexp over the final beam of complete trees
    trees: list  # [(action ids with <s> (and the prefix, if any), joint log-probability)], best first; Nb-Up: the ids
    # are ActionIds, which carry each `)`'s start
    forward_calls: int  # forward calls of the whole batch while this sentence was searched


@dataclass
class _Beam:
    """Hypotheses as rows: the constraints' status, joint scores and action histories, and what the decoder
    gave them (its state and the next action's log-probabilities; None until the decoder has run on them)."""

    status: DecodingStatus
    score: torch.Tensor  # [H] float64, joint log-probability of the actions so far
    actions: torch.Tensor  # [H, L] long action ids, -1 past each row's end
    decoder_state: object = None
    log_probs: torch.Tensor | None = None  # [H, V] float32
    starts: torch.Tensor | None = None  # [H, L] long, Nb-Up: each `)`'s start, -1 elsewhere (None: no grammar start)

    def __len__(self):
        return len(self.score)

    @property
    def lengths(self):
        return (self.actions >= 0).sum(1)

    def select(self, rows):
        """Rows `rows` of the hypotheses; the decoder's output is not carried (its state is opaque here)."""
        return _Beam(self.status.select(rows), self.score[rows], self.actions[rows],
                     starts=None if self.starts is None else self.starts[rows])

    @staticmethod
    def concat(beams):
        width = max(b.actions.shape[1] for b in beams)

        def padded(name):
            return torch.cat([torch.nn.functional.pad(getattr(b, name), (0, width - b.actions.shape[1]), value=-1)
                              for b in beams])

        return _Beam(DecodingStatus.concat([b.status for b in beams]), torch.cat([b.score for b in beams]),
                     padded("actions"), starts=None if beams[0].starts is None else padded("starts"))

    def ids_of(self, rows):
        """The action ids of rows `rows` (a long tensor), a list each (ActionIds with their starts, Nb-Up): the rows
        read back in one piece, not one at a time."""
        actions = self.actions[rows].tolist()
        if self.starts is None:
            return [[action for action in row if action >= 0] for row in actions]
        starts = self.starts[rows].tolist()
        return [ActionIds([a for a in row if a >= 0], [s for a, s in zip(row, row_starts) if a >= 0])
                for row, row_starts in zip(actions, starts)]


def _rows(mask):
    return torch.nonzero(mask).squeeze(1)


def _best(values, k):
    """The k largest of each row of `values` [S, N] and their columns, best first and equal ones by column: a stable
    descending sort's first k. torch.topk alone leaves ties to its kernel, whose choice among them depends on the row's
    length and padding: a sentence searched with others kept other hypotheses than searched alone. A sort costs more,
    so it runs only where finite values tie inside the k or across its boundary."""
    best, columns = torch.topk(values, k, dim=1)
    if not best.numel():
        return best, columns
    last = best[:, -1:]
    tied_inside = (best[:, 1:] == best[:, :-1]) & torch.isfinite(best[:, 1:])
    tied_across = torch.isfinite(last[:, 0]) & ((values == last).sum(1) > (best == last).sum(1))
    if bool(tied_inside.any()) or bool(tied_across.any()):
        best, columns = torch.sort(values, dim=1, descending=True, stable=True)
        best, columns = best[:, :k], columns[:, :k]
    return best, columns


class WordSynchronousBeamSearch:
    """Batched word-synchronous beam search over any model a SearchDecoder can drive."""

    def __init__(self, model, options=None, word_start_mask=None, incomplete_word_ids=(), decoder=None,
                 on_word=None):
        """word_start_mask: for every id, whether it begins a word (tokenizer.word_start_mask); without it every
        terminal piece is a word. incomplete_word_ids: pieces that start a word but spell none of it
        (SentencePiece's bare "\u2581"): in free generation a continuation piece must follow them.
        decoder: a SearchDecoder (search_decoders.py); by default the model's own, or the Transformer
        KV-cache decoder (re-encoding with options.use_cache=False).
        on_word: called after each step with the number of sentences (rows) it advanced, for a progress bar: a
        step takes each sentence's next word, or ends its trees after its last word (a forced sentence of n words
        takes n + 1 steps; a generated one at most max_new_words + 1)."""
        self.model = model
        self.on_word = on_word
        self.options = (options or BeamSearchOptions()).check()
        config = model.config
        self.grammar = grammar_for_config(config)
        self.layout = self.grammar.layout
        self.vocab_size = config.vocab_size
        self.constraints = SearchConstraints(
            self.grammar, word_start_mask, incomplete_word_ids, self.options.max_nonterminals,
            self.options.max_consecutive_open, self.options.max_structural_per_word,
            self.options.max_nonterminals_per_word,
            # a hypothesis never grows into a sequence the model cannot read (backbone.SequenceTooLong)
            max_positions=position_limit(config)[0],
        )
        self.decoder = decoder or search_decoder_for(model, use_cache=self.options.use_cache)
        # A grammar whose pointer action comes with a start (paper 003's Nb-Up `)`): it is chosen with its start,
        # scored log p(action) + log p(start | action)
        self.takes_start = self.grammar.takes_start

    @property
    def forward_calls(self):
        return self.decoder.forward_calls

    @property
    def word_beam_cap(self):
        """rnng-pytorch's bound on a word beam before pruning: min(2 b, b + 5 fast_track)."""
        return min(2 * self.options.beam_size, self.options.beam_size + 5 * self.options.fast_track)

    @torch.no_grad()
    def search(self, words, prefixes=None):
        """Forced words: `words[s]` is sentence s as a list of words, each a list of piece ids.

        prefixes: for a document-level model, `prefixes[s]` are the action ids (`<s>` first) of the complete
            trees before sentence s in its document; the search continues after them, and every score,
            surprisal and log p(x) is conditional on the prefix (log p(x_s | prefix)).
        Returns one SentenceResult per sentence.
        """
        for s, sentence in enumerate(words):
            if not sentence or any(not word for word in sentence):
                raise ValueError(f"sentence {s} is empty or has an empty word; expected at least one word of pieces")
        return self._run(_Task(words, [0] * len(words), prefixes=self._checked_prefixes(prefixes, len(words))))

    def _checked_prefixes(self, prefixes, count):
        if prefixes is None:
            return None
        if len(prefixes) != count:
            raise ValueError(f"got {len(prefixes)} prefixes for {count} sentences; expected one per sentence")
        if not self.grammar.document_level and any(len(p) > 1 for p in prefixes):
            raise ValueError("prefixes of earlier sentences need a document-level model (config.document_level); "
                             "this model reads one tree per sequence")
        checked = []
        for s, prefix in enumerate(prefixes):
            starts = getattr(prefix, "starts", None)  # a prefix's actions may carry their starts (ActionIds)
            prefix = [int(i) for i in prefix]
            start = self.grammar.start_action_id
            if not prefix or prefix[0] != start:
                raise ValueError(f"prefix {s} must start with the start action (id {start})")
            if self.takes_start and starts is None:
                starts = [-1] * len(prefix)  # refused below at its first action that needs one, naming it
            try:
                self.grammar.validate(prefix, require_complete=len(prefix) > 1,
                                      **({} if starts is None else {self._starts_keyword: starts}))
            except ValueError as error:
                raise ValueError(f"prefix {s} is not a sequence of complete trees: {error}") from None
            checked.append(prefix if starts is None else ActionIds(prefix, starts))
        return checked

    @torch.no_grad()
    def generate(self, prompts, max_new_words=20, top_k=None, num_samples=1, seed=None, prefixes=None, temperature=1.0,
                 top_p=None):
        """Free generation after forced prompt words (`prompts[s]`: a list of words, each a list of piece ids;
        it may be empty). Beam search by default; with `top_k`, `num_samples` samples per prompt, every
        action drawn among the top-k legal ones (log-probabilities divided by `temperature`), and among those
        the most probable ones whose probabilities add up to `top_p` (nucleus sampling; None: all k).
        `prefixes` as in `search` (earlier sentences of a document). Returns, per prompt, [(action ids, joint
        log-probability)] best first (beam) or in sampling order."""
        if not isinstance(max_new_words, int) or max_new_words < 1:
            raise ValueError(f"max_new_words must be a positive integer, got {max_new_words!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        if top_k is not None:
            prompts = [p for p in prompts for _ in range(num_samples)]
            if prefixes is not None:
                prefixes = [p for p in prefixes for _ in range(num_samples)]
        results = self._run(_Task(prompts, [max_new_words] * len(prompts), top_k=top_k, seed=seed, temperature=temperature,
                                  top_p=top_p, prefixes=self._checked_prefixes(prefixes, len(prompts))))
        trees = [r.trees for r in results]
        if top_k is None:
            return trees
        return [sum(trees[i * num_samples : (i + 1) * num_samples], []) for i in range(len(trees) // num_samples)]

    # ---- the search -----------------------------------------------------------------------------------
    def _start(self, task):
        """One row per sentence: after `<s>`, or after a document prefix (all its positions in one call)."""
        sequences = task.prefixes or [[self.grammar.start_action_id]] * len(task.words)
        grammar_rows, steps = prefix_rows(self.grammar, sequences)
        decoder_state, log_probs = self.decoder.start(sequences, steps)
        width = max(len(s) for s in sequences)
        actions = torch.full((len(sequences), width), -1, dtype=torch.long)
        for row, sequence in enumerate(sequences):
            actions[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        # n_c counts the nonterminals of this sentence only: open_before holds those of the prefix.
        status = DecodingStatus.start(grammar_rows, [s[-1] for s in sequences])
        starts = None
        if self.takes_start:  # a document prefix's `)` keep their starts
            starts = torch.full_like(actions, -1)
            for row, sequence in enumerate(sequences):
                if getattr(sequence, "starts", None) is not None:
                    starts[row, : len(sequence)] = torch.tensor(sequence.starts, dtype=torch.long)
        return _Beam(status, torch.zeros(len(sequences), dtype=torch.float64), actions, decoder_state, log_probs, starts)

    def _run(self, task):
        self.model.eval()
        options = self.options
        count = len(task.words)
        words = SentenceWords(task.words, task.max_new_words)
        calls_before = self.decoder.forward_calls
        frontier = self._start(task)
        marginals = []  # per word step: (the sentences [S'] that had a word beam, their marginals [S'] float64)
        finished = [[] for _ in range(count)]  # per sentence: (joint log-probability, action ids) of complete trees
        generator = torch.Generator().manual_seed(task.seed) if task.seed is not None else None
        while len(frontier):
            if self.on_word is not None:
                advancing = int(torch.count_nonzero(torch.bincount(frontier.status.sentence, minlength=count)))
            candidates, finished_candidates = self._next_word(frontier, words, task, finished, generator)
            frontier = self._prune(candidates, finished_candidates, marginals, task)
            if self.on_word is not None:
                self.on_word(advancing)
        calls = self.decoder.forward_calls - calls_before
        marginals = self._marginals_by_sentence(marginals, count)
        results = []
        sampling = task.top_k is not None
        for s in range(count):
            if not finished[s]:
                raise RuntimeError(
                    f"sentence {s}: no complete tree was found under the beam constraints; relax max_nonterminals, "
                    "max_consecutive_open or max_structural_per_word, or widen the beam"
                )
            n = len(task.words[s])
            m = [0.0] + marginals[s]
            ranked = finished[s] if sampling else sorted(finished[s], key=lambda item: -item[0])[: options.word_beam_size]
            log_prob = float(torch.logsumexp(torch.tensor([score for score, _ in ranked], dtype=torch.float64), 0))
            surprisals = [m[t - 1] - m[t] for t in range(1, min(n, len(m) - 1) + 1)]
            end = m[n] - log_prob if len(m) > n else float("nan")
            trees = [(ids, score) for score, ids in (ranked if sampling else ranked[: options.num_trees])]
            results.append(SentenceResult(surprisals, end, log_prob, trees, calls))
        return results

    @staticmethod
    def _marginals_by_sentence(steps, count):
        """Per sentence, its marginals in word order (a list of floats) from the word steps' (sentences, values)."""
        if not steps:
            return [[] for _ in range(count)]
        sentence = torch.cat([sentences for sentences, _ in steps])
        values = torch.cat([values for _, values in steps])
        order = torch.argsort(sentence, stable=True)  # sentence by sentence, each in word order
        sizes = torch.bincount(sentence, minlength=count).tolist()
        flat, start, by_sentence = values[order].tolist(), 0, []
        for size in sizes:
            by_sentence.append(flat[start : start + size])
            start += size
        return by_sentence

    def _next_word(self, frontier, words, task, finished, generator):
        """Rounds of expansion until every sentence has its word beam for the next word (module docstring).

        Returns the word-completing successors (a list of _Pending, not yet run through the decoder: only
        those that survive pruning will be) and those that completed their tree in doing so, which take part in
        pruning and marginals: (their sentences [C] long, their scores [C] float64), in the order they came.
        """
        options = self.options
        count = len(task.words)
        sampling = task.top_k is not None
        reached = torch.zeros(count, dtype=torch.long)  # word-completing successors per sentence
        reached_in_beam = torch.zeros(count, dtype=torch.long)  # ... of them within the action beam
        pending, completed_sentence, completed_score = [], [], []
        active = frontier
        while len(active):
            allowed, completing, columns = self.constraints.allowed_columns(active.status, words)
            # Only the columns some hypothesis may take (with forced words: the nonterminals and a few pieces).
            taken = _rows(allowed.any(0))
            columns, allowed, completing = columns[taken], allowed[:, taken], completing[:, taken]
            # float32 for choosing; the successors' scores add up in float64
            scores = active.log_probs[:, columns] + active.score.float()[:, None]
            scores = scores.masked_fill_(~allowed, float("-inf"))
            choices_with_starts = None
            if self.takes_start:
                scores, completing, columns, choices_with_starts = self._with_starts(active, scores, completing, columns,
                                                                                     words)
            if sampling:
                parents, choices = self._sample(scores, task.top_k, generator, task.temperature, task.top_p)
                fast = torch.zeros(len(parents), dtype=torch.bool)
            else:
                parents, choices, fast = self._select(scores, completing, active.status.sentence, count)
            actions = columns[choices]
            picked_starts = None
            if choices_with_starts is not None:
                starts, pointer = choices_with_starts
                picked_starts = (starts[parents, choices], pointer[parents, choices])
            children, steps, complete = self._children(active, parents, actions, words, picked_starts)
            completes_round = completing[parents, choices]
            sentence = children.status.sentence
            reached += torch.bincount(sentence[completes_round], minlength=count)
            reached_in_beam += torch.bincount(sentence[completes_round & ~fast], minlength=count)
            ended = _rows(complete)  # complete trees need no more model calls
            if len(ended):
                for s, score, ids in zip(sentence[ended].tolist(), children.score[ended].tolist(),
                                         children.ids_of(ended)):
                    finished[s].append((score, ids))
                completed = ended[completes_round[ended]]
                completed_sentence.append(sentence[completed])
                completed_score.append(children.score[completed])
            done = _rows(completes_round & ~complete)
            if len(done):
                pending.append(_Pending(children.select(done), active.decoder_state, parents[done], steps.select(done)))
            going_on = ~completes_round & ~complete
            if not sampling:  # rnng-pytorch: a word ends when b successors reached it within the action beam
                going_on &= ((reached_in_beam < options.beam_size) & (reached < self.word_beam_cap))[sentence]
            going_on = _rows(going_on)
            if not len(going_on):
                break
            next_active = children.select(going_on)
            next_active.decoder_state, next_active.log_probs = self.decoder.advance(
                active.decoder_state, parents[going_on], actions[going_on], steps.select(going_on))
            active = next_active
        completed = (torch.cat(completed_sentence) if completed_sentence else torch.zeros(0, dtype=torch.long),
                     torch.cat(completed_score) if completed_score else torch.zeros(0, dtype=torch.float64))
        return pending, completed

    def _children(self, parents_beam, parents, actions, words, picked_starts=None):
        """The successors (parents[i], actions[i]): their beam rows (without decoder state yet), what the
        grammar says of each action (its new positions), and whether each completes its tree. Nb-Up:
        picked_starts = (starts [N], -1 but for a `)`, and the pointer's log p(start) [N], 0 but for a `)`)."""
        status = parents_beam.status.select(parents)
        if picked_starts is None:
            grammar_rows, steps = status.grammar_rows.step(actions)  # the constraints took them from legal_actions
        else:  # ... and the starts from legal_starts (_with_starts)
            grammar_rows, steps = status.grammar_rows.step(actions, picked_starts[0])
        counters = self.constraints.counters_after(status, actions, words)
        status = DecodingStatus(grammar_rows, status.sentence, actions, **counters, open_before=status.open_before)
        lengths = parents_beam.lengths[parents]
        rows = torch.arange(len(parents))
        history = torch.nn.functional.pad(parents_beam.actions[parents], (0, 1), value=-1)
        history[rows, lengths] = actions
        score = parents_beam.score[parents] + parents_beam.log_probs[parents, actions].double()
        start_history = None
        if parents_beam.starts is not None:
            start_history = torch.nn.functional.pad(parents_beam.starts[parents], (0, 1), value=-1)
            if picked_starts is not None:
                start_history[rows, lengths] = picked_starts[0]
                score = score + picked_starts[1].double()  # p((")", s)) = p(")") p(s | ")")
        beam = _Beam(status, score, history, starts=start_history)
        return beam, steps, grammar_rows.complete  # in a document: the current sentence's root closed

    @property
    def _starts_keyword(self):
        """The keyword under which the grammar's validate and batch take the starts (grammar.action_inputs)."""
        return self.grammar.action_inputs[self.grammar.start_input]

    def _with_starts(self, active, scores, completing, columns, words):
        """A grammar that takes_start (paper 003's Nb-Up, section 2.2): replace the column of its pointer action
        (grammar.pointer_action_id, a `)`) in `scores` [H, K] (joint scores of each successor) by one column per
        feasible start (grammar.legal_starts, via the rows' start_choices; only the bottom one for the last
        constituent that n_c allows: SearchConstraints.final_close_only), scored joint + log p(start | action) from
        the decoder's pointer. Returns (scores, completing, columns: the action id of each column, (starts [H, K']
        the start each column takes, -1 but for the new ones; pointer [H, K'] its log p(start), 0 but for the new
        ones)), or the inputs unchanged (and None) when no hypothesis may take the pointer action."""
        close = torch.nonzero(columns == self.grammar.pointer_action_id).squeeze(1)
        if not len(close):
            return scores, completing, columns, None
        close = int(close[0])
        closing = torch.isfinite(scores[:, close])
        if not bool(closing.any()):
            return scores, completing, columns, None
        starts, positions = active.status.grammar_rows.start_choices()
        pointer = self.decoder.pointer_log_probs(active.decoder_state, positions)  # [H, C], -inf on padding
        starts = torch.from_numpy(starts)
        feasible = self.constraints.feasible_starts(active.actions, starts) & closing[:, None]
        feasible[self.constraints.final_close_only(active.status, words), 1:] = False
        start_scores = (scores[:, close : close + 1] + pointer).masked_fill(~feasible, float("-inf"))
        scores = scores.clone()
        scores[:, close] = float("-inf")  # a `)` is chosen with its start only
        completing = completing.clone()
        closes_round = completing[:, close : close + 1] & feasible
        completing[:, close] = False
        width = scores.shape[1]
        rows = len(scores)
        all_starts = torch.cat([torch.full((rows, width), -1, dtype=torch.long), starts.masked_fill(~feasible, -1)], 1)
        all_pointer = torch.cat([torch.zeros((rows, width)), pointer.masked_fill(~feasible, 0.0)], 1)
        return (torch.cat([scores, start_scores], 1), torch.cat([completing, closes_round], 1),
                torch.cat([columns, columns[close].repeat(starts.shape[1])]), (all_starts, all_pointer))

    def _prune(self, pending, completed, marginals, task):
        """Prune each sentence's word beam to `word_beam_size` (sampling keeps all), record the marginals (appended
        to `marginals` as (sentences, values)), and run the kept hypotheses through the decoder (one call): the
        frontier of the next word. Every sentence at once: no work per sentence."""
        options = self.options
        sampling = task.top_k is not None
        count = len(task.words)
        held = sum(len(group.beam) for group in pending)
        # A sentence's word beam: its candidates (the pending groups' rows, one after the other), then its complete
        # trees (as they came); row i < held is a candidate, the others complete trees.
        completed_sentence, completed_score = completed
        sentence = torch.cat([group.beam.status.sentence for group in pending] + [completed_sentence])
        score = torch.cat([group.beam.score for group in pending] + [completed_score])
        # Best first within each sentence, ties in that order: a stable sort by score, then a stable one by sentence.
        order = torch.argsort(score, descending=True, stable=True)
        order = order[torch.argsort(sentence[order], stable=True)]
        sentence = sentence[order]
        sizes = torch.bincount(sentence, minlength=count)
        rank = torch.arange(len(order)) - (torch.cumsum(sizes, 0) - sizes)[sentence]
        # The word beam holds at most min(2b, b + 5 fast_track) before pruning (sampling keeps all).
        held_before = sizes if sampling else sizes.clamp(max=self.word_beam_cap)
        kept_size = sizes if sampling else sizes.clamp(max=options.word_beam_size)
        scored_size = kept_size if options.marginal == "after_pruning" else held_before
        marginals.append(self._segment_logsumexp(score[order], sizes, scored_size))
        kept = order[(rank < kept_size[sentence]) & (order < held)]  # complete trees do not go on
        kept = torch.sort(kept).values
        if not len(kept):
            return _EMPTY
        # Run the kept ones: each pending group's rows from its parents' decoder state, all in one call (only the kept
        # rows of each group are taken and joined, not every candidate).
        beams, parent_states, actions, steps, start = [], [], [], [], 0
        for group in pending:
            mine = kept[(kept >= start) & (kept < start + len(group.beam))] - start
            start += len(group.beam)
            if len(mine):
                beams.append(group.beam.select(mine))
                parent_states.append(self.decoder.select(group.parent_state, group.parents[mine]))
                actions.append(group.beam.status.last_action[mine])
                steps.append(group.steps.select(mine))
        frontier = _Beam.concat(beams)
        frontier.decoder_state, frontier.log_probs = self.decoder.advance(
            self.decoder.concat(parent_states), torch.arange(len(kept)), torch.cat(actions), NewPositions.concat(steps))
        frontier.decoder_state = self.decoder.retain(frontier.decoder_state)
        return frontier

    @staticmethod
    def _segment_logsumexp(values, sizes, taken):
        """(sentences, marginals): for each sentence s with values, the logsumexp (float64) of its first taken[s] of
        `values` (sentence by sentence, sizes[s] each). Sentences taking as many go through one logsumexp of a
        [G, n] table: each row's reduction is that of its own n values, so a sentence's marginal is the number a
        search of it alone finds, whatever the other sentences hold."""
        first = torch.cumsum(sizes, 0) - sizes
        present = torch.nonzero(sizes).squeeze(1)
        marginal = torch.empty(len(present), dtype=torch.float64)
        for n in torch.unique(taken[present]).tolist():
            group = torch.nonzero(taken[present] == n).squeeze(1)
            table = values[first[present[group]][:, None] + torch.arange(n)]
            marginal[group] = torch.logsumexp(table, 1)
        return present, marginal

    def _select(self, scores, completing, sentence, count):
        """Per sentence, the `beam_size` best successors and the fast track: up to `fast_track` round-completing
        successors from outside them, fewer by those inside. All sentences in one top-k. Returns (parent
        rows, actions, fast-tracked flags), sentence by sentence."""
        rows, vocab = scores.shape
        options = self.options
        if count == 1:
            row_of, flat, completing_flat = torch.arange(rows)[None], scores.view(1, -1), completing.view(1, -1)
        else:  # lay the rows out as [sentence, rank within its sentence, action]
            sizes = torch.bincount(sentence, minlength=count)
            order = torch.argsort(sentence, stable=True)
            within = torch.empty_like(sentence)
            within[order] = torch.arange(rows) - (torch.cumsum(sizes, 0) - sizes)[sentence[order]]
            width = int(sizes.max())
            row_of = torch.full((count, width), -1, dtype=torch.long)
            row_of[sentence, within] = torch.arange(rows)
            flat = scores.new_full((count, width, vocab), float("-inf"))
            flat[sentence, within] = scores
            flat = flat.view(count, -1)
            completing_flat = torch.zeros((count, width, vocab), dtype=torch.bool)
            completing_flat[sentence, within] = completing
            completing_flat = completing_flat.view(count, -1)
        top_scores, top = _best(flat, min(options.beam_size, flat.shape[1]))
        picked_sentence, rank = torch.nonzero(torch.isfinite(top_scores), as_tuple=True)
        picked = top[picked_sentence, rank]
        fast = torch.zeros(len(picked), dtype=torch.bool)
        if options.fast_track:
            # `completing` implies allowed, so every candidate is finite.
            candidate_sentence, candidate = torch.nonzero(completing_flat, as_tuple=True)
            in_top = torch.zeros_like(completing_flat)
            in_top[picked_sentence, picked] = True
            inside = completing_flat[picked_sentence, picked]
            wanted = (options.fast_track - torch.bincount(picked_sentence[inside], minlength=count)).clamp(min=0)
            outside = ~in_top[candidate_sentence, candidate]
            candidate_sentence, candidate = candidate_sentence[outside], candidate[outside]
            # best first within each sentence: sort by score, then (stably) by sentence
            order = torch.argsort(flat[candidate_sentence, candidate], descending=True, stable=True)
            order = order[torch.argsort(candidate_sentence[order], stable=True)]
            candidate_sentence, candidate = candidate_sentence[order], candidate[order]
            per_sentence = torch.bincount(candidate_sentence, minlength=count)
            rank = torch.arange(len(candidate)) - (torch.cumsum(per_sentence, 0) - per_sentence)[candidate_sentence]
            chosen = rank < wanted[candidate_sentence]
            picked_sentence = torch.cat([picked_sentence, candidate_sentence[chosen]])
            picked = torch.cat([picked, candidate[chosen]])
            fast = torch.cat([fast, torch.ones(int(chosen.sum()), dtype=torch.bool)])
            order = torch.argsort(picked_sentence, stable=True)  # sentence by sentence
            picked_sentence, picked, fast = picked_sentence[order], picked[order], fast[order]
        return row_of[picked_sentence, picked // vocab], picked % vocab, fast

    def _sample(self, scores, top_k, generator, temperature=1.0, top_p=None):
        """One successor per hypothesis that has a legal action, drawn among its top-k legal actions
        (log-probabilities / temperature), and of those among the most probable ones whose probabilities add up
        to top_p (transformers' order: temperature, top-k, top-p): (parent rows, actions)."""
        rows = _rows(torch.isfinite(scores).any(1))
        values, indices = torch.topk(scores[rows], min(top_k, scores.shape[1]), dim=1)
        probabilities = torch.softmax((values - values[:, :1]) / temperature, dim=1)  # -inf (illegal) -> 0
        if top_p is not None:  # values are sorted: drop an action once those before it reach top_p (the first stays)
            before = torch.cumsum(probabilities, dim=1) - probabilities
            probabilities = probabilities.masked_fill(before >= top_p, 0.0)
        drawn = torch.multinomial(probabilities.float(), 1, generator=generator).squeeze(1)
        return rows, indices[torch.arange(len(rows)), drawn]


@dataclass
class _Pending:
    """Successors that completed the round, not yet run through the decoder: rows `parents` of
    `parent_state` followed by their last actions (`beam.status.last_action`), with their new positions."""

    beam: _Beam  # decoder_state and log_probs not set
    parent_state: object
    parents: torch.Tensor
    steps: NewPositions


class _EmptyBeam:
    def __len__(self):
        return 0


_EMPTY = _EmptyBeam()


def prompt_words(ids, grammar, word_start_mask=None):
    """Split the start action + word pieces (a tokenizer's output for a list of words, for a model of `grammar`)
    into words of piece ids. Padding, `<s>` and the grammar's start action (`grammar.start_action_id`) are skipped."""
    layout = grammar.layout
    kinds = layout.kinds(np.asarray(ids, dtype=np.int64))
    skipped = {layout.pad_token_id, layout.bos_token_id, grammar.start_action_id}
    words = []
    for position, (piece, kind) in enumerate(zip(ids, kinds)):
        piece = int(piece)
        if piece in skipped:
            continue
        if kind != ActionKind.TERMINAL:
            raise ValueError(
                f"prompt position {position} holds id {piece} ({ActionKind(int(kind)).name}); a prompt must be words "
                "(encode it with tokenizer(words, is_split_into_words=True))"
            )
        starts_word = word_start_mask is None or bool(word_start_mask[piece])
        if starts_word or not words:
            words.append([piece])
        else:
            words[-1].append(piece)
    return words


def syntactic_generate(model, input_ids=None, num_beams=1, do_sample=False, top_k=None, max_new_words=20,
                       num_return_sequences=1, word_start_mask=None, incomplete_word_ids=(), seed=None, temperature=1.0,
                       top_p=None, pad_token_id=None, with_scores=False, on_word=None, **beam_options):
    """What `model.generate` does for a tree model: complete each prompt into a tree.

    Returns a LongTensor [B * num_return_sequences, L] of action ids (`<s>` first, right-padded with
    `pad_token_id`, by default the model's pad id) that `tokenizer.decode` turns into trees; with `with_scores`,
    (that tensor, [B * num_return_sequences] float64 each tree's joint log p(x, y)). For a model whose grammar
    takes_start (paper 003's Nb-Up) the tensor also has an attribute named by the grammar's `start_input` (Nb-Up:
    `constituent_starts` [B * num_return_sequences, L], each `)`'s start, -1 elsewhere), without which its trees
    cannot be read: `tokenizer.decode(output[i], starts=output.constituent_starts[i].tolist())`.
    With do_sample, every action is drawn among the top-k legal ones (k = top_k, default 2 as paper 003; 0 means
    no top-k filtering, as in transformers: all legal actions), with their log-probabilities divided by
    `temperature`, and among them the most probable ones whose probabilities add up to `top_p` (None or 1: all);
    otherwise word-synchronous beam search with a word beam of num_beams (at least num_return_sequences) and an
    action beam ten times larger, unless beam_size / word_beam_size are given. `on_word`: as in
    WordSynchronousBeamSearch (progress; with do_sample each of the num_return_sequences trees is a row).
    """
    grammar = grammar_for_config(model.config)
    layout = grammar.layout
    if input_ids is None:
        prompts = [[]]
    else:
        prompts = [prompt_words(row.tolist(), grammar, word_start_mask) for row in torch.as_tensor(input_ids)]
    word_beam = max(1 if num_beams is None else num_beams, num_return_sequences)
    beam_options.setdefault("max_consecutive_open", 5)  # paper 003's setting for generation
    options = BeamSearchOptions(
        beam_size=beam_options.pop("beam_size", 10 * word_beam),
        word_beam_size=beam_options.pop("word_beam_size", word_beam),
        num_trees=num_return_sequences,
        **beam_options,
    )
    search = WordSynchronousBeamSearch(model, options, word_start_mask=word_start_mask,
                                       incomplete_word_ids=incomplete_word_ids, on_word=on_word)
    if do_sample:
        if top_k is not None and (not isinstance(top_k, int) or top_k < 0):
            raise ValueError(f"top_k must be a non-negative integer (0: all legal actions), got {top_k!r}")
        k = 2 if top_k is None else top_k or model.config.vocab_size
        trees = search.generate(prompts, max_new_words=max_new_words, top_k=k, num_samples=num_return_sequences, seed=seed,
                                temperature=temperature, top_p=None if top_p is None or top_p >= 1 else top_p)
    else:
        trees = search.generate(prompts, max_new_words=max_new_words)
    rows, scores = [], []
    for per_prompt in trees:
        chosen = per_prompt[:num_return_sequences]
        while len(chosen) < num_return_sequences:  # fewer complete trees than asked: repeat the best
            chosen.append(chosen[0])
        rows.extend(ids for ids, _ in chosen)
        scores.extend(score for _, score in chosen)
    width = max(len(r) for r in rows)
    pad = layout.pad_token_id if pad_token_id is None else pad_token_id
    output = torch.full((len(rows), width), pad, dtype=torch.long)
    for index, row in enumerate(rows):
        output[index, : len(row)] = torch.tensor(row, dtype=torch.long)
    if search.takes_start:
        starts = torch.full((len(rows), width), -1, dtype=torch.long)
        for index, row in enumerate(rows):
            starts[index, : len(row)] = torch.tensor(row.starts, dtype=torch.long)
        setattr(output, grammar.start_input, starts)
    return (output, torch.tensor(scores, dtype=torch.float64)) if with_scores else output
