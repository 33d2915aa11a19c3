"""The tokenizer of Dependency Transformer Grammars (paper 002): dependency trees <-> transition-action ids.

Vocabulary, in contiguous ranges (the fields of modeling/dependency_grammars.DependencyLayout,
`tokenizer.action_layout`):

    0 <pad>, 1 <s>, 2 </s>, 3 <unk>
    [4, root)                         SentencePiece pieces of the words (as SyntacticTokenizer)
    root                              <root>, the artificial root of the paper
    [left_arc_start, left_arc_stop)   <LA> (arc-swift: <LA[1]> ... <LA[K]>)
    [right_arc_start, right_arc_stop) <RA> (arc-swift: <RA[1]> ... <RA[K]>)
    pop                               <POP> (arc-eager's POP; the reference variant's pop_root)

A tree encodes as `<root>` (the reference variant: `<s>`), the oracle's transitions of its transition system
(tokenization/transitions.py; each GEN as the word's pieces), and `</s>`. Inputs: a `DependencyTree`, a tree
written inline (`There/2 is/0 a/4 difference/2`: every whitespace-separated item is WORD/HEAD), a mapping with
`words` and `heads` (an example of hf_slm.data.load_conllu), or plain words
(`is_split_into_words=True`, or a string that is not an inline tree): the start token and the pieces, a prompt
or a sentence to score; a bracketed constituency tree is a ValueError naming these formats. Decoding gives the
inline tree back when the ids are a whole sequence, between `<root> ... </s>` unless skip_special_tokens. The
start token (`start_id`, `bos_token`) is `<root>` (`<s>` in the reference variant).

This file is hub code: it imports only its siblings, transformers and sentencepiece.
"""

from .dependency_trees import NON_PROJECTIVE_POLICIES, DependencyTree, is_inline_tree, projective_tree
from .tokenization_slm import BOS_ID, EOS_ID, PAD_ID, SyntacticTokenizer, train_sentencepiece
from .transitions import GEN, LEFT_ARC, POP, RIGHT_ARC, Transition, transition_system
from .trees import refuse_bracketed_tree

VARIANTS = ("paper", "reference")


def _as_tree(item, where):
    """A DependencyTree from a DependencyTree, an inline string or a mapping with `words` and `heads` (the
    CoNLL-U loader's examples)."""
    if isinstance(item, DependencyTree):
        return item
    if isinstance(item, str):
        return DependencyTree.from_inline(item, where=where)
    if isinstance(item, dict) and "words" in item and "heads" in item:
        return DependencyTree(item["words"], item["heads"])
    raise ValueError(f"{where}: {type(item).__name__} is not a dependency tree; expected a DependencyTree, an inline "
                     "tree such as 'There/2 is/0 a/4 difference/2', or a mapping with 'words' and 'heads'")


class DependencyTokenizer(SyntacticTokenizer):
    """SentencePiece pieces over the words, plus the transitions of one of paper 002's systems.

    Train one with `DependencyTokenizer.train(trees, vocab_size=..., transition_system="arc_standard")`.

    Args:
        transition_system: "arc_standard" (DTG), "arc_eager" (DTG-eager) or "arc_swift" (DTG-swift).
        max_k: arc-swift's largest k (the LA[k] / RA[k] ids it has); 1 for the other systems.
        variant: "paper", or "reference" (arc-standard only: `<s>` plays the root and the sentence ends with
            pop_root, as in the authors' released code; see modeling/dependency_grammars.py).
    """

    def __init__(self, vocab_file=None, transition_system="arc_standard", max_k=1, variant="paper",
                 sp_model_proto=None, **kwargs):
        system = check_options(transition_system, max_k, variant)
        self.transition_system, self.max_k, self.variant = transition_system, max_k, variant
        self.system = system
        kwargs.pop("nonterminals", None)
        kwargs.pop("linearization", None)
        # `<s>` keeps its id (BOS_ID) in every variant; the bos_token a saved tokenizer names (`<root>`) is the
        # start token, set below from the variant
        kwargs.pop("bos_token", None)
        super().__init__(vocab_file=vocab_file, nonterminals=[], linearization="terminals",
                         sp_model_proto=sp_model_proto, transition_system=transition_system, max_k=max_k,
                         variant=variant, **kwargs)
        # The structure tokens follow the pieces (the base class laid out specials, then pieces).
        self._root_id = len(self._id_to_token)
        arcs = [f"<{name}>" if max_k == 1 else f"<{name}[{k}]>" for name in ("LA", "RA") for k in range(1, max_k + 1)]
        self._left_start = self._root_id + 1
        self._right_start = self._left_start + max_k
        self._pop_id = self._right_start + max_k
        for token in ["<root>", *arcs, "<POP>"]:
            self._token_to_id[token] = len(self._id_to_token)
            self._nonterminal_ids[token] = len(self._id_to_token)
            self._id_to_token.append(token)
            self._word_start_mask.append(False)
        self.special_tokens_pattern = "none"  # _encode_one adds the start token and </s> itself
        self.linearization = transition_system  # what a model's grammar checks (the base class said "terminals")
        # The HF bos_token is the first token of every sequence: `<root>` in the paper's variant. The grammar's
        # `<s>` slot (BOS_ID) is the layout's own field (action_layout's bos_token_id; a model config holds it as
        # layout_bos_token_id), so transformers' Trainer, which copies bos_token_id into the model config, changes
        # no mask.
        self.bos_token = self.convert_ids_to_tokens(self.start_id)

    # ---- vocabulary ---------------------------------------------------------------------------------
    @property
    def start_id(self):
        """The first id of every sequence: `<root>`, or `<s>` in the reference variant."""
        return BOS_ID if self.variant == "reference" else self._root_id

    @property
    def action_layout(self):
        """The fields of modeling/dependency_grammars.DependencyLayout."""
        # <unk> (id 3) continues a word too when the tokenizer never starts one with it (SentencePiece: "▁" first)
        continuation = [index for index in range(3, self._root_id) if not self._word_start_mask[index]]
        return {
            "pad_token_id": PAD_ID, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "root_token_id": self._root_id,
            "left_arc_start": self._left_start, "left_arc_stop": self._left_start + self.max_k,
            "right_arc_start": self._right_start, "right_arc_stop": self._right_start + self.max_k,
            "pop_token_id": self._pop_id, "unk_token_id": 3, "continuation_ids": continuation,
        }

    # ---- encoding -----------------------------------------------------------------------------------
    def _transition_ids(self, transitions, where):
        ids, starts = [], []
        for transition in transitions:
            if transition.action == GEN:
                pieces = self._word_ids(transition.value, where=f"{where}: word")
                ids += pieces
                starts += [True] + [False] * (len(pieces) - 1)
                continue
            if transition.action == POP:
                ids.append(self._pop_id)
            else:
                if transition.value > self.max_k:
                    raise ValueError(f"{where}: the transition {transition.spelled(True)} needs k <= {self.max_k}, "
                                     "this tokenizer's max_k; train one with a larger max_k")
                start = self._left_start if transition.action == LEFT_ARC else self._right_start
                ids.append(start + transition.value - 1)
            starts.append(False)
        if self.variant == "reference":  # the arc onto the root is pop_root in the released code
            ids[-1] = self._pop_id
        return ids, starts

    _expected_input = "an inline dependency tree 'There/2 is/0 a/4 difference/2' or plain words"

    def _encode_one(self, item, is_split_into_words, add_special_tokens):
        where = "tokenizer input"
        written_start = written_end = False
        if isinstance(item, str) and not is_split_into_words:
            item, written_start, written_end = self._written_bounds(item.strip())
            refuse_bracketed_tree(item, where, self._expected_input)
        if isinstance(item, (DependencyTree, dict)) or (isinstance(item, str) and not is_split_into_words
                                                        and is_inline_tree(item)):
            transitions = self.system.transitions(_as_tree(item, where), where=where)
            ids, starts = self._transition_ids(transitions, where)
            ends = [EOS_ID] if add_special_tokens or written_end else []
        else:  # plain words: a prompt or a sentence to score
            if isinstance(item, str) and not is_split_into_words and not (add_special_tokens or written_start):
                self._check_words_can_stand_alone(item)
            ids, starts = super()._encode_one(item, True if isinstance(item, str) else is_split_into_words, False)
            ends = [EOS_ID] if written_end else []
        begins = [self.start_id] if add_special_tokens or written_start else []
        return begins + ids + ends, [False] * len(begins) + starts + [False] * len(ends)

    def _document_bounds(self):
        """A document of dependency trees (an arc-standard grammar with document_level): its start token, the
        sentences' transitions, then one `</s>`."""
        return [self.start_id], [EOS_ID]

    @staticmethod
    def _is_batch(text, is_split_into_words):
        if isinstance(text, (DependencyTree, dict)):
            return False
        return SyntacticTokenizer._is_batch(text, is_split_into_words)

    # ---- decoding -----------------------------------------------------------------------------------
    def transitions_of(self, token_ids):
        """The transitions of ids (words rebuilt from their pieces); the start token and `</s>` dropped."""
        transitions = []
        for action in self.decode_actions([i for i in token_ids if int(i) not in (self._root_id,)]):
            if action == "<POP>":
                transitions.append(Transition(RIGHT_ARC, 1) if self.variant == "reference" else Transition(POP))
            elif action in self._nonterminal_ids:
                name, k = action[1:3], (int(action[4:-2]) if "[" in action else 1)
                transitions.append(Transition(LEFT_ARC if name == "LA" else RIGHT_ARC, k))
            else:
                transitions.append(Transition(GEN, action))
        return transitions

    def tree_with_words(self, token_ids, words=()):
        """The inline tree of ids whose first words are `words` (a forced-word search: the given words, whatever
        the pieces spell, `<unk>` included); a prefix or words only: the actions joined by spaces."""
        transitions, given = [], iter(words)
        for transition in self.transitions_of(token_ids):
            if transition.action == GEN:
                transition = Transition(GEN, next(given, transition.value))
            transitions.append(transition)
        try:
            return self.system.tree(transitions, where="ids").to_inline()
        except ValueError:
            return " ".join(t.spelled(self.system.uses_k) for t in transitions)

    def _decode_body(self, token_ids, **kwargs):
        """A whole sequence decodes to its inline tree `There/2 is/0 ...`; anything else (a prefix, words) to
        its actions joined by spaces."""
        try:
            return self.system.tree(self.transitions_of(token_ids), where="ids").to_inline()
        except ValueError:
            # the start token is written by _decode; a `<root>` elsewhere (the reference variant's) is an action
            ids = [int(i) for i in token_ids]
            return " ".join(self.decode_actions([i for i in ids if i != self.start_id or i == BOS_ID]))

    # ---- training -----------------------------------------------------------------------------------
    @classmethod
    def train(cls, trees, vocab_size=32000, transition_system="arc_standard", max_k=None, variant="paper",
              non_projective="error", sentencepiece_options=None):
        """Train a SentencePiece unigram model over the words of dependency trees.

        Args:
            trees: DependencyTree objects, inline trees ('There/2 is/0 ...') or mappings with `words` and
                `heads` (hf_slm.data.load_conllu's examples).
            vocab_size: the number of word pieces requested.
            transition_system: "arc_standard", "arc_eager" or "arc_swift".
            max_k: arc-swift's largest k; None: the largest the training trees need.
            variant: "paper" or "reference" (arc_standard only).
            non_projective: what to do with a non-projective training tree: "error" (naming it and a
                crossing pair), "skip" it or "lift" it (dependency_trees.lift_to_projective). Trees are
                only read for their words here; the policy makes the failure happen now, not at encode time.
        """
        system = check_options(transition_system, 1 if max_k is None else max_k, variant)
        if non_projective not in NON_PROJECTIVE_POLICIES:
            raise ValueError(f"non_projective must be one of {NON_PROJECTIVE_POLICIES}, got {non_projective!r}")
        sentences, largest_k = [], 1
        for index, item in enumerate([trees] if isinstance(trees, (str, DependencyTree)) else trees):
            tree, _ = projective_tree(_as_tree(item, f"training tree {index}"), non_projective,
                                      where=f"training tree {index}")
            if tree is None:
                continue
            sentences.append(list(tree.words))
            if system.uses_k and max_k is None:
                largest_k = max([largest_k] + [t.value for t in system.transitions(tree) if t.action != GEN])
        if not sentences:
            raise ValueError("no training trees: expected at least one projective dependency tree")
        return cls(sp_model_proto=train_sentencepiece(sentences, vocab_size, sentencepiece_options),
                   transition_system=transition_system, variant=variant,
                   max_k=(largest_k if max_k is None else max_k) if system.uses_k else 1)


def check_options(name, max_k, variant):
    """The TransitionSystem called `name`, after checking that max_k and variant suit it."""
    try:
        system = transition_system(name)
    except ValueError as error:
        raise ValueError(f"transition_system: {error}") from None
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: expected one of {VARIANTS}")
    if variant == "reference" and name != "arc_standard":
        raise ValueError("the reference variant exists for arc_standard only")
    if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1 or (max_k > 1 and not system.uses_k):
        raise ValueError(f"max_k {max_k!r}: expected 1, or for arc_swift any k >= 1")
    return system


# save_pretrained writes auto_map {"AutoTokenizer": ["tokenization_dependency.DependencyTokenizer", null]} and
# copies this file with its relative imports next to the config.
DependencyTokenizer.register_for_auto_class("AutoTokenizer")
