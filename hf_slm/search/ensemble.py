"""Ensembles (paper 000, section 3.7): the uniform mixture of K models' next-action distributions,

    p_ens(a_i | a_<i) = 1/K sum_k p_k(a_i | a_<i),

mixed action by action (the section's equation), not over whole sequences: log p_ens(x, y) is the sum over actions
of log p_ens(a_i | a_<i). The paper mixes TGs with TXLs (CC) (heterogeneous ensembles) as well as models of one kind.

A UniformMixture stands wherever a model does. Scoring given trees (`hf_slm.action_log_probs`, `joint_log_probs`:
proposals, reranking) scores each member through its own grammar and mixes per action; the word-synchronous beam
search (hf_slm.search.beam: `score`, `parse`, SyntaxGym, perplexity from the beam) drives MixtureSearchDecoder, which
advances every member's decoder in step and gives the search the mixture's next-action log-probabilities; a Scorer
that reads a model's logits (SOM's) reads the mixture's `forward`, whose logits are the mixture's log-probabilities.
`mixture_log_probs` is the one place the rule is computed.

The members must read one vocabulary and id layout (their tokenizers are the same) and be of families scored alike
(one Scorer over one tree format); they may differ in grammar and family (TG and TXL (CC), the paper's heterogeneous
ensembles, read the same action sequences: each grammar gives one prediction per action, so the per-action
probabilities line up). The search takes legality, its constraints and the position limit from the first member's
grammar (the lead); a member whose grammar expands actions to more positions (TG's doubled closing nonterminals
against TXL (CC)) can outgrow its own maximum first, and the sentence is then left out, named.
"""

import copy
import json
import math

import numpy as np
import torch
from transformers.modeling_outputs import CausalLMOutput

from ..families import family_for_config, variant_for_config
from ..modeling.configuration_slm import position_limit
from ..modeling.grammars import grammar_for_config
from ..modeling.hypothesis_rows import HypothesisRows, prefix_rows
from ..modeling.search_decoders import SearchDecoder, search_decoder_for


def mixture_log_probs(member_log_probs):
    """log (1/K sum_k p_k) of stacked members' log-probabilities [K, ...] (a tensor): logsumexp over the members,
    less log K."""
    return torch.logsumexp(member_log_probs, dim=0) - math.log(member_log_probs.shape[0])


class UniformMixture(torch.nn.Module):
    """The uniform mixture of several models (module docstring): usable wherever one of them is.

    config: a copy of the first member's config, named after every member (`name_or_path` "A + B"), with the
        smallest of the members' position limits; what the search, the checks and the results files read.
    """

    def __init__(self, models, names=None):
        """models: the members (at least one); names: how messages call each (default: its config's name_or_path)."""
        super().__init__()
        models = list(models)
        if not models:
            raise ValueError("an ensemble needs at least one model")
        names = list(names) if names is not None else [_model_name(model, index) for index, model in enumerate(models)]
        _check_scored_alike(models, names)
        _check_one_layout(models, names)
        levels = {bool(getattr(model.config, "document_level", False)) for model in models}
        if len(levels) > 1:
            raise ValueError("ensemble members must all read sentences or all read documents (config.document_level); "
                             f"{_listed(names, [getattr(m.config, 'document_level', False) for m in models])}")
        self.members = torch.nn.ModuleList(models)
        self.names = names
        self.config = copy.deepcopy(models[0].config)
        self.config.name_or_path = " + ".join(names)
        limits = [position_limit(model.config) for model in models]
        if limits[0][0] is not None and all(limit is not None for limit, _ in limits):
            setattr(self.config, limits[0][1], min(limit for limit, _ in limits))

    @property
    def name_or_path(self):
        return self.config.name_or_path

    def forward(self, input_ids=None, attention_mask=None, **inputs):
        """Every member on the same inputs (each expands the action ids through its own grammar); `logits` [B, T, V]
        are the mixture's log-probabilities of the next action (a log_softmax of them gives them back)."""
        logits = [member(input_ids=input_ids, attention_mask=attention_mask, **inputs).logits.float() for member in
                  self.members]
        return CausalLMOutput(logits=mixture_log_probs(torch.stack([torch.log_softmax(x, dim=-1) for x in logits])))

    def action_log_probs(self, sequences, **options):
        """Per action-id sequence (`<s>` first), log p_ens(a_t | a_<t) for every action after `<s>` (numpy float64):
        each member's hf_slm.action_log_probs (options: batch_size, progress), mixed per action."""
        from .scoring import action_log_probs

        per_member = [action_log_probs(member, sequences, **options) for member in self.members]
        return [mixture_log_probs(torch.from_numpy(np.stack(arrays))).numpy() for arrays in zip(*per_member)]

    def joint_log_probs(self, sequences, **options):
        """log p_ens(x, y) of each action-id sequence: the sum of its mixed per-action log-probabilities."""
        return [float(values.sum()) for values in self.action_log_probs(sequences, **options)]

    def search_decoder(self, use_cache=True):
        """The decoder the word-synchronous beam search drives (search_decoders.search_decoder_for asks for it)."""
        return MixtureSearchDecoder(list(self.members), use_cache=use_cache)


def _model_name(model, index):
    return str(getattr(model.config, "_name_or_path", "") or f"member {index + 1}")


def _listed(names, values):
    return ", ".join(f"{name}: {value}" for name, value in zip(names, values))


def _check_scored_alike(models, names):
    """The members' families must score them one way (their records' Scorer, Family.scorer) over one tree format
    (Variant.tree_format): TG and TXL (CC) are two families that do, paper 003's compositional models and a TG do not."""
    kinds = []
    for model in models:
        family, variant = family_for_config(model.config), variant_for_config(model.config)
        kinds.append((family.scorer, variant.tree_format))
    if len(set(kinds)) > 1:
        shown = [f"{variant_for_config(m.config).display_name} (family {family_for_config(m.config).name}: "
                 f"{scorer.__name__}, {tree_format} trees)" for m, (scorer, tree_format) in zip(models, kinds)]
        raise ValueError("ensemble members must be of families scored alike, by one Scorer over one tree format; got "
                         f"{_listed(names, shown)}")


def _check_one_layout(models, names):
    """The vocabulary size and, for a family with grammars, the whole id layout (every action kind's ids, a dependency
    layout's arcs included); a model without a grammar (SOM) reads the ids of its special tokens."""

    def layout(config):
        if family_for_config(config).grammar_classes is None:
            return {name: getattr(config, name, None) for name in ("bos_token_id", "eos_token_id", "pad_token_id")}
        return grammar_for_config(config).layout.to_dict()

    layouts = [json.dumps([m.config.vocab_size, layout(m.config)], sort_keys=True, default=str) for m in models]
    if len(set(layouts)) > 1:
        differing = [name for name, layout in zip(names, layouts) if layout != layouts[0]]
        raise ValueError(f"ensemble members must share one vocabulary and id layout; found {len(set(layouts))} "
                         f"different ones ({', '.join(differing)} differ from {names[0]}): members need one tokenizer")


def check_member_tokenizers(tokenizers, names):
    """ValueError naming the first member whose tokenizer is not the first member's: another class, vocabulary,
    id layout, linearization or tree normalization (an ensemble reads every sentence through one tokenizer)."""

    def described(tokenizer):
        return {"class": type(tokenizer).__name__, "vocabulary": tokenizer.get_vocab(),
                "action layout": getattr(tokenizer, "action_layout", None),
                "linearization": getattr(tokenizer, "linearization", None),
                "normalization": getattr(tokenizer, "normalization", None)}

    first = described(tokenizers[0])
    for name, tokenizer in zip(names[1:], tokenizers[1:]):
        other = described(tokenizer)
        differences = [key for key in first if first[key] != other[key]]
        if differences:
            raise ValueError(f"ensemble members must share one tokenizer: {name}'s differs from {names[0]}'s in its "
                             f"{', '.join(differences)}")


def ensemble_of_checkpoints(loaded, names):
    """(UniformMixture, tokenizer) of checkpoints loaded as (model, tokenizer) pairs (checkpoints.loading), their
    tokenizers checked to be one (check_member_tokenizers)."""
    check_member_tokenizers([tokenizer for _, tokenizer in loaded], names)
    return UniformMixture([model for model, _ in loaded], names=names), loaded[0][1]


class _MixtureRows:
    """A MixtureSearchDecoder state: per member its decoder's state, and its own grammar rows where its grammar is
    not the search's (None where it is: the search's steps are its own); `pointer` [K, H]: each member's log p of the
    lead grammar's pointer action (a grammar that takes_start), which mixes the start pointers."""

    def __init__(self, states, rows, pointer=None):
        self.states, self.rows, self.pointer = states, rows, pointer


class MixtureSearchDecoder(SearchDecoder):
    """The search decoder of a UniformMixture (search_decoders.py's interface): each call runs every member's own
    decoder on the same hypotheses, and returns log p_ens of the next action (mixture_log_probs). A member whose
    grammar is not the lead's (the first member's, which the search steps) keeps its own grammar rows, stepped by the
    same actions, for the positions its own decoder reads.

    A grammar that takes_start (paper 003's Nb-Up `)`): the search scores a `)` with start s as
    log p(`)`) + log p(s | `)`), so the mixture's pointer is p_ens(s | `)`) = sum_k p_k(`)`) p_k(s | `)`) / sum_k
    p_k(`)`), and the two add up to log p_ens(`)`, s), as `action_log_probs` scores that action.
    """

    def __init__(self, members, use_cache=True):
        super().__init__()
        self.decoders = [search_decoder_for(member, use_cache=use_cache) for member in members]
        lead = grammar_for_config(members[0].config)
        grammars = [grammar_for_config(member.config) for member in members]
        # the search steps the lead grammar: a member of another grammar steps its own (None: the lead's)
        self.own_grammars = [None if _same_grammar(lead, g) else g for g in grammars]
        for member, grammar in zip(members, self.own_grammars):
            if grammar is not None and (grammar.takes_start or lead.takes_start):
                raise ValueError(f"ensemble members of different grammars ({members[0].config.grammar} and "
                                 f"{member.config.grammar}) cannot search together where actions carry starts (paper "
                                 "003's Nb-Up): each member's grammar would need the start the search picks")
        self.pointer_action_id = lead.pointer_action_id if lead.takes_start else None

    def _mixed(self, states, rows, member_log_probs):
        stacked = torch.stack(member_log_probs)  # [K, H, V]
        pointer = None if self.pointer_action_id is None else stacked[:, :, self.pointer_action_id]
        self.forward_seconds = sum(decoder.forward_seconds for decoder in self.decoders)
        # the members' caches are held together
        self.peak_cache_bytes = max(self.peak_cache_bytes, sum(decoder.peak_cache_bytes for decoder in self.decoders))
        return _MixtureRows(states, rows, pointer), mixture_log_probs(stacked)

    def _start(self, sequences, steps):
        states, rows, log_probs = [], [], []
        for decoder, grammar in zip(self.decoders, self.own_grammars):
            own_rows, own_steps = (None, steps) if grammar is None else prefix_rows(grammar, sequences)
            state, member_log_probs = decoder.start(sequences, own_steps)
            states.append(state)
            rows.append(own_rows)
            log_probs.append(member_log_probs)
        return self._mixed(states, rows, log_probs)

    def _advance(self, state, rows, actions, steps):
        states, own, log_probs = [], [], []
        for decoder, member_state, member_rows in zip(self.decoders, state.states, state.rows):
            own_steps = steps
            if member_rows is not None:
                member_rows, own_steps = member_rows.select(rows).step(actions)
            member_state, member_log_probs = decoder.advance(member_state, rows, actions, own_steps)
            states.append(member_state)
            own.append(member_rows)
            log_probs.append(member_log_probs)
        return self._mixed(states, own, log_probs)

    def select(self, state, rows):
        return _MixtureRows([decoder.select(s, rows) for decoder, s in zip(self.decoders, state.states)],
                            [None if r is None else r.select(rows) for r in state.rows],
                            None if state.pointer is None else state.pointer[:, torch.as_tensor(rows)])

    def concat(self, states):
        members = range(len(self.decoders))
        return _MixtureRows(
            [self.decoders[k].concat([s.states[k] for s in states]) for k in members],
            [None if states[0].rows[k] is None else HypothesisRows.concat([s.rows[k] for s in states]) for k in members],
            None if states[0].pointer is None else torch.cat([s.pointer for s in states], dim=1))

    def retain(self, state):
        return _MixtureRows([decoder.retain(s) for decoder, s in zip(self.decoders, state.states)], state.rows,
                            state.pointer)

    def pointer_log_probs(self, state, positions):
        """[H, C] log p_ens(s | `)`) of the candidate starts (class docstring); -inf on padding."""
        pointed = torch.stack([decoder.pointer_log_probs(s, positions) for decoder, s in
                               zip(self.decoders, state.states)])  # [K, H, C]
        joint = torch.logsumexp(state.pointer[:, :, None] + pointed, dim=0)
        return joint - torch.logsumexp(state.pointer, dim=0)[:, None]


def _same_grammar(first, second):
    """Whether two members' grammars step actions alike: one class (a grammar's rules and variant are its class), at
    one document level (the members' id layouts are checked to be one)."""
    return type(first) is type(second) and first.document_level == second.document_level


__all__ = ["MixtureSearchDecoder", "UniformMixture", "check_member_tokenizers", "ensemble_of_checkpoints",
           "mixture_log_probs"]
