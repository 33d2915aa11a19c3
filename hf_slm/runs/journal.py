"""Long runs that survive an interruption: a lock on the output folder and a journal of finished items.

Every run that writes files (the evaluations, `hf-slm data prepare`, `hf-slm train`) holds its output
folder's lock while it writes, and the long ones keep a journal, so that Ctrl-C, a lost connection or a full
disk costs only the items in progress.

Lock (`output_lock`): the file `<folder>/.hf-slm.lock` holds the pid, host and command of the run writing the
folder. A second run on the same folder is refused with one line naming the lock file and that pid, so two
runs never both say "wrote ..." while the last one wins. A lock whose process is gone (the run was killed) is
stale and is taken over. The same process may take a lock it holds again (quickstart -> train).

Journal (`RunJournal`): a JSON-lines file beside the result (`<result>.journal.jsonl`). Its first line is the
header, what the run is: the model's parameters (a sha256, so a retrained or other model never resumes), the
data (sha256 of its contents) and every setting that changes the numbers (speed-only ones such as the batch
size are left out, so that a run that ran out of memory can resume with a smaller batch). Each later line is
one finished item, `{"key": ..., "value": ...}`, written and flushed as soon as the chunk of items it belongs
to is done. A rerun with the same header reads the finished items, says how many it resumed and computes only
the others; items are computed in the same fixed chunks either way, so a resumed run gives the numbers of an
uninterrupted one. A rerun whose header differs is refused with a ValueError naming the first difference,
unless `overwrite` (then the journal starts over). A last line cut short by the interruption is dropped.
"""

import datetime
import hashlib
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tqdm.auto import tqdm

LOCK_NAME = ".hf-slm.lock"
JOURNAL_VERSION = 1
# A lock file still being written by the run that created it is briefly empty: only an older one is stale.
UNREADABLE_LOCK_GRACE_SECONDS = 10


def _stderr(text):
    print(text, file=sys.stderr)


# ---- the output-folder lock -----------------------------------------------------------------------------


def _read_lock(path):
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        return holder if isinstance(holder, dict) and isinstance(holder.get("pid"), int) else None
    except (OSError, ValueError):
        return None


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _lock_is_stale(path, holder):
    if holder is None:
        try:
            return time.time() - path.stat().st_mtime > UNREADABLE_LOCK_GRACE_SECONDS
        except FileNotFoundError:
            return True
    if holder.get("host") != socket.gethostname():
        return False  # a process on another machine cannot be checked from here
    return not _process_alive(holder["pid"])


@contextmanager
def output_lock(directory, command=None, log=_stderr):
    """Hold `<directory>/.hf-slm.lock` while the block runs (the folder is created if needed).

    Raises ValueError, naming the lock file and the pid holding it, when another live process holds it; a
    stale lock (its process is gone) is taken over with one line to `log`. A folder created here is removed
    again when the block fails before writing anything into it.
    """
    directory = Path(directory)
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname(), "command": command or " ".join(sys.argv),
          "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    while True:
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = _read_lock(path)
            if holder is not None and holder["pid"] == me["pid"] and holder.get("host") == me["host"]:
                yield path  # this process holds it already; the outer holder releases it
                return
            if not _lock_is_stale(path, holder):
                who = f"pid {holder['pid']}" if holder else "a process that is starting"
                raise ValueError(
                    f"output folder {str(directory)!r} is being written by another run (lock file {path}, {who}"
                    + (f": {holder.get('command')}" if holder and holder.get("command") else "")
                    + "); wait for it to finish, or choose another output folder"
                )
            log(f"taking over the stale lock {path} (pid {holder['pid'] if holder else '?'} is not running)")
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(me, handle)
        break
    try:
        yield path
    finally:
        holder = _read_lock(path)
        if holder is not None and holder["pid"] == me["pid"]:
            path.unlink(missing_ok=True)
        if created and not any(directory.iterdir()):
            directory.rmdir()


# ---- what a run is ---------------------------------------------------------------------------------------


def data_fingerprint(source, contents=True, name=None):
    """A description of data for a journal header: {"name" (`name`, else the path), "sha256"}.

    `source` is a file, a folder (every file under it, by relative name, hidden ones left out), or a list or
    a mapping of those. With contents=False only the files' names, sizes and modification times are hashed (for
    data too big to read twice). Data held in memory: `text_fingerprint`.
    """
    digest = hashlib.sha256()

    def add(item):
        if isinstance(item, dict):
            for key in sorted(item):
                digest.update(f"[{key}]".encode())
                add(item[key])
            return
        if isinstance(item, (list, tuple)):
            for element in item:
                add(element)
            return
        path = Path(item)
        files = sorted(p for p in path.rglob("*") if p.is_file() and not any(
            part.startswith(".") for part in p.relative_to(path).parts)) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
            if contents:
                with open(file, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
            else:
                stat = file.stat()
                digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())

    add(source)
    if name is None:
        name = source if isinstance(source, (str, Path)) and len(str(source)) < 300 else type(source).__name__
    return {"name": str(name), "sha256": digest.hexdigest()}


def text_fingerprint(text, name="in memory"):
    """{"name", "sha256"} of data held in memory, as its text."""
    return {"name": name, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def model_fingerprint(model):
    """{"grammar", "parameters_sha256"}: the model by its weights, wherever it was loaded from ("grammar": what its
    family's record calls it, hf_slm.families.model_identity); plus "autocast" (e.g. "torch.bfloat16") when it
    computes under torch.autocast (`hf-slm ... --autocast`), whose numbers differ from float32's: a journal of one is
    not resumed by the other."""
    import torch

    from ..families import model_identity

    grammar = model_identity(getattr(model, "config", None))
    if not hasattr(model, "state_dict"):  # a stand-in without weights (tests, custom scorers)
        return {"grammar": grammar, "parameters_sha256": None}
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    fingerprint = {"grammar": grammar, "parameters_sha256": digest.hexdigest()}
    device_type = next(model.parameters()).device.type if any(True for _ in model.parameters()) else "cpu"
    if torch.is_autocast_enabled(device_type):
        fingerprint["autocast"] = str(torch.get_autocast_dtype(device_type))
    return fingerprint


# ---- the journal -----------------------------------------------------------------------------------------


def _plain(value):
    """numpy numbers and arrays as JSON numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _first_difference(recorded, current, where=""):
    """'settings.limit: 5 in the journal, 3 now' for the first differing entry of two headers, or None."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        for key in list(recorded) + [k for k in current if k not in recorded]:
            difference = _first_difference(recorded.get(key), current.get(key), f"{where}.{key}" if where else key)
            if difference:
                return difference
        return None
    if recorded != current:
        shown = [json.dumps(value)[:80] for value in (recorded, current)]
        return f"{where or 'header'}: {shown[0]} in the journal, {shown[1]} now"
    return None


class RunJournal:
    """A journal of finished items (see the module docstring); `finished` maps keys to recorded values."""

    def __init__(self, path, header, overwrite=False, log=_stderr):
        self.path = Path(path)
        self.header = json.loads(json.dumps({"journal": JOURNAL_VERSION, **header}, default=str))
        self.log = log
        self.finished = {}
        # The file is (re)written at the first finished item: a run that fails before it leaves no journal, and
        # an overwriting run that fails that early leaves the earlier run's journal as it was.
        self._fresh = overwrite or not self.path.exists()
        self._handle = None
        if not self._fresh:
            self._resume()

    def _resume(self):
        text = self.path.read_text(encoding="utf-8")
        complete = text[: text.rfind("\n") + 1]  # a line cut short by the interruption is dropped
        if len(complete) != len(text):
            self.path.write_text(complete, encoding="utf-8")
        lines = complete.splitlines()
        try:
            recorded = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            recorded = None
        if not isinstance(recorded, dict) or "journal" not in recorded:
            raise ValueError(f"{self.path}: not a journal of hf-slm (its first line is no header); remove it or "
                             "pass --overwrite to start over")
        difference = _first_difference(recorded, self.header)
        if difference:
            raise ValueError(f"{self.path} belongs to another run ({difference}); pass --overwrite to discard it "
                             "and start over, or write elsewhere with --output")
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                self.finished[entry["key"]] = entry["value"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{self.path}, line {number}: not a journal entry {{\"key\", \"value\"}}; remove "
                                 "the file or pass --overwrite to start over") from None

    def record(self, pairs):
        """Append (key, value) pairs and flush them to disk."""
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.path, "w" if self._fresh else "a", encoding="utf-8")
            if self._fresh:
                self._handle.write(json.dumps(self.header) + "\n")
        for key, value in pairs:
            self._handle.write(json.dumps({"key": key, "value": value}, default=_plain) + "\n")
            self.finished[key] = value
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def say_resumed(self, keys, unit="item"):
        """Log how many of `keys` were finished by an earlier run (nothing when none were)."""
        resumed = sum(1 for key in keys if key in self.finished)
        if resumed:
            self.log(f"resuming {self.path.name}: {resumed} of {len(keys)} {unit}s already finished")

    def close(self):
        if self._handle is not None:
            self._handle.close()


def journaled(journal, keys, compute):
    """The values of `keys` (one each): read from `journal` when every key is finished there, else `compute()`d
    and recorded. Values come back as JSON gives them (numpy arrays and tuples as lists), computed or resumed
    alike, so that a resumed run gives the numbers of an uninterrupted one. `journal` None: computed only."""
    keys = list(keys)
    if journal is not None and all(key in journal.finished for key in keys):
        return [journal.finished[key] for key in keys]
    computed = _checked_values(compute(), keys)
    if journal is not None:
        computed = _as_journaled(computed)
        journal.record(zip(keys, computed))
    return computed


def _checked_values(values, keys):
    values = list(values)
    if len(values) != len(keys):
        raise ValueError(f"computed {len(values)} values for {len(keys)} keys")
    return values


def _as_journaled(values):
    """Values as a journal gives them back (JSON: numpy arrays and tuples as lists)."""
    return [json.loads(json.dumps(value, default=_plain)) for value in values]


def proposal_chunks(blocks, evaluate, chunk_size, total, progress=False, desc="reranking", unit="sentence"):
    """Call `evaluate(chunk)` on consecutive `blocks` (index, proposals, locations), a chunk closing once it holds
    `chunk_size` proposals, with a progress bar over `total` blocks. Returns how many blocks there were."""
    return proposal_rounds(blocks, lambda chunks: evaluate(chunks[0]), chunk_size, 1, total, progress, desc, unit)


def proposal_rounds(blocks, evaluate_round, chunk_size, chunks_per_round, total, progress=False, desc="reranking",
                    unit="sentence"):
    """proposal_chunks, `evaluate_round(chunks)` called on `chunks_per_round` consecutive chunks at a time (the
    last round may hold fewer): one chunk per process under torchrun (journaled_chunks shares them out). The
    blocks are read as they come, at most one round of them held at a time. Returns how many blocks there were."""
    chunk, in_chunk, count, round_ = [], 0, 0, []

    def close_round(bar):
        evaluate_round(round_)
        bar.update(sum(len(done) for done in round_))
        round_.clear()

    with tqdm(total=total, desc=desc, unit=unit, disable=not progress) as bar:
        for block in blocks:
            chunk.append(block)
            in_chunk += len(block[1])
            count += 1
            if in_chunk >= chunk_size:
                round_.append(chunk)
                chunk, in_chunk = [], 0
                if len(round_) == chunks_per_round:
                    close_round(bar)
        if chunk:
            round_.append(chunk)
        if round_:
            close_round(bar)
    return count


def journaled_chunks(journal, chunk_keys, compute):
    """[journaled(journal, keys, lambda: compute(i)) for i, keys in enumerate(chunk_keys)]: the values of each
    chunk's keys, read from `journal` when all of the chunk's keys are finished there, else `compute(i)`d.

    Under torchrun / accelerate launch the chunks still to compute are dealt out to the processes (chunk
    pending[k * N + r] to process r in round k) and gathered, so that every process gets the values one process
    would; only the main process's journal is read and written (the others may pass None).
    """
    from .distributed import broadcast_from_main, gathered, is_distributed, is_main_process, rank, world_size

    chunk_keys = [list(keys) for keys in chunk_keys]
    if not is_distributed():
        return [journaled(journal, keys, lambda index=index: compute(index)) for index, keys in enumerate(chunk_keys)]
    journal = journal if is_main_process() else None  # one reader and writer
    finished = broadcast_from_main(None if journal is None else [
        [journal.finished[key] for key in keys] if all(key in journal.finished for key in keys) else None
        for keys in chunk_keys])
    journaling = finished is not None  # values come back as a journal gives them, as with one process
    values = list(finished) if journaling else [None] * len(chunk_keys)
    pending = [index for index, value in enumerate(values) if value is None]
    for first in range(0, len(pending), world_size()):
        round_ = pending[first : first + world_size()]
        mine = round_[rank()] if rank() < len(round_) else None
        results = gathered(None if mine is None else lambda: _checked_values(compute(mine), chunk_keys[mine]),
                           "computing items")
        for index, computed in zip(round_, results):
            values[index] = _as_journaled(computed) if journaling else computed
            if journal is not None:
                journal.record(zip(chunk_keys[index], values[index]))
    return values


def map_in_chunks(compute, items, chunk_size, journal=None, keys=None, progress=False, desc=None, unit="item"):
    """[compute(chunk) values for every item], computed `chunk_size` items at a time, in order.

    With a journal, a chunk whose items are all finished is read from it, and every computed chunk is recorded
    as soon as it is done, and values come back as JSON gives them (tuples as lists), computed or resumed alike.
    `keys` name the items in the journal (default: their positions).

    Under torchrun / accelerate launch, the processes share the chunks (`_map_across_processes`): the values
    are those of one process, on every process.
    """
    from .distributed import is_distributed

    items = list(items)
    keys = [str(index) for index in range(len(items))] if keys is None else list(keys)
    chunk_size = max(1, int(chunk_size))
    if is_distributed() and not _computing_a_share:
        return _map_across_processes(compute, items, chunk_size, journal, keys, progress, desc, unit)
    if journal is not None:
        journal.say_resumed(keys, unit)
    values = []
    with tqdm(total=len(items), desc=desc, unit=unit, disable=not progress) as bar:
        for start in range(0, len(items), chunk_size):
            chunk_keys = keys[start : start + chunk_size]
            chunk = items[start : start + chunk_size]
            values.extend(journaled(journal, chunk_keys, lambda: compute(chunk)))
            bar.update(len(chunk_keys))
    return values


# True while this process computes its chunk of a map shared out across processes: a map inside that chunk (e.g.
# the documents' silver trees of a summary) runs in this process alone, since the others are not there to share it.
_computing_a_share = False


def _map_across_processes(compute, items, chunk_size, journal, keys, progress, desc, unit):
    """map_in_chunks under several processes (hf_slm/runs/distributed.py): the same chunks as one process computes,
    the unfinished ones dealt out in rounds (round k: chunk k * N + r to process r), each round's values gathered
    on every process. The main process alone holds the journal (the others get None): it says which chunks are
    finished, and records each round as soon as it is gathered; its progress bar is the only one."""
    from .distributed import broadcast_from_main, gathered, is_main_process, rank, world_size

    journal = journal if is_main_process() else None  # one writer
    finished = broadcast_from_main(None if journal is None else
                                   {key: journal.finished[key] for key in keys if key in journal.finished})
    journaling = finished is not None  # values come back as a journal gives them, as with one process
    if journal is not None:
        journal.say_resumed(keys, unit)
    starts = range(0, len(items), chunk_size)
    values = {start: [finished[key] for key in keys[start : start + chunk_size]] for start in starts
              if journaling and all(key in finished for key in keys[start : start + chunk_size])}
    pending = [start for start in starts if start not in values]

    def compute_chunk(start):
        global _computing_a_share
        _computing_a_share = True
        try:
            computed = _checked_values(compute(items[start : start + chunk_size]), keys[start : start + chunk_size])
        finally:
            _computing_a_share = False
        return _as_journaled(computed) if journaling else computed

    with tqdm(total=len(items), desc=desc, unit=unit, disable=not (progress and is_main_process())) as bar:
        bar.update(sum(len(chunk) for chunk in values.values()))
        for first in range(0, len(pending), world_size()):
            round_starts = pending[first : first + world_size()]
            mine = round_starts[rank()] if rank() < len(round_starts) else None
            results = gathered(None if mine is None else lambda: compute_chunk(mine), f"computing {desc or 'items'}")
            for start, chunk_values in zip(round_starts, results):
                values[start] = chunk_values
                if journal is not None:
                    journal.record(zip(keys[start : start + chunk_size], chunk_values))
                bar.update(len(chunk_values))
    return [value for start in starts for value in values[start]]


__all__ = ["LOCK_NAME", "RunJournal", "data_fingerprint", "journaled", "journaled_chunks", "map_in_chunks",
           "model_fingerprint", "output_lock", "proposal_chunks", "proposal_rounds", "text_fingerprint"]
