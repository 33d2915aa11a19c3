"""`hf-slm data fetch NAME`: download a public dataset from its official source into a local cache, checked.

Each dataset is a manifest in hf_slm/data/sources/NAME.json: what it is, its license, the release it is pinned
to (a commit, never a moving branch), and for every file its path, size and SHA-256:

    {"name": "syntaxgym", "description": "...", "license": "MIT", "homepage": "https://...",
     "release": "commit 43f1f86...", "base_url": "https://raw.githubusercontent.com/.../43f1f86.../",
     "use": "test_suites/json", "checksums": "how the checksums were obtained",
     "files": [{"path": "test_suites/json/cleft.json", "size": 169883, "sha256": "..."}, ...]}

A file's URL is `base_url` + its path, unless the file gives its own `url`. Files land in
`CACHE/NAME/PATH`, where CACHE is $HF_SLM_DATA_CACHE or ~/.cache/hf-slm/data. A download goes to
`PATH.partial` first and takes its real name only once its checksum matches, so a file at its real name has
been checked: an interrupted or corrupted download leaves nothing behind, and a second fetch reads the cache
(re-hashing it, which costs a fraction of a second) and opens no connection. $HF_SLM_DATA_MIRROR=URL fetches
`URL/NAME/PATH` instead (a local mirror; the tests' server) and checks the same checksums.

`fetch_dataset` returns the folder a command reads (`use`, e.g. the suites folder of SyntaxGym); the command
prints it on stdout and nothing else, so `--suites "$(hf-slm data fetch syntaxgym)"` works.
"""

import hashlib
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..runs.disk import readable_size

SOURCES = Path(__file__).resolve().parent / "sources"
CACHE_VARIABLE = "HF_SLM_DATA_CACHE"
MIRROR_VARIABLE = "HF_SLM_DATA_MIRROR"
CHUNK_BYTES = 1 << 16
TIMEOUT_SECONDS = 30


class ChecksumMismatch(ValueError):
    """A downloaded file is not the file of the manifest (a ValueError: `hf-slm` prints it as one line)."""


class DownloadFailed(OSError):
    """The source could not be reached or answered an error (an OSError: one line on the command line)."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    size: int
    sha256: str
    url: str


@dataclass(frozen=True)
class DataSource:
    """One fetchable dataset: the manifest hf_slm/data/sources/NAME.json (module docstring)."""

    name: str
    description: str
    license: str
    homepage: str
    release: str
    use: str
    checksums: str
    files: tuple

    @property
    def size(self):
        return sum(file.size for file in self.files)

    @classmethod
    def from_manifest(cls, manifest):
        base_url = manifest["base_url"]
        files = tuple(SourceFile(entry["path"], int(entry["size"]), entry["sha256"].lower(),
                                 entry.get("url") or base_url + entry["path"]) for entry in manifest["files"])
        return cls(manifest["name"], manifest["description"], manifest["license"], manifest["homepage"],
                   manifest["release"], manifest.get("use", "."), manifest["checksums"], files)


def available_sources():
    """{name: DataSource} of every manifest shipped in hf_slm/data/sources/, by name."""
    sources = {}
    for path in sorted(SOURCES.glob("*.json")):
        source = DataSource.from_manifest(json.loads(path.read_text(encoding="utf-8")))
        sources[source.name] = source
    return sources


def data_source(name):
    sources = available_sources()
    if name not in sources:
        raise ValueError(f"no dataset named {name!r} to fetch; expected one of {', '.join(sources)} "
                         "(hf-slm data fetch --list says what each is)")
    return sources[name]


def cache_root():
    """$HF_SLM_DATA_CACHE, else ~/.cache/hf-slm/data."""
    return Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "hf-slm" / "data").expanduser()


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_cached(path, file):
    return path.is_file() and path.stat().st_size == file.size and file_sha256(path) == file.sha256


def _url(source, file, mirror):
    return f"{mirror.rstrip('/')}/{source.name}/{file.path}" if mirror else file.url


def _download(url, target, file, bar):
    """Stream `url` into `target` (a .partial file), hashing as it goes; the SHA-256 of what arrived."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response, open(target, "wb") as out:
            for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                digest.update(chunk)
                out.write(chunk)
                bar.update(len(chunk))
    except urllib.error.HTTPError as error:
        raise DownloadFailed(f"cannot download {file.path} from {url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", None) or error
        raise DownloadFailed(f"cannot download {file.path} from {url}: {reason} (offline? a proxy? "
                             f"${MIRROR_VARIABLE} names a mirror)") from None
    return digest.hexdigest()


def fetch_dataset(name_or_source, cache_dir=None, mirror=None, progress=True):
    """Download dataset `name_or_source` (a manifest name or a DataSource) into CACHE/NAME, checked against
    its SHA-256 checksums, and return the folder to read (CACHE/NAME/USE). CACHE is `cache_dir`, default
    cache_root(); `mirror` (default $HF_SLM_DATA_MIRROR) replaces the source URLs by MIRROR/NAME/PATH. Files
    already in the cache with the right checksum are kept and nothing is downloaded for them.

    Raises ChecksumMismatch (naming the file, the expected and the received hash; the download is deleted)
    and DownloadFailed (the source unreachable or answering an error).
    """
    from tqdm.auto import tqdm

    source = name_or_source if isinstance(name_or_source, DataSource) else data_source(name_or_source)
    folder = (Path(cache_dir) if cache_dir is not None else cache_root()) / source.name
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_VARIABLE) or None
    missing = [file for file in source.files if not _is_cached(folder / file.path, file)]
    with tqdm(total=sum(file.size for file in missing), desc=f"fetching {source.name}", unit="B",
              unit_scale=True, disable=not (progress and missing)) as bar:
        for file in missing:
            target = folder / file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            url = _url(source, file, mirror)
            try:
                received = _download(url, partial, file, bar)
                if received != file.sha256:
                    raise ChecksumMismatch(f"{source.name}: {file.path} from {url} has SHA-256 {received}, expected "
                                           f"{file.sha256}; the download was deleted (a changed or corrupted file)")
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    return folder / source.use


def describe_sources(sources=None):
    """The lines `hf-slm data fetch --list` prints: name, size, license, then what it is and where from."""
    sources = available_sources() if sources is None else sources
    lines = []
    for source in sources.values():
        size = f"{readable_size(source.size)}, {len(source.files)} files"
        lines.append(f"{source.name}  ({size}; license: {source.license})")
        lines.append(f"    {source.description}")
        lines.append(f"    from {source.homepage}, {source.release}")
    lines.append(f"Files go to ${CACHE_VARIABLE} or ~/.cache/hf-slm/data, in a folder named after the dataset.")
    return lines


