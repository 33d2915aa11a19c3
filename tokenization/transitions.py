"""The generative transition systems of Dependency Transformer Grammars (paper 002): a projective dependency
tree to its transition sequence (the oracle) and back (the replay), exact inverses of each other.

A transition is GEN(word), LA, RA or POP (`Transition`); arc-swift's arcs carry k (LA[k], RA[k]). A word is
never spelled like a transition: "LA" the word is GEN("LA"). The artificial root, position 0, is on the stack
from the start (paper 002, Figure 1: `<root>`); a sentence's words are positions 1..n in the order generated.

- `arc_standard` (paper 002, section 3; Figures 1 and 2): GEN pushes the new word; LA makes the top the head
  of the item below it and removes that item; RA makes the item below the top the head of the top and removes
  the top. The oracle prefers arcs over GEN, and RA waits until the top has all its dependents. The sequence
  ends once the root has its one dependent (the stack is then the root alone).
  Arc-hybrid: paper 002 (section 3.4) leaves it out because its generative sequences are arc-standard's. That
  holds when GEN pushes the new word onto the stack and the stack top plays the buffer's first word: hybrid's
  LA (buffer word -> stack top) is then arc-standard's LA and its RA arc-standard's RA. With GEN' instead (the
  new word waits in the buffer until the next GEN, as in arc-eager here), hybrid's RA cannot reach the last
  word generated, so the sequences differ: for `a/0 b/1 c/1` arc-standard gives `a b RA c RA RA`, while hybrid
  must generate c before attaching b. So there is no separate arc-hybrid here.
- `arc_eager` (section 3.4, Figure 4): GEN puts the new word in the one-word buffer (the word there before
  is shifted onto the stack: the paper's GEN'); LA makes the buffer word the head of the stack top (which has
  no head yet) and pops it; RA makes the stack top the head of the buffer word and pushes it; POP removes a
  stack top that has its head. Once every word is generated and attached, the remaining items are popped,
  the root last (as Figure 4 does: three POPs for "There is a difference"), and the sequence ends on an empty
  stack. The oracle is the static arc-eager oracle: arcs first, then POP where the buffer word's head or
  dependent lies below the top (otherwise that arc could never be made), then GEN; POP comes last otherwise,
  so Figure 4's order, arcs > GEN > POP, holds whenever reachability allows it.
- `arc_swift` (section 3.4, Figure 5; Qi and Manning 2017): GEN as in arc-eager; LA[k] makes the buffer word
  the head of the k-th stack item from the top (k = 1 is the top) and removes it and the k - 1 items above it;
  RA[k] makes the k-th item the head of the buffer word, removes the k - 1 items above it and pushes the buffer
  word. The removed items must have their heads. The oracle makes each arc as soon as both words exist, with
  the smallest k. The sequence ends when every word is generated and has its head; the items left on the stack
  need no POP (arc-swift has none). Figure 5's plain text is garbled after position 12 (an empty input and an
  RA[2] whose head is "is"); this ending follows from the transitions of Table 1 instead.

Canonical order: a tree has one transition sequence here, the oracle's, so that p(x) sums over trees.
Arc-standard could also build a tree by taking a left dependent after a right one (`a b c RA LA RA` for
`a b LA c RA RA`), and arc-eager by popping earlier than needed and generating after the POP; the replay
refuses both (arc-swift's arcs are forced, it has no such freedom).

The replay checks every transition against the system's rules and raises ValueError naming the sentence, the
transition and what was expected (an arc with too few items, k beyond the stack, a second root, a sequence
that ends with words unattached). Legality for the model lives in the DTG grammar (modeling/), which tests
hold equal to these rules.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from typing import NamedTuple

from .dependency_trees import DependencyTree, check_heads

GEN, LEFT_ARC, RIGHT_ARC, POP = "GEN", "LA", "RA", "POP"


class Transition(NamedTuple):
    """One transition: `action` is GEN, LA, RA or POP; `value` is the word (GEN), k (LA / RA; 1 outside
    arc-swift) or None (POP)."""

    action: str
    value: object = None

    def spelled(self, with_k=False):
        """How the transition is written: the word, `LA`, `RA`, `POP`, or with_k `LA[2]`."""
        if self.action == GEN:
            return self.value
        if self.action in (LEFT_ARC, RIGHT_ARC) and with_k:
            return f"{self.action}[{self.value}]"
        return self.action


def gen(word):
    return Transition(GEN, word)


def left_arc(k=1):
    return Transition(LEFT_ARC, k)


def right_arc(k=1):
    return Transition(RIGHT_ARC, k)


def pop():
    return Transition(POP)


class _State:
    """What the replay knows after a prefix: the stack (positions, 0 = the root), the buffer word (or None),
    how many words were generated, and the heads assigned so far."""

    def __init__(self):
        self.stack = [0]
        self.buffer = None
        self.words = []
        self.heads = {}  # dependent -> head
        self.right_headed = set()  # words that took a right dependent (arc-standard's canonical order)
        self.last_was_pop = False  # arc-eager's canonical order: no GEN right after a POP

    def has_head(self, position):
        return position in self.heads

    def root_taken(self):
        return 0 in self.heads.values()


class TransitionSystem:
    """A generative transition system: `transitions(tree)` (the oracle) and `tree(transitions)` (the replay)."""

    name = None
    uses_pop = False
    uses_k = False

    def transitions(self, tree, where="sentence"):
        """The oracle's transition sequence of a projective DependencyTree (ValueError naming `where` and a
        crossing pair otherwise)."""
        crossing = tree.crossing_arcs()
        if crossing is not None:
            (head, dependent), (other_head, other_dependent) = crossing
            raise ValueError(f"{where} is not projective (the arcs {head} -> {dependent} and {other_head} -> "
                             f"{other_dependent} cross); {self.name} builds projective trees only")
        return self._oracle(tree)

    def tree(self, transitions, where="sentence"):
        """The DependencyTree a whole transition sequence builds; ValueError naming `where` and the first
        transition that breaks the rules, or what is missing at the end."""
        state = _State()
        for index, transition in enumerate(transitions):
            self.apply(state, transition, f"{where}, transition {index} ({self._show(transition)})")
        problem = self.unfinished(state)
        if problem:
            raise ValueError(f"{where}: the sequence ends too early: {problem}")
        words = state.words
        heads = [state.heads[position] for position in range(1, len(words) + 1)]
        check_heads(words, heads, where)
        return DependencyTree(words, heads)

    def _show(self, transition):
        try:
            return transition.spelled(with_k=self.uses_k)
        except AttributeError:
            return repr(transition)

    # ---- rules ----------------------------------------------------------------------------------------
    def apply(self, state, transition, where):
        self._apply(state, transition, where)
        state.last_was_pop = isinstance(transition, Transition) and transition.action == POP

    def _apply(self, state, transition, where):
        if not isinstance(transition, Transition):
            raise ValueError(f"{where}: expected a Transition (gen(word), left_arc(), right_arc(), pop())")
        if transition.action == GEN:
            word = transition.value
            if not isinstance(word, str) or not word or any(character.isspace() for character in word):
                raise ValueError(f"{where}: GEN needs a non-empty word without spaces")
            self._gen(state, word)
        elif transition.action in (LEFT_ARC, RIGHT_ARC):
            k = transition.value
            if isinstance(k, bool) or not isinstance(k, int) or k < 1 or (k != 1 and not self.uses_k):
                expected = "a whole number k >= 1" if self.uses_k else "k = 1 (only arc-swift has LA[k] / RA[k])"
                raise ValueError(f"{where}: {transition.action} has k = {k!r}; expected {expected}")
            self._arc(state, transition.action, k, where)
        elif transition.action == POP and self.uses_pop:
            self._pop(state, where)
        else:
            raise ValueError(f"{where}: {self.name} has no transition {transition.action!r}")

    def _gen(self, state, word):
        raise NotImplementedError

    def _arc(self, state, direction, k, where):
        raise NotImplementedError

    def _pop(self, state, where):
        raise NotImplementedError

    def unfinished(self, state):
        """Why the state is not a whole sentence ('' when it is)."""
        raise NotImplementedError

    @staticmethod
    def _attach(state, head, dependent, where):
        if head == 0 and state.root_taken():
            raise ValueError(f"{where}: the root already has its dependent; expected exactly one root word")
        state.heads[dependent] = head


class ArcStandard(TransitionSystem):
    name = "arc-standard"

    def _apply(self, state, transition, where):
        if state.root_taken():  # RA to the root leaves the root alone on the stack: nothing can follow
            raise ValueError(f"{where}: the root already has its dependent, so the sentence is complete; expected "
                             "the end")
        super()._apply(state, transition, where)

    def _gen(self, state, word):
        state.words.append(word)
        state.stack.append(len(state.words))

    def _arc(self, state, direction, k, where):
        if len(state.stack) < 2:
            raise ValueError(f"{where}: an arc needs two items on the stack, found {len(state.stack)}")
        below, top = state.stack[-2], state.stack[-1]
        if direction == LEFT_ARC:
            if below == 0:
                raise ValueError(f"{where}: LA would make the root a dependent; expected RA or GEN")
            if top in state.right_headed:
                raise ValueError(f"{where}: word {top} already took a right dependent; the oracle's order takes left "
                                 "dependents first (another order would build the same tree twice)")
            self._attach(state, top, below, where)
            del state.stack[-2]
        else:
            self._attach(state, below, top, where)
            state.right_headed.add(below)
            state.stack.pop()

    def unfinished(self, state):
        if not state.words:
            return "no word was generated"
        if state.stack != [0]:
            return f"{len(state.stack) - 1} word(s) on the stack have no head"
        return ""

    def _oracle(self, tree):
        heads = (None,) + tree.heads  # heads[position]
        pending = [len(tree.dependents(position)) for position in range(len(tree) + 1)]  # dependents to collect
        stack, generated, out = [0], 0, []
        while True:
            if len(stack) >= 2:
                below, top = stack[-2], stack[-1]
                if below != 0 and heads[below] == top:
                    out.append(left_arc())
                    pending[top] -= 1
                    del stack[-2]
                    continue
                if heads[top] == below and pending[top] == 0:
                    out.append(right_arc())
                    pending[below] -= 1
                    stack.pop()
                    continue
            if generated == len(tree):
                return out
            generated += 1
            out.append(gen(tree.words[generated - 1]))
            stack.append(generated)


class _BufferedSystem(TransitionSystem):
    """GEN' of arc-eager and arc-swift: the new word waits in a one-word buffer; the word there before is
    shifted onto the stack."""

    def _gen(self, state, word):
        if state.buffer is not None:
            state.stack.append(state.buffer)
        state.words.append(word)
        state.buffer = len(state.words)

    def _need_buffer(self, state, direction, where):
        if state.buffer is None:
            raise ValueError(f"{where}: {direction} needs a generated word in the buffer; expected GEN first")

    @staticmethod
    def _remove_headed(state, count, where):
        """Remove the `count` top items, which must have their heads (arc-swift's implicit pops)."""
        for position in state.stack[len(state.stack) - count :]:
            if position not in state.heads:
                raise ValueError(f"{where}: it would remove word {position} ({state.words[position - 1]!r}), which "
                                 "has no head yet")
        del state.stack[len(state.stack) - count :]


class ArcEager(_BufferedSystem):
    name = "arc-eager"
    uses_pop = True

    def _arc(self, state, direction, k, where):
        self._need_buffer(state, direction, where)
        if not state.stack:
            raise ValueError(f"{where}: the stack is empty")
        top, word = state.stack[-1], state.buffer
        if direction == LEFT_ARC:
            if top == 0:
                raise ValueError(f"{where}: LA would make the root a dependent; expected RA, POP or GEN")
            if state.has_head(top):
                raise ValueError(f"{where}: the stack top already has its head; expected POP, RA or GEN")
            self._attach(state, word, top, where)
            state.stack.pop()
        else:
            self._attach(state, top, word, where)
            state.stack.append(word)
            state.buffer = None

    def _pop(self, state, where):
        if not state.stack:
            raise ValueError(f"{where}: POP needs an item on the stack; the stack is empty")
        top = state.stack[-1]
        if top == 0:
            if state.buffer is not None or not state.root_taken():
                raise ValueError(f"{where}: the root is popped last, once it has its dependent and the buffer is "
                                 "empty")
        elif not state.has_head(top):
            raise ValueError(f"{where}: POP removes a stack top that has its head; word {top} "
                             f"({state.words[top - 1]!r}) has none yet")
        state.stack.pop()

    def _apply(self, state, transition, where):
        if not state.stack:
            raise ValueError(f"{where}: the root was popped, so the sentence is complete; expected the end")
        if state.last_was_pop and transition.action == GEN:
            raise ValueError(f"{where}: GEN right after POP; the oracle pops only what an arc or the end needs "
                             "(popping earlier would build the same tree twice)")
        super()._apply(state, transition, where)

    def unfinished(self, state):
        if not state.words:
            return "no word was generated"
        if state.buffer is not None:
            return "the last word is still in the buffer, without a head"
        if state.stack:
            return f"{len(state.stack)} item(s) are still on the stack (the root is popped last)"
        return ""

    def _oracle(self, tree):
        heads = (None,) + tree.heads
        stack, buffer, generated, attached, out = [0], None, 0, set(), []
        while True:
            if buffer is not None:
                top = stack[-1]
                if top != 0 and heads[top] == buffer:
                    out.append(left_arc())
                    attached.add(top)
                    stack.pop()
                    continue
                if heads[buffer] == top:
                    out.append(right_arc())
                    attached.add(buffer)
                    stack.append(buffer)
                    buffer = None
                    continue
                deeper = stack[:-1]
                if top in attached and any(heads[buffer] == item or (item and heads[item] == buffer) for item in deeper):
                    out.append(pop())
                    stack.pop()
                    continue
            if generated < len(tree):
                generated += 1
                out.append(gen(tree.words[generated - 1]))
                if buffer is not None:
                    stack.append(buffer)
                buffer = generated
                continue
            if buffer is None and stack:
                out.append(pop())
                stack.pop()
                continue
            return out


class ArcSwift(_BufferedSystem):
    name = "arc-swift"
    uses_k = True

    def _arc(self, state, direction, k, where):
        self._need_buffer(state, direction, where)
        if k > len(state.stack):
            raise ValueError(f"{where}: k = {k} but the stack holds {len(state.stack)} item(s); expected k <= the "
                             "stack size")
        item, word = state.stack[-k], state.buffer
        if direction == LEFT_ARC:
            if item == 0:
                raise ValueError(f"{where}: LA[{k}] would make the root a dependent")
            if state.has_head(item):
                raise ValueError(f"{where}: stack item {k} already has its head")
            self._remove_headed(state, k - 1, where)
            self._attach(state, word, item, where)
            state.stack.pop()
        else:
            self._remove_headed(state, k - 1, where)
            self._attach(state, item, word, where)
            state.stack.append(word)
            state.buffer = None

    def unfinished(self, state):
        if not state.words:
            return "no word was generated"
        if state.buffer is not None:
            return "the last word is still in the buffer, without a head"
        headless = [position for position in state.stack if position != 0 and not state.has_head(position)]
        if headless:
            return f"word(s) {headless} on the stack have no head"
        return ""

    def _oracle(self, tree):
        heads = (None,) + tree.heads
        stack, buffer, generated, out = [0], None, 0, []
        while True:
            arc = None if buffer is None else self._first_arc(heads, stack, buffer)
            if arc is not None:
                out.append(arc)
                if arc.action == LEFT_ARC:  # the k-th item and those above it leave
                    del stack[len(stack) - arc.value :]
                else:  # those above the k-th item leave; the buffer word is pushed
                    del stack[len(stack) - arc.value + 1 :]
                    stack.append(buffer)
                    buffer = None
                continue
            if generated == len(tree):
                return out
            generated += 1
            out.append(gen(tree.words[generated - 1]))
            if buffer is not None:
                stack.append(buffer)
            buffer = generated

    @staticmethod
    def _first_arc(heads, stack, buffer):
        """The arc between the buffer word and the nearest stack item it links to (smallest k), or None."""
        for k in range(1, len(stack) + 1):
            item = stack[-k]
            if item != 0 and heads[item] == buffer:
                return left_arc(k)
            if heads[buffer] == item:
                return right_arc(k)
        return None


TRANSITION_SYSTEMS = {"arc_standard": ArcStandard(), "arc_eager": ArcEager(), "arc_swift": ArcSwift()}


def transition_system(name):
    """The TransitionSystem called `name` (arc_standard, arc_eager or arc_swift)."""
    if name not in TRANSITION_SYSTEMS:
        raise ValueError(f"unknown transition system {name!r}; expected one of {sorted(TRANSITION_SYSTEMS)}")
    return TRANSITION_SYSTEMS[name]
