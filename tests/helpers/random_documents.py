"""Random sentences and documents (constituency trees, dependency trees) as action ids of every segmented grammar:
the inputs of the segment (Transformer-XL memory) tests."""

from hf_slm.families import get_grammar
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.families.mask_examples import unlabelled_actions as compositional_actions
from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMARS
from hf_slm.modeling.dependency_grammars import DEPENDENCY_GRAMMARS
from hf_slm.tokenization.dependency_trees import DependencyTree
from hf_slm.tokenization.linearizers import is_close_nt, is_open_nt, tree_from_top_down

from helpers.dependency_toy_layout import grammar as dependency_grammar
from helpers.dependency_toy_layout import tree_ids as dependency_ids


LABELS = ["S", "NP", "VP", "PP"]


WORDS = ["the", "bird", "sings", "a", "song", "x"]


VOCAB = ActionVocabulary(WORDS, LABELS)


def random_tree(rng, depth=1, max_depth=8):
    """Top-down actions of a random tree: 1-4 children per constituent, nesting up to `max_depth`."""
    label = LABELS[rng.integers(len(LABELS))]
    actions = [f"({label}"]
    for _ in range(rng.integers(1, 5)):
        if depth < max_depth and rng.random() < 0.42:
            actions += random_tree(rng, depth + 1, max_depth)
        else:
            actions.append(WORDS[rng.integers(len(WORDS))])
    return actions + [f"{label})"]


def random_document(rng):
    """1-4 random trees (one tree: a sentence), with nesting depths 1-10."""
    return [random_tree(rng, max_depth=int(rng.integers(1, 11))) for _ in range(rng.integers(1, 5))]


def random_dependency_tree(rng, count):
    """A random projective tree over `count` words: a head for each span, its dependents' spans either side."""
    heads = [0] * (count + 1)

    def build(left, right, parent):
        head = int(rng.integers(left, right + 1))
        heads[head] = parent
        for start, stop in ((left, head - 1), (head + 1, right)):
            while start <= stop:
                end = int(rng.integers(start, stop + 1))
                build(start, end, head)
                start = end + 1

    build(1, count, 0)
    return DependencyTree([f"w{i}" for i in range(1, count + 1)], heads[1:])


def compositional_inputs(rng, name):
    tree = tree_from_top_down(random_tree(rng, max_depth=int(rng.integers(1, 7))))
    actions, starts = compositional_actions(tree, COMPOSITIONAL_GRAMMARS[name])
    vocab = ActionVocabulary(WORDS, [""])
    return get_grammar(name, vocab.layout), [vocab.ids[a] for a in actions], {"starts": starts}


def random_case(rng, name):
    """(grammar, ids, sequence options) of a random sentence or document under the grammar `name`."""
    if name in ("tg", "tg_txl_positions", "choe_charniak", "rnng", "terminals"):  # TG's actions (rnng: RNNG's)
        trees = random_document(rng)
        grammar = get_grammar(name, VOCAB.layout, document_level=len(trees) > 1 and name != "terminals")
        if name == "terminals":
            words = [a for tree in trees for a in tree if not is_open_nt(a) and not is_close_nt(a)]
            return grammar, VOCAB.encode(words, add_eos=True), {}
        return grammar, VOCAB.encode([a for tree in trees for a in tree]), {}
    if name in DEPENDENCY_GRAMMARS:
        system = {"dtg": "arc_standard", "txl_trans": "arc_standard", "dtg_eager": "arc_eager",
                  "dtg_swift": "arc_swift"}[name]
        variant = "reference" if name == "dtg" and rng.random() < 0.5 else "paper"
        rules = dependency_grammar(system, variant)
        if name == "txl_trans":
            rules = DEPENDENCY_GRAMMARS["txl_trans"](rules.layout)
        return rules, dependency_ids(rules, random_dependency_tree(rng, int(rng.integers(1, 10))), rng), {}
    return compositional_inputs(rng, name)
