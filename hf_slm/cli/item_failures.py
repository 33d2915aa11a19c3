"""The one policy of the batch commands (score, parse, summarize and the evaluations) for an item that fails
(issue 30, class 7): the item is recorded (its place in the output says why: an "error" field, or an empty line
where one line per item is printed), the others are done as usual, one stderr line at the end names every
failed item, and the exit status is then EXIT_ITEMS_FAILED (1), not 0: a run that produced nothing for some
items does not look like success to a script. An error before any item is done (a missing file, a bad option,
--stop-on-error's stop) stays exit 2 (hf_slm/cli/errors.py).
"""

import json
import sys

EXIT_ITEMS_FAILED = 1  # the command finished; some items have no result (named on stderr)
SHOWN = 10  # failed items named in the line; the rest are counted


def report_failed_items(command, failed, total, items, others="the others' results are complete"):
    """Print one `hf-slm COMMAND: warning: left out N of TOTAL ITEMS (OTHERS; exit status 1): ...` line naming
    the failed items (dicts with an "error", or a "source"; `items` e.g. "sentences that cannot be scored") and
    return the exit status: 0 when none failed, EXIT_ITEMS_FAILED otherwise."""
    if not failed:
        return 0
    shown = "; ".join(str(entry.get("error") or entry.get("source") or json.dumps(entry)) for entry in failed[:SHOWN])
    more = f"; and {len(failed) - SHOWN} more" if len(failed) > SHOWN else ""
    print(f"hf-slm {command}: warning: left out {len(failed)} of {total} {items} ({others}; exit status "
          f"{EXIT_ITEMS_FAILED}): {shown}{more}", file=sys.stderr)
    return EXIT_ITEMS_FAILED


__all__ = ["EXIT_ITEMS_FAILED", "report_failed_items"]
