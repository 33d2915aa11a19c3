"""`hf-slm data fetch` (hf_slm/data/fetch.py) against a file server on 127.0.0.1 that the tests start: a
download checked against its SHA-256, the cache reused without a request, a changed file refused and deleted,
an unreachable source in one line; and the shipped manifests: pinned to commits, and (where the project's
copies in ../shared/data are at hand) the checksums of those copies."""

import hashlib
import json
import re
import socket
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hf_slm.cli.commands import main
from hf_slm.data.fetch import (
    CACHE_VARIABLE,
    MIRROR_VARIABLE,
    ChecksumMismatch,
    DataSource,
    DownloadFailed,
    available_sources,
    fetch_dataset,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
# the project's copy of each fetchable dataset (../shared/data/README.md)
SHARED_COPIES = {"ud-english-ewt": "ud_english_ewt", "syntaxgym": "syntaxgym", "blimp": "blimp",
                 "gum-const": "gum_const"}


class FileServer:
    """A folder served over HTTP on 127.0.0.1, recording the paths asked for."""

    def __init__(self, root):
        self.root, self.requested = Path(root), []
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self):
                server.requested.append(self.path)
                super().do_GET()

            def log_message(self, *args):  # keep the test output quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(self.root)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # shutdown() waits for the loop's next look at its flag: 0.5 s by default, at every test's end
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path):
    (tmp_path / "served").mkdir()
    with FileServer(tmp_path / "served") as running:
        yield running


def _closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(server, files):
    """Write {path: bytes} under the server's folder; the manifest entries with their real checksums."""
    entries = []
    for path, data in files.items():
        target = server.root / "toy" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        entries.append({"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return entries


def _toy_source(server, entries, use="suites"):
    return DataSource.from_manifest({
        "name": "toy", "description": "two small files", "license": "CC0", "homepage": server.url,
        "release": "test", "base_url": f"{server.url}/toy/", "use": use, "checksums": "computed by the test",
        "files": entries})


FILES = {"suites/a.json": b'{"items": [1, 2, 3]}\n', "LICENSE": b"Public domain.\n" * 200}


def test_fetch_downloads_checks_and_then_reads_the_cache(server, tmp_path):
    source = _toy_source(server, _serve(server, FILES))
    cache = tmp_path / "cache"
    folder = fetch_dataset(source, cache_dir=cache, progress=False)
    assert folder == cache / "toy" / "suites"
    assert {path: (cache / "toy" / path).read_bytes() for path in FILES} == FILES
    assert sorted(server.requested) == ["/toy/LICENSE", "/toy/suites/a.json"]
    assert not list(cache.rglob("*.partial"))
    # a second fetch finds every file with its checksum and asks the server for nothing
    assert fetch_dataset(source, cache_dir=cache, progress=False) == folder
    assert len(server.requested) == 2


def test_a_damaged_cached_file_is_downloaded_again(server, tmp_path):
    source = _toy_source(server, _serve(server, FILES))
    cache = tmp_path / "cache"
    fetch_dataset(source, cache_dir=cache, progress=False)
    (cache / "toy" / "LICENSE").write_bytes(b"Public domain.\n" * 199 + b"Public d0main.\n")  # same size
    fetch_dataset(source, cache_dir=cache, progress=False)
    assert server.requested[2:] == ["/toy/LICENSE"]
    assert (cache / "toy" / "LICENSE").read_bytes() == FILES["LICENSE"]


def test_a_changed_file_is_refused_and_nothing_of_it_is_kept(server, tmp_path):
    entries = _serve(server, FILES)
    changed = b'{"items": [1, 2, 4]}\n'
    (server.root / "toy" / "suites" / "a.json").write_bytes(changed)
    source = _toy_source(server, entries)
    cache = tmp_path / "cache"
    expected = hashlib.sha256(FILES["suites/a.json"]).hexdigest()
    got = hashlib.sha256(changed).hexdigest()
    with pytest.raises(ChecksumMismatch) as raised:
        fetch_dataset(source, cache_dir=cache, progress=False)
    message = str(raised.value)
    assert "suites/a.json" in message and f"expected {expected}" in message and f"SHA-256 {got}" in message
    assert not (cache / "toy" / "suites" / "a.json").exists()
    assert not list(cache.rglob("*.partial"))


def test_an_unreachable_source_raises_download_failed(tmp_path):
    source = DataSource.from_manifest({
        "name": "toy", "description": "", "license": "", "homepage": "", "release": "", "checksums": "",
        "base_url": f"http://127.0.0.1:{_closed_port()}/toy/",
        "files": [{"path": "a.txt", "size": 1, "sha256": "0" * 64}]})
    with pytest.raises(DownloadFailed, match=r"cannot download a\.txt from http://127\.0\.0\.1:\d+/toy/a\.txt: "):
        fetch_dataset(source, cache_dir=tmp_path, progress=False)
    assert not list(tmp_path.rglob("a.txt*"))


def test_the_command_line_says_an_unreachable_mirror_in_one_line(tmp_path, monkeypatch, capsys):
    port = _closed_port()
    monkeypatch.setenv(MIRROR_VARIABLE, f"http://127.0.0.1:{port}")
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    assert main(["data", "fetch", "--quiet", "syntaxgym"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    first = available_sources()["syntaxgym"].files[0].path
    assert line.startswith(f"hf-slm data fetch: error: cannot download {first} from "
                           f"http://127.0.0.1:{port}/syntaxgym/{first}: "), line


def test_the_command_line_names_the_file_and_both_hashes_of_a_mismatch(server, tmp_path, monkeypatch, capsys):
    # the mirror holds a file that is not BLiMP's: the real manifest's checksum refuses it
    first = available_sources()["blimp"].files[0]
    bogus = b'{"sentence_good": "x", "sentence_bad": "y"}\n'
    (server.root / "blimp" / first.path).parent.mkdir(parents=True)
    (server.root / "blimp" / first.path).write_bytes(bogus)
    monkeypatch.setenv(MIRROR_VARIABLE, server.url)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    assert main(["data", "fetch", "--quiet", "blimp"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"hf-slm data fetch: error: blimp: {first.path} from {server.url}/blimp/{first.path} "
                           f"has SHA-256 {hashlib.sha256(bogus).hexdigest()}, expected {first.sha256}"), line
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*"))


def test_list_says_what_each_dataset_is_its_license_and_size(capsys):
    assert main(["data", "fetch", "--list"]) == 0
    out = capsys.readouterr().out
    for name, size_text, license_text in [("ud-english-ewt", "17.9 MB", "CC BY-SA 4.0"), ("syntaxgym", "4.2 MB", "MIT"),
                                          ("blimp", "29.6 MB", "CC BY 4.0")]:
        (line,) = [line for line in out.splitlines() if line.startswith(f"{name}  ")]
        assert size_text in line and license_text in line, line


def test_fetch_without_a_name_is_an_error(capsys):
    assert main(["data", "fetch"]) == 2
    assert "name a dataset to fetch (blimp, gum-const, syntaxgym, ud-english-ewt) or give --list" in \
        capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(available_sources()))
def test_manifests_pin_commits_and_give_a_checksum_per_file(name):
    source = available_sources()[name]
    paths = [file.path for file in source.files]
    assert len(paths) == len(set(paths)), "a path is listed twice"
    for file in source.files:
        # raw.githubusercontent.com/OWNER/REPO/<40-hex commit>/PATH: a fixed release, never a branch
        assert re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/\S+", file.url), file.url
        assert re.fullmatch(r"[0-9a-f]{64}", file.sha256) and file.size > 0
        assert not Path(file.path).is_absolute() and ".." not in Path(file.path).parts
    assert source.license and source.description and source.checksums.startswith("verified")


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the project's copies of the datasets) is absent")
@pytest.mark.parametrize("name", sorted(SHARED_COPIES))
def test_manifest_checksums_are_those_of_the_projects_copy(name):
    """The project's copies were staged byte-identical from the pinned commits (their PROVENANCE.md): the
    manifests' sizes and SHA-256s must be theirs, or every real download would be refused."""
    folder = SHARED / SHARED_COPIES[name]
    for file in available_sources()[name].files:
        data = (folder / file.path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (file.size, file.sha256), file.path


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the project's copies of the datasets) is absent")
def test_fetching_syntaxgym_from_a_mirror_of_the_real_files_prints_the_suites_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "syntaxgym").symlink_to(SHARED / "syntaxgym")
    with FileServer(tmp_path / "mirror") as mirror:
        monkeypatch.setenv(MIRROR_VARIABLE, mirror.url)
        monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
        assert main(["data", "fetch", "--quiet", "syntaxgym"]) == 0
        suites = tmp_path / "cache" / "syntaxgym" / "test_suites" / "json"
        assert capsys.readouterr().out == f"{suites}\n"
        assert len(list(suites.glob("*.json"))) == 34
        assert json.loads((suites / "cleft.json").read_text())["meta"]["name"] == "cleft"
        requests = len(mirror.requested)
        assert main(["data", "fetch", "--quiet", "syntaxgym"]) == 0 and len(mirror.requested) == requests == 37
