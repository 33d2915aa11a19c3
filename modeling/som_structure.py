"""The grid of Syntactic Ordered Memory (paper 001, sections 3.1 and 3.3): split decisions, Algorithm 1, parses.

Conventions (one for the whole SOM code):
- A sentence is a sequence of tokens 0..T-1 as the model reads them; token 0 is `<s>`.
- Slots are numbered 1..N as in the paper, N the top. A *split decision* xi_t (the paper's xi_t, theta_t and the
  argmax of p_t) is a slot number in 2..N: the candidates of step t-1 up to slot xi_t are written into memory
  (eq. 1) and x_t goes into slot xi_t - 1 (eq. 2). So xi_t is the slot of the node whose left child ends at
  t - 1 and whose right child starts at t. xi_t = 1 would put x_t into a slot 0 that does not exist, so
  decisions are at least 2; a tree deeper than the grid is flattened at the bottom.
- The first token's decision is always N: x_0 (`<s>`) goes below the initial context in the top slot.
- `first_siblings[i]` is Algorithm 1's first_sibling_Gamma(i): the first token of the smallest constituent that
  contains token i without starting at it (None for token 0). It is all of the gold tree that the labels need.

Tensors of the model store the decision xi as the 0-based slot index xi - 1 (so the distribution p_t is over
N entries and index 0 is never allowed); this file speaks the paper's 1-based numbers.

Hub code: imports nothing outside the standard library.
"""

MIN_SPLIT = 2  # x_t goes into slot xi_t - 1 >= 1


def _check_first_siblings(first_siblings, where="first_siblings"):
    for index, sibling in enumerate(first_siblings):
        if index == 0:
            if sibling is not None:
                raise ValueError(f"{where}[0] is {sibling!r}; expected None (the first token has no first sibling)")
        elif not isinstance(sibling, int) or not 0 <= sibling < index:
            raise ValueError(f"{where}[{index}] is {sibling!r}; expected the index of an earlier token (0..{index - 1})")


def adaptive_grid_labels(first_siblings, num_slots, decisions=None):
    """Algorithm 1: the split labels xi_1..xi_T given the gold tree and the model's own decisions theta.

    xi_0 = N; for i >= 1, with j = first_sibling(i):
        mu_i = max(theta_{j+1}, ..., theta_{i-1})   (nothing when j = i - 1)
        xi_i = max(xi_j - 1, mu_i)
    If the model already merged w_j into a higher slot mu_i, w_i has to join there too: that is how the labels
    recover from the model's earlier errors. Two guards keep every label reachable by the model as it stands:
    xi_i >= 2 (see the module docstring) and xi_i >= theta_{i-1} - 1, the lowest candidate slot that the
    model's own previous decision left (the formula can fall below it when theta_{i-1} > xi_{i-1} and
    j = i - 1; the closest parse then makes w_{i-1} and w_i siblings).

    decisions: theta_0..theta_{T-1} (slot numbers 2..N); None gives the gold grid (the model follows the labels).
    Returns the list of labels (slot numbers).
    """
    _check_first_siblings(first_siblings)
    if num_slots < MIN_SPLIT:
        raise ValueError(f"num_slots is {num_slots}; expected at least {MIN_SPLIT}")
    if decisions is not None and len(decisions) != len(first_siblings):
        raise ValueError(f"{len(decisions)} decisions for {len(first_siblings)} tokens; expected one per token")
    labels = []
    for index, sibling in enumerate(first_siblings):
        if index == 0:
            labels.append(num_slots)
            continue
        theta = labels if decisions is None else decisions
        label = labels[sibling] - 1
        between = theta[sibling + 1:index]
        if between:
            label = max(label, max(between))
        label = max(label, MIN_SPLIT, theta[index - 1] - 1)
        labels.append(min(label, num_slots))
    return labels


def grid_columns(decisions, num_slots):
    """Figure 2 in text: what each slot holds after each step when the decisions are followed exactly.

    Returns one dict per step t: {"memory": {slot: span}, "candidates": {slot: span}} for M_t and M^_t, a span
    being (first token, last token) of the node a slot holds; the initial context (the top slot before any
    token) has span None and a node composed with it covers the tokens from its right child only, marked by
    a first token of -1. Slots with nothing in them are left out.
    """
    memory = {}
    candidates = {num_slots: (-1, -1)}  # M^_0: the initial context in the top slot
    columns = []
    for step, split in enumerate(decisions):
        if not MIN_SPLIT <= split <= num_slots:
            raise ValueError(f"decision {split!r} at step {step}; expected a slot number from {MIN_SPLIT} to {num_slots}")
        if split < min(candidates):
            raise ValueError(f"decision {split} at step {step} picks an empty candidate slot; the candidates are "
                             f"slots {sorted(candidates)}")
        # eq. 1: candidates up to the split are written into memory, the rest of memory is copied
        memory = {slot: span for slot, span in memory.items() if slot > split}
        memory.update({slot: span for slot, span in candidates.items() if slot <= split})
        # eqs. 2-3: x_t below the split, then the bottom-up compositions cell(M^j, M^{j-1})
        candidates = {split - 1: (step, step)}
        for slot in range(split, num_slots + 1):
            candidates[slot] = (memory[slot][0], step)  # memory holds every slot from the split up
        columns.append({"memory": dict(memory), "candidates": dict(candidates)})
    return columns


def parse_spans(decisions, num_slots):
    """The binary tree that split decisions build, as the set of its constituent spans (first, last token),
    leaves included. Spans that contain the initial context are left out (it is not a token).

    The constituents ending at step t are the candidates of step t that the next decision writes into memory
    (slots xi_t - 1 up to xi_{t+1}); at the last step every candidate closes.
    """
    columns = grid_columns(decisions, num_slots)
    spans = set()
    for step, column in enumerate(columns):
        upper = decisions[step + 1] if step + 1 < len(decisions) else num_slots
        for slot, span in column["candidates"].items():
            if slot <= upper and span[0] >= 0:
                spans.add(span)
    return spans


def spans_from_first_siblings(first_siblings, num_slots):
    """The spans of the binary tree that the gold grid of `first_siblings` encodes (see `parse_spans`)."""
    return parse_spans(adaptive_grid_labels(first_siblings, num_slots), num_slots)
