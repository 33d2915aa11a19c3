"""A hand-made action layout for paper 002's dependency grammars (arcs, POP, words of several pieces), the grammars
over it, and action ids spelled as tokens or drawn from a tree's oracle transitions."""

from hf_slm.modeling.dependency_grammars import DEPENDENCY_GRAMMARS, DependencyLayout
from hf_slm.tokenization.transitions import GEN, TRANSITION_SYSTEMS


PAD, BOS, EOS, UNK, ROOT = 0, 1, 2, 3, 4


WORDS = ["There", "is", "a", "difference", "▁Th", "ere", "▁diff", "erence"]


CONTINUATIONS = ("ere", "erence")  # pieces that continue a word


MAX_K = 10  # arc-swift k up to the largest tree the property test draws (9 words)


def layout(system):
    """<pad> <s> </s> <unk> <root>, LA[1..K], RA[1..K], POP, then the word pieces."""
    k = MAX_K if system == "arc_swift" else 1
    left, right = 5, 5 + k
    pop = right + k
    first_word = pop + 1
    return DependencyLayout(PAD, BOS, EOS, ROOT, left, left + k, right, right + k, pop, UNK,
                            vocab_size=first_word + len(WORDS),
                            continuation_ids=[first_word + WORDS.index(piece) for piece in CONTINUATIONS])


def grammar(system, variant="paper"):
    name = {"arc_standard": "dtg", "arc_eager": "dtg_eager", "arc_swift": "dtg_swift"}[system]
    return DEPENDENCY_GRAMMARS[name](layout(system), variant=variant)


def encode(rules, tokens):
    """Action ids of spelled tokens: <root>, <s>, </s>, LA, RA, LA[2], POP, pop_root, word pieces."""
    lay = rules.layout
    first_word = lay.pop_token_id + 1
    special = {"<root>": ROOT, "<s>": BOS, "</s>": EOS, "POP": lay.pop_token_id, "pop_root": lay.pop_token_id}
    ids = []
    for token in tokens.split():
        if token in special:
            ids.append(special[token])
        elif token.startswith(("LA", "RA")) and not token.startswith("LA_"):
            k = int(token[3:-1]) if "[" in token else 1
            ids.append((lay.left_arc_start if token.startswith("LA") else lay.right_arc_start) + k - 1)
        else:
            ids.append(first_word + WORDS.index(token))
    return ids


FIRST_PIECES = [word for word in WORDS if word not in CONTINUATIONS]


def tree_ids(rules, tree, rng):
    """The action ids of a tree's oracle sequence, each word 1-3 random pieces (the reference variant: `<s>`
    first, and the arc onto the root is pop_root, as DependencyTokenizer writes it)."""
    transitions = TRANSITION_SYSTEMS[rules.system].transitions(tree)
    tokens = [t.spelled(with_k=rules.system == "arc_swift") for t in transitions]
    if rules.variant == "reference":
        tokens[-1] = "pop_root"
    words = iter([" ".join([str(rng.choice(FIRST_PIECES))] + list(rng.choice(CONTINUATIONS, rng.integers(0, 3))))
                  for _ in tree.words])
    spelled = [next(words) if t.action == GEN else token for t, token in zip(transitions, tokens)]
    start = "<s>" if rules.variant == "reference" else "<root>"
    return encode(rules, " ".join([start] + spelled + ["</s>"]))
