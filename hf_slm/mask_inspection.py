"""What a grammar does to one tree: tokens, kinds, attention mask, relative positions, labels.

Backs `hf-slm masks`. Each whitespace-separated terminal is one token (no subword model), so the output
can be read against the papers' figures (paper 000, Figure 2; paper 002, Figures 2, 4 and 5). A dependency
tree is written inline (`There/2 is/0 a/4 difference/2`); with `pieces`, a word is its SentencePiece pieces
joined by `|` (`▁Th|ere/2`), so that the subword rules of paper 002 (Appendix B) show without a tokenizer.
Paper 003's compositional grammars (`bi-up-ex-nm`, ...) read the tree as their variant does (unlabeled, unary
chains removed, left-binarized for `bi`), bottom-up with each `)`'s start, so the output reads against Figure 3.
With a segment length (`segment_report`), the sequence is cut into segments with a memory, as Transformer-XL
recurrence reads it (paper 000, section 2.2 and Figure 8; modeling/segments.py), and a tree may be a document.
"""

from .action_vocab import ActionVocabulary
from .modeling.compositional_grammars import COMPOSITIONAL_GRAMMARS
from .modeling.dependency_grammars import DEPENDENCY_GRAMMARS, DependencyLayout
from .families import get_grammar
from .modeling.grammars import IGNORE_INDEX, POSITION_KIND_NAMES, PositionKind
from .modeling.segments import segment_sequence
from .tokenization.dependency_trees import DependencyTree
from .tokenization.transitions import GEN, POP, transition_system
from .tokenization.linearizers import (UNLABELED_CLOSE, bottom_up_actions, bottom_up_pointers, is_close_nt,
                                      is_open_nt, terminal_actions, top_down_actions, tree_from_top_down)
from .tokenization.trees import (input_format, left_binarize, normalize_tree, parse_trees, read_tree_string,
                                 remove_unary_chains)


def actions_from_text(text, tree_format="auto", **normalize_options):
    """Actions of a tree given as `(S (NP the bird NP) S)` (actions) or as PTB brackets (with or without POS).

    The rule of `trees.input_format` decides which (unless tree_format is "actions" or "ptb"), as for the
    tokenizer: actions are taken as written, PTB brackets normalized with `normalize_options`. Plain words or
    a malformed tree are a ValueError naming the position.
    """
    return top_down_actions(read_tree_string(text, "the tree argument", tree_format, **normalize_options))


def mask_report(text, grammar_name="tg", tree_format="auto", variant="paper", pieces=False, **normalize_options):
    """The JSON-ready report of `hf-slm masks` for one tree (a dependency grammar: `dependency_mask_report`)."""
    if grammar_name in DEPENDENCY_GRAMMARS:
        return dependency_mask_report(text, grammar_name, variant, pieces)
    if grammar_name in COMPOSITIONAL_GRAMMARS and variant == "paper" and not pieces:
        return compositional_mask_report(text, grammar_name, tree_format, **normalize_options)
    if variant != "paper" or pieces:
        raise ValueError(f"--variant and --pieces are options of the dependency grammars "
                         f"({', '.join(DEPENDENCY_GRAMMARS)}), not of {grammar_name}")
    actions = actions_from_text(text, tree_format, **normalize_options)
    if grammar_name == "terminals":
        actions = terminal_actions(tree_from_top_down(actions))
    vocab = ActionVocabulary.from_action_sequences([actions])
    grammar = get_grammar(grammar_name, vocab.layout)
    sequence = grammar.sequence(vocab.encode(actions, add_eos=grammar_name == "terminals"))
    return sequence_report(grammar_name, vocab, sequence)


def sequence_report(grammar_name, vocab, sequence):
    """The fields every report has: tokens, position kinds, the attention mask, relative positions and labels."""
    return {
        "grammar": grammar_name,
        "tokens": vocab.decode(sequence.input_ids),
        "kinds": [POSITION_KIND_NAMES[PositionKind(k)] for k in sequence.position_kinds],
        "attention_mask": sequence.attention_mask.astype(int).tolist(),
        "relative_positions": sequence.relative_positions.tolist(),
        "labels": [None if label == IGNORE_INDEX else vocab.tokens[label] for label in sequence.labels],
    }


def compositional_actions(tree, grammar_class):
    """The action strings and starts (`<s>` = 0, -1 where none, `<s>` and a bottom-up `</s>` included) of a tree
    under one of paper 003's variants: unary chains removed, left-binarized for `bi` (section 2.1); `(` and `)`
    top-down, or the words and `)` bottom-up with each `)`'s start as compositional_grammars takes it."""
    if "(" in tree.leaves():
        raise ValueError("the word '(' would read as the unlabeled opening bracket; write it -LRB-")
    tree = remove_unary_chains(left_binarize(tree) if grammar_class.binary else tree)
    if grammar_class.top_down:
        actions = ["(" if is_open_nt(action) else action for action in top_down_actions(tree, labeled=False)]
        return ["<s>"] + actions, [-1] * (len(actions) + 1)
    actions, starts = bottom_up_actions(tree)
    pointers = [-1 if pointer is None else pointer + 1 for pointer in bottom_up_pointers(actions, starts)]
    return ["<s>"] + actions + ["</s>"], [-1] + pointers + [-1]


def compositional_inputs(text, grammar_name, tree_format="auto", **normalize_options):
    """(vocabulary, action ids, starts) of a tree under a compositional grammar, over a vocabulary made for it."""
    rules = COMPOSITIONAL_GRAMMARS[grammar_name]
    actions, starts = compositional_actions(read_tree_string(text, "the tree argument", tree_format,
                                                             **normalize_options), rules)
    words = [a for a in actions[1:] if a not in ("</s>", "(", UNLABELED_CLOSE)]
    vocab = ActionVocabulary(words, [""])  # one `(`, one `)`
    return vocab, [vocab.ids[action] for action in actions], starts


def compositional_mask_report(text, grammar_name, tree_format="auto", **normalize_options):
    """The report for a tree under a compositional grammar, with each Ex `)`'s composed positions (`composes`)
    and, for Nb-Up, the position each `)` starts from (`starts`, at the position that predicts the `)`)."""
    vocab, ids, starts = compositional_inputs(text, grammar_name, tree_format, **normalize_options)
    sequence = get_grammar(grammar_name, vocab.layout).sequence(ids, starts=starts)
    report = sequence_report(grammar_name, vocab, sequence)
    if sequence.composition_children is not None:
        report["composes"] = [[int(j) for j in row.nonzero()[0]] or None for row in sequence.composition_children]
    if sequence.start_labels is not None:
        report["starts"] = [None if label == IGNORE_INDEX else int(label) for label in sequence.start_labels]
    return report


SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>", "<root>")


def dependency_mask_report(text, grammar_name="dtg", variant="paper", pieces=False):
    """The report for an inline dependency tree under a DTG grammar: the oracle's transitions (the reference
    variant: `<s>` first, and pop_root instead of the last RA), over a vocabulary made for this one tree."""
    rules, tokens, ids = dependency_inputs(text, grammar_name, variant, pieces)
    sequence = rules.sequence(ids)
    return {
        "grammar": grammar_name,
        "variant": variant,
        "tokens": [tokens[i] for i in sequence.input_ids],
        "kinds": [POSITION_KIND_NAMES[PositionKind(k)] for k in sequence.position_kinds],
        "attention_mask": sequence.attention_mask.astype(int).tolist(),
        "relative_positions": sequence.relative_positions.tolist(),
        "labels": [None if label == IGNORE_INDEX else tokens[label] for label in sequence.labels],
    }


def dependency_inputs(text, grammar_name="dtg", variant="paper", pieces=False):
    """(grammar, tokens by id, action ids) of an inline dependency tree (`dependency_mask_report`)."""
    tree = DependencyTree.from_inline(text, where="the tree argument")
    grammar_class = DEPENDENCY_GRAMMARS[grammar_name]
    transitions = transition_system(grammar_class.system).transitions(tree, where="the tree argument")
    split = (lambda word: word.split("|")) if pieces else (lambda word: [word])
    for word in tree.words:
        if pieces and "" in split(word):
            raise ValueError(f"the tree argument: word {word!r} has an empty piece; expected pieces joined by '|'")
    max_k = max([t.value for t in transitions if t.action != GEN and t.action != POP] + [1])
    left, right = len(SPECIAL_TOKENS), len(SPECIAL_TOKENS) + max_k
    pop_id = right + max_k
    tokens = list(SPECIAL_TOKENS) + [f"LA[{k}]" if max_k > 1 else "LA" for k in range(1, max_k + 1)]
    tokens += [f"RA[{k}]" if max_k > 1 else "RA" for k in range(1, max_k + 1)] + ["POP"]
    piece_ids, continuation_ids = {}, []
    for word in tree.words:  # a piece that continues a word is another id than the same piece starting one
        for index, piece in enumerate(split(word)):
            if (piece, index > 0) not in piece_ids:
                piece_ids[piece, index > 0] = len(tokens)
                tokens.append(piece)
                if index > 0:
                    continuation_ids.append(piece_ids[piece, True])
    layout = DependencyLayout(0, 1, 2, 4, left, left + max_k, right, right + max_k, pop_id, 3, vocab_size=len(tokens),
                              continuation_ids=continuation_ids)
    ids = [1 if variant == "reference" else 4]
    for transition in transitions:
        if transition.action == GEN:
            ids += [piece_ids[piece, index > 0] for index, piece in enumerate(split(transition.value))]
        elif transition.action == POP:
            ids.append(pop_id)
        else:
            ids.append((left if transition.action == "LA" else right) + transition.value - 1)
    if variant == "reference":
        ids[-1] = pop_id  # the arc onto the root is pop_root in the released code
    ids.append(2)
    return grammar_class(layout, variant=variant), tokens, ids


def trees_from_text(text, tree_format="auto", **normalize_options):
    """The trees of a tree or a document: one tree, or several written one after another (action strings
    `(S ... S) (S ... S)` or PTB brackets, as `read_tree_string` reads one). A tree with a wrapper root over the
    sentences, `(DOC (S ...) (S ...))`, is one tree."""
    found = input_format(text) if tree_format == "auto" else tree_format
    if found == "ptb":
        trees = parse_trees(text, "the tree argument")
        return [normalize_tree(tree, **normalize_options) for tree in trees]
    if found != "actions":  # plain words, or an unknown format: read_tree_string names the problem
        return [read_tree_string(text, "the tree argument", tree_format, **normalize_options)]
    groups, depth = [[]], 0
    for token in text.split():  # a tree ends where its root's closing bracket brings the depth back to 0
        groups[-1].append(token)
        depth += is_open_nt(token) - is_close_nt(token)
        if depth == 0:
            groups.append([])
    groups = [group for group in groups if group]
    if len(groups) == 1:
        return [read_tree_string(text, "the tree argument", tree_format)]
    return [read_tree_string(" ".join(group), f"tree {index} of the document argument", "actions")
            for index, group in enumerate(groups)]


def segment_report(text, grammar_name="tg", segment_length=8, memory_length=None, memory_update=None,
                   tree_format="auto", variant="paper", pieces=False, **normalize_options):
    """The report of `hf-slm masks --segment-length L`: per segment (`chunks`), the rows' positions, tokens,
    kinds, labels and depths, the attention mask and relative positions [L, M + L] (memory columns first), the
    memory's positions [M] (-1: empty) and the update matrices [M, L] and [M, M] (modeling/segments.py).

    Several trees are a document: `<s>` then the trees, each root a child of `<s>` (Grammar, document_level;
    paper 000 section 3.1). One tree is a sentence, also when it is a wrapper `(DOC (S ...) (S ...))` over a
    document's sentences, as in the reference's BLLIP documents: DOC is then a constituent like any other.
    Dependency grammars read one inline tree, paper 003's grammars one tree, as `mask_report` does."""
    options, trees = {}, 1
    if grammar_name in DEPENDENCY_GRAMMARS:
        rules, tokens, ids = dependency_inputs(text, grammar_name, variant, pieces)
    elif variant != "paper" or pieces:
        raise ValueError(f"--variant and --pieces are options of the dependency grammars "
                         f"({', '.join(DEPENDENCY_GRAMMARS)}), not of {grammar_name}")
    elif grammar_name in COMPOSITIONAL_GRAMMARS:
        vocab, ids, options["starts"] = compositional_inputs(text, grammar_name, tree_format, **normalize_options)
        rules, tokens = get_grammar(grammar_name, vocab.layout), vocab.tokens
    else:
        read = trees_from_text(text, tree_format, **normalize_options)
        trees = len(read)
        terminals = grammar_name == "terminals"
        actions = [a for tree in read for a in (terminal_actions(tree) if terminals else top_down_actions(tree))]
        vocab = ActionVocabulary.from_action_sequences([actions])
        rules, tokens = get_grammar(grammar_name, vocab.layout, document_level=trees > 1), vocab.tokens
        ids = vocab.encode(actions, add_eos=terminals)
    segmented = segment_sequence(rules, ids, segment_length, memory_length, memory_update, **options)
    chunks = []
    for tau in range(segmented.num_segments):
        chunks.append({
            "positions": segmented.segment_positions[tau].tolist(),
            "tokens": [tokens[i] for i in segmented.input_ids[tau]],
            "kinds": [POSITION_KIND_NAMES[PositionKind(k)] for k in segmented.position_kinds[tau]],
            "labels": [None if label == IGNORE_INDEX else tokens[label] for label in segmented.labels[tau]],
            "depths": segmented.depth[tau].tolist(),
            "attention_mask": segmented.attention_mask[tau].astype(int).tolist(),
            "relative_positions": segmented.relative_positions[tau].tolist(),
            "memory_positions": segmented.memory_positions[tau].tolist(),
            "update_from_segment": segmented.update_from_segment[tau].astype(int).tolist(),
            "update_from_memory": segmented.update_from_memory[tau].astype(int).tolist(),
        })
    return {"grammar": grammar_name, "trees": trees, "document_level": trees > 1,
            "segment_length": segmented.segment_length, "memory_length": segmented.memory_length,
            "memory_update": segmented.memory_update, "chunks": chunks}


def format_segment_report(report):
    """Plain text: per segment, what each memory slot holds, then one row per position with the original
    positions it attends (m<slot>=<position> for memory columns) and their relative positions, and the next
    memory's slots."""
    M = report["memory_length"]
    lines = [f"{report['grammar']}: segments of {report['segment_length']} positions, memory of {M} slots "
             f"({report['memory_update']} update), {report['trees']} tree(s)"]
    for tau, chunk in enumerate(report["chunks"]):
        held = [f"{y}:{p}" for y, p in enumerate(chunk["memory_positions"]) if p >= 0]
        lines.append(f"segment {tau}: memory {' '.join(held) or 'empty'}")
        for x, position in enumerate(chunk["positions"]):
            if position < 0:
                continue
            attended = []
            for column, allowed in enumerate(chunk["attention_mask"][x]):
                if allowed:
                    where = (f"m{column}={chunk['memory_positions'][column]}" if column < M
                             else str(chunk["positions"][column - M]))
                    attended.append(f"{where}({chunk['relative_positions'][x][column]})")
            lines.append(f"  {position:>4}  {chunk['tokens'][x]:<12} {chunk['kinds'][x]:<14} "
                         f"{chunk['labels'][x] or '_':<12} {' '.join(attended)}")
        kept = []
        for y in range(M):
            if 1 in chunk["update_from_segment"][y]:
                kept.append(f"{y}<-{chunk['positions'][chunk['update_from_segment'][y].index(1)]}")
            elif 1 in chunk["update_from_memory"][y]:
                kept.append(f"{y}<-{chunk['memory_positions'][chunk['update_from_memory'][y].index(1)]}")
        lines.append(f"  next memory: {' '.join(kept) or 'empty'}")
    return "\n".join(lines)


def format_report(report):
    """A plain-text table: one row per position, its kind, label and the positions it attends."""
    width = max(len(t) for t in report["tokens"])
    kind_width = max(len(k) for k in report["kinds"])
    lines = [f"{'i':>3}  {'input':<{width}}  {'kind':<{kind_width}}  {'label':<{width}}  attends (relative position)"]
    for i, token in enumerate(report["tokens"]):
        label = report["labels"][i] or "_"
        attended = [
            f"{j}({report['relative_positions'][i][j]})"
            for j, allowed in enumerate(report["attention_mask"][i])
            if allowed
        ]
        extra = ""
        if report.get("composes") and report["composes"][i]:  # paper 003 Ex: the composer's inputs
            extra += f"  composes {' '.join(map(str, report['composes'][i]))}"
        if report.get("starts") and report["starts"][i] is not None:  # paper 003 Nb-Up: the pointer's target
            extra += f"  start {report['starts'][i]}"
        lines.append(f"{i:>3}  {token:<{width}}  {report['kinds'][i]:<{kind_width}}  {label:<{width}}  "
                     f"{' '.join(attended)}{extra}")
    return "\n".join(lines)


def plot_report(report, path):
    """Draw the mask like paper 000 Figure 2b: STACK rows blue, COMPOSE rows orange, relpos in cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    tokens = report["tokens"]
    n = len(tokens)
    size = max(4.0, 0.42 * n + 1.5)
    figure, axes = plt.subplots(figsize=(size, size))
    stack_colour, compose_colour = "#4c72b0", "#dd8452"
    for i in range(n):
        colour = compose_colour if report["kinds"][i].endswith("compose") else stack_colour
        for j in range(n):
            if report["attention_mask"][i][j]:
                axes.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white"))
                axes.text(j + 0.5, i + 0.5, str(report["relative_positions"][i][j]), ha="center", va="center",
                          color="white", fontsize=8)
            else:
                axes.add_patch(Rectangle((j, i), 1, 1, facecolor="#f2f2f2", edgecolor="white"))
    axes.set_xlim(0, n)
    axes.set_ylim(n, 0)
    axes.set_xticks([k + 0.5 for k in range(n)])
    axes.set_yticks([k + 0.5 for k in range(n)])
    axes.set_xticklabels(tokens, rotation=90, fontsize=8)
    axes.set_yticklabels([f"{t}  {i}" for i, t in enumerate(tokens)], fontsize=8)
    axes.set_xlabel("attended position j")
    axes.set_ylabel("attending position i")
    axes.set_aspect("equal")
    axes.tick_params(length=0)
    if any(kind.endswith("compose") for kind in report["kinds"]):
        axes.legend(handles=[Patch(color=stack_colour, label="STACK"), Patch(color=compose_colour, label="COMPOSE")],
                    loc="upper right", fontsize=8)
    axes.set_title(f"{report['grammar']} attention mask (numbers: relative positions)", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
