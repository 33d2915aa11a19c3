"""A small Hugging Face Hub for tests, served on 127.0.0.1 from a temporary folder (standard library only).

It speaks the part of the Hub's HTTP API that huggingface_hub 2.4 and transformers 5.23 use to publish and
load a model: create a repo, preupload, commit, list the tree, resolve (download) a file by branch or commit,
model info, refs, branches and commit history. Point a client at it with HF_ENDPOINT=hub.url (read when
huggingface_hub is imported) or `HfApi(endpoint=hub.url)`.

    with LocalHub(tmp_path / "hub", token="hf_fake") as hub:
        HfApi(endpoint=hub.url, token="hf_fake").create_repo("org/model")

Storage is git-like: every commit is an immutable snapshot {path: blob id} with its parent, blobs are stored
once under their git blob hash (sha1 of "blob <size>\\0" + content, what huggingface_hub compares to skip
unchanged files), and branches point at commits. A new repo starts with an "initial commit" holding
`.gitattributes`, as on the Hub.

Left out on purpose: LFS and Xet storage (preupload answers uploadMode "regular" for every file, so contents
arrive inline, base64-encoded, in the commit's ndjson; huggingface_hub then uploads nothing elsewhere, Xet
installed or not), pull requests, tags, pagination, dataset and space repos, and YAML checks of README
metadata beyond its `---` delimiters. A request the server does not know gets a 404 and is recorded in
`hub.unhandled`, so tests can assert that the client asked for nothing else.
"""

import base64
import datetime
import hashlib
import json
import re
import shutil
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_BRANCH = "main"
# Hub naming rules (as huggingface_hub validates repo ids): letters, digits, '-', '_', '.'; no leading or
# trailing '-' or '.'; no '--' or '..'; at most 96 characters.
NAME_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
COMMIT_ID_PATTERN = re.compile(r"[0-9a-f]{40}")
REPO = r"(?P<repo>[^/]+/[^/]+)"
GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"


class HubError(Exception):
    """An error answer: HTTP status, the X-Error-Code huggingface_hub maps to its exception classes, a message."""

    def __init__(self, status, message, code=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = {}


def git_blob_id(data):
    """The git object id of a file's content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def now_iso():
    """The current UTC time in the Hub's format, 2024-01-31T12:00:00.000Z."""
    moment = datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def clean_path(path, what="path"):
    """A repo path with '/' separators, refusing absolute paths, '.', '..' and empty segments."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise HubError(400, f"invalid {what} {path!r}: expected a relative path like 'folder/file.json'")
    return path


class RepoStore:
    """The repos of one hub, on disk: <root>/<namespace>/<name>/{repo.json, commits/<id>.json, blobs/<id>}."""

    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        # One lock for every read-modify-write of a repo: commits to a branch are serialized as on a git server.
        self.lock = threading.RLock()

    # ---- repos and refs --------------------------------------------------------------------------
    def folder(self, repo_id):
        return self.root / repo_id

    def exists(self, repo_id):
        return (self.folder(repo_id) / "repo.json").is_file()

    def metadata(self, repo_id):
        """repo.json: id, private, createdAt, branches {name: commit id}; RepoNotFound when absent."""
        path = self.folder(repo_id) / "repo.json"
        if not path.is_file():
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return json.loads(path.read_text())

    def write_metadata(self, repo_id, metadata):
        path = self.folder(repo_id) / "repo.json"
        path.with_suffix(".tmp").write_text(json.dumps(metadata, indent=1))
        path.with_suffix(".tmp").replace(path)

    def create(self, repo_id, private, author):
        with self.lock:
            if self.exists(repo_id):
                return False
            folder = self.folder(repo_id)
            (folder / "commits").mkdir(parents=True, exist_ok=True)
            (folder / "blobs").mkdir(exist_ok=True)
            self.write_metadata(repo_id, {"id": repo_id, "private": bool(private), "createdAt": now_iso(),
                                          "branches": {}})
            self.commit(repo_id, DEFAULT_BRANCH, "initial commit", "", {".gitattributes": GITATTRIBUTES}, [], [],
                        author=author, create_branch=True)
            return True

    def resolve(self, repo_id, revision):
        """Commit id of a branch name ('main', 'refs/heads/main') or a full commit id of this repo."""
        metadata = self.metadata(repo_id)
        name = revision[len("refs/heads/"):] if revision.startswith("refs/heads/") else revision
        if name in metadata["branches"]:
            return metadata["branches"][name]
        if COMMIT_ID_PATTERN.fullmatch(revision) and (self.folder(repo_id) / "commits" / f"{revision}.json").is_file():
            return revision
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def branch_name(self, repo_id, revision):
        """The branch a commit goes to; commits on a commit id or an unknown branch are refused."""
        metadata = self.metadata(repo_id)
        name = revision[len("refs/heads/"):] if revision.startswith("refs/heads/") else revision
        if name not in metadata["branches"]:
            raise HubError(404, f"Invalid rev id: {revision} is not a branch of {repo_id} (create it first)",
                           "RevisionNotFound")
        return name

    def create_branch(self, repo_id, branch, starting_point=None):
        with self.lock:
            metadata = self.metadata(repo_id)
            if branch in metadata["branches"]:
                raise HubError(409, f"Reference refs/heads/{branch} already exists")
            if not NAME_PATTERN.fullmatch(branch):
                raise HubError(400, f"invalid branch name {branch!r}")
            metadata["branches"][branch] = self.resolve(repo_id, starting_point or DEFAULT_BRANCH)
            self.write_metadata(repo_id, metadata)

    # ---- commits and blobs -----------------------------------------------------------------------
    def read_commit(self, repo_id, commit_id):
        return json.loads((self.folder(repo_id) / "commits" / f"{commit_id}.json").read_text())

    def read_blob(self, repo_id, blob_id):
        return (self.folder(repo_id) / "blobs" / blob_id).read_bytes()

    def files(self, repo_id, revision):
        """(commit id, {path: blob id}) of a revision."""
        commit_id = self.resolve(repo_id, revision)
        return commit_id, self.read_commit(repo_id, commit_id)["files"]

    def history(self, repo_id, revision):
        """Commits from a revision back to the first one (first parents), newest first."""
        commit = self.read_commit(repo_id, self.resolve(repo_id, revision))
        commits = [commit]
        while commit["parents"]:
            commit = self.read_commit(repo_id, commit["parents"][0])
            commits.append(commit)
        return commits

    def commit(self, repo_id, branch, title, description, additions, deleted_files, deleted_folders, author,
               parent_commit=None, create_branch=False):
        """Apply additions {path: bytes} and deletions on top of the branch head; return the new commit id."""
        with self.lock:
            metadata = self.metadata(repo_id)
            head = metadata["branches"].get(branch)
            if head is None and not create_branch:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            if parent_commit is not None and parent_commit != head:
                raise HubError(412, f"A commit has happened since {parent_commit}. Please refresh and try again.")
            files = dict(self.read_commit(repo_id, head)["files"]) if head else {}
            for path in deleted_files:
                if path not in files:
                    raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                del files[path]
            for folder in deleted_folders:
                prefix = folder.rstrip("/") + "/"
                doomed = [path for path in files if path.startswith(prefix)]
                if not doomed:
                    raise HubError(404, f"A folder with this name doesn't exist: {folder}", "EntryNotFound")
                for path in doomed:
                    del files[path]
            for path, data in additions.items():
                blob_id = git_blob_id(data)
                blob = self.folder(repo_id) / "blobs" / blob_id
                if not blob.exists():
                    blob.write_bytes(data)
                files[path] = blob_id
            record = {"parents": [head] if head else [], "title": title, "message": description, "date": now_iso(),
                      "author": author, "files": dict(sorted(files.items()))}
            record["id"] = hashlib.sha1(json.dumps(record, sort_keys=True).encode()).hexdigest()
            (self.folder(repo_id) / "commits" / f"{record['id']}.json").write_text(json.dumps(record, indent=1))
            metadata["branches"][branch] = record["id"]
            self.write_metadata(repo_id, metadata)
            return record["id"]

    def last_commits(self, repo_id, revision):
        """{path: the newest commit (of this revision's history) that changed it}, for files and their folders."""
        last = {}
        commits = self.history(repo_id, revision)
        for commit, parent in zip(commits, commits[1:] + [None]):
            before = parent["files"] if parent else {}
            changed = {path for path, blob in commit["files"].items() if before.get(path) != blob}
            changed |= set(before) - set(commit["files"])
            for path in changed:
                parts = path.split("/")
                for depth in range(1, len(parts) + 1):
                    last.setdefault("/".join(parts[:depth]), commit)
        return last


class LocalHub:
    """The server: `start()` binds a free port on 127.0.0.1 and serves in a thread; `stop()` shuts it down.

    token: when set, writes need `Authorization: Bearer <token>` and private repos are visible only with it.
    user: the namespace of repos created without an organization (what whoami answers).
    """

    def __init__(self, root, token=None, user="test-user"):
        self.store = RepoStore(root)
        self.token = token
        self.user = user
        self.requests = []  # (method, path, status), for tests that look at what the client asked
        self.unhandled = []  # requests no route matched
        self._server = None
        self._thread = None

    @property
    def url(self):
        if self._server is None:
            raise RuntimeError("the hub is not running: call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        hub = self

        class Handler(HubRequestHandler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # shutdown() waits for the loop's next look at its flag: 0.5 s by default
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="local-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def delete_all(self):
        """Remove every repo (for tests that want a clean hub)."""
        with self.store.lock:
            shutil.rmtree(self.store.root)
            self.store.root.mkdir(parents=True)

    # ---- access rules ----------------------------------------------------------------------------
    def authorized(self, headers):
        if self.token is None:
            return True
        return headers.get("Authorization", "") == f"Bearer {self.token}"

    def require_write(self, headers):
        if not self.authorized(headers):
            raise HubError(401, "Invalid credentials in Authorization header")

    def readable_metadata(self, repo_id, headers):
        """A repo's metadata if the caller may see it; private repos look absent without the token, as on the Hub."""
        metadata = self.store.metadata(repo_id)
        if metadata["private"] and not self.authorized(headers):
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return metadata


class HubRequestHandler(BaseHTTPRequestHandler):
    """Routes each request to a method below; answers JSON (errors carry X-Error-Code / X-Error-Message)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as httpx expects; every answer carries a Content-Length
    # The headers and the body go out in two writes: with Nagle's algorithm on, the body waited for the client's
    # delayed acknowledgement of the headers, 40 ms an answer on a kept-alive connection (0.8 ms without)
    disable_nagle_algorithm = True
    hub = None  # set per server by LocalHub.start

    ROUTES = [
        ("POST", r"/api/repos/create", "create_repo"),
        ("POST", r"/api/validate-yaml", "validate_yaml"),
        ("GET", r"/api/whoami-v2", "whoami"),
        ("GET", r"/api/agent-harnesses", "agent_harnesses"),
        ("POST", rf"/api/models/{REPO}/preupload/(?P<revision>[^/]+)", "preupload"),
        ("POST", rf"/api/models/{REPO}/commit/(?P<revision>[^/]+)", "commit"),
        ("POST", rf"/api/models/{REPO}/branch/(?P<branch>[^/]+)", "create_branch"),
        ("GET", rf"/api/models/{REPO}/tree/(?P<revision>[^/]+)(?:/(?P<path>.+))?", "tree"),
        ("GET", rf"/api/models/{REPO}/refs", "refs"),
        ("GET", rf"/api/models/{REPO}/commits/(?P<revision>[^/]+)", "commits"),
        ("GET", rf"/api/models/{REPO}(?:/revision/(?P<revision>[^/]+))?", "model_info"),
        ("GET", rf"/{REPO}/resolve/(?P<revision>[^/]+)/(?P<path>.+)", "resolve"),
        ("HEAD", rf"/{REPO}/resolve/(?P<revision>[^/]+)/(?P<path>.+)", "resolve"),
    ]

    # ---- plumbing --------------------------------------------------------------------------------
    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def log_message(self, format, *args):  # the request log is kept in hub.requests instead of stderr
        pass

    def dispatch(self, method):
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        self.body = self.read_body()
        status = 500
        try:
            for route_method, pattern, name in self.ROUTES:
                match = re.fullmatch(pattern, split.path)
                if route_method == method and match:
                    # Revisions and tree paths arrive percent-encoded ('refs%2Fpr%2F1', 'a%2Fb.json').
                    arguments = {key: unquote(value) for key, value in match.groupdict().items() if value is not None}
                    status = getattr(self, name)(**arguments)
                    break
            else:
                self.hub.unhandled.append((method, self.path))
                raise HubError(404, f"this test hub does not serve {method} {split.path}")
        except HubError as error:
            status = error.status
            headers = {"X-Error-Message": error.message, **error.headers}
            if error.code:
                headers["X-Error-Code"] = error.code
            self.send_json({"error": error.message}, status, headers)
        except Exception:  # a server bug: answer 500 with the traceback so the failing test shows it
            self.send_json({"error": traceback.format_exc()}, 500)
        self.hub.requests.append((method, self.path, status))

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                chunk = self.rfile.read(size)
                self.rfile.readline()  # the CRLF after each chunk
                if size == 0:
                    return b"".join(chunks)
                chunks.append(chunk)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def json_body(self):
        try:
            return json.loads(self.body or b"{}")
        except json.JSONDecodeError as error:
            raise HubError(400, f"request body is not JSON: {error}")

    def send_bytes(self, data, status=200, headers=None, content_type="application/octet-stream", body=True):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(data)
        return status

    def send_json(self, value, status=200, headers=None):
        return self.send_bytes(json.dumps(value).encode(), status, headers, content_type="application/json")

    def flag(self, name):
        """A boolean query parameter (httpx sends True as 'true')."""
        return self.query.get(name, ["false"])[-1].lower() in ("1", "true")

    def repo_url(self, repo_id):
        return f"{self.hub.url}/{repo_id}"

    # ---- routes ----------------------------------------------------------------------------------
    def create_repo(self):
        self.hub.require_write(self.headers)
        payload = self.json_body()
        if payload.get("type") not in (None, "model"):
            raise HubError(400, f"this test hub only hosts model repos, not {payload['type']!r}")
        name, namespace = payload.get("name"), payload.get("organization") or self.hub.user
        for part in (name, namespace):
            if not isinstance(part, str) or not NAME_PATTERN.fullmatch(part) or "--" in part or ".." in part:
                raise HubError(400, f"invalid repo name {namespace}/{name}: use letters, digits, '-', '_', '.'")
        repo_id = f"{namespace}/{name}"
        private = payload.get("visibility") == "private" or payload.get("private") is True
        if not self.hub.store.create(repo_id, private, author=self.hub.user):
            return self.send_json({"error": "You already created this model repo", "url": self.repo_url(repo_id)}, 409)
        return self.send_json({"url": self.repo_url(repo_id), "name": repo_id, "id": repo_id})

    def validate_yaml(self):
        content = self.json_body().get("content", "")
        lines = content.splitlines()
        if lines and lines[0].strip() == "---" and "---" not in (line.strip() for line in lines[1:]):
            return self.send_json({"errors": [{"message": "metadata block opened with '---' is never closed"}],
                                   "warnings": []}, 400)
        return self.send_json({"errors": [], "warnings": []})

    def whoami(self):
        if self.hub.token is not None and not self.hub.authorized(self.headers):
            raise HubError(401, "Invalid credentials in Authorization header")
        token = {"displayName": "test", "role": "write"}
        return self.send_json({"type": "user", "name": self.hub.user, "fullname": self.hub.user, "orgs": [],
                               "auth": {"type": "access_token", "accessToken": token}})

    def agent_harnesses(self):
        # huggingface_hub >= 2.4 fetches this registry once per process (utils/_detect_agent.py) to tag its
        # user agent; an empty one detects no agent.
        return self.send_json({"standardEnvVars": [], "harnesses": {}})

    def preupload(self, repo, revision):
        self.hub.require_write(self.headers)
        if self.flag("create_pr"):
            raise HubError(400, "this test hub does not do pull requests")
        store = self.hub.store
        store.branch_name(repo, revision)
        _, files = store.files(repo, revision)
        answers = []
        for entry in self.json_body().get("files", []):
            path = clean_path(entry.get("path", ""))
            # 'regular' for every file: contents then come inline with the commit, and no LFS/Xet upload is made.
            answers.append({"path": path, "uploadMode": "regular", "shouldIgnore": False, "oid": files.get(path)})
        return self.send_json({"files": answers, "commitOid": store.resolve(repo, revision)})

    def commit(self, repo, revision):
        self.hub.require_write(self.headers)
        if self.flag("create_pr"):
            raise HubError(400, "this test hub does not do pull requests")
        store = self.hub.store
        branch = store.branch_name(repo, revision)
        header, additions, deleted_files, deleted_folders = None, {}, [], []
        for number, line in enumerate(self.body.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                key, value = item["key"], item["value"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise HubError(400, f"commit payload line {number}: expected {{'key': ..., 'value': ...}} ({error})")
            if key == "header":
                header = value
            elif key == "file":
                content = value.get("content", "")
                data = base64.b64decode(content) if value.get("encoding") == "base64" else content.encode("utf-8")
                additions[clean_path(value.get("path", ""))] = data
            elif key == "deletedFile":
                deleted_files.append(clean_path(value.get("path", "")))
            elif key == "deletedFolder":
                deleted_folders.append(clean_path(value.get("path", "").rstrip("/")))
            elif key == "lfsFile":
                raise HubError(400, f"commit payload line {number}: this test hub stores no LFS objects "
                                    "(preupload answers uploadMode 'regular')")
            else:
                raise HubError(400, f"commit payload line {number}: unknown key {key!r}")
        if header is None or not header.get("summary"):
            raise HubError(400, "commit payload: the first line must be the header with a summary")
        commit_id = store.commit(repo, branch, header["summary"], header.get("description", ""), additions,
                                 deleted_files, deleted_folders, author=self.hub.user,
                                 parent_commit=header.get("parentCommit"))
        return self.send_json({"success": True, "commitOid": commit_id, "hookOutput": "", "pullRequestUrl": None,
                               "commitUrl": f"{self.repo_url(repo)}/commit/{commit_id}"})

    def create_branch(self, repo, branch):
        self.hub.require_write(self.headers)
        self.hub.store.create_branch(repo, branch, self.json_body().get("startingPoint"))
        return self.send_json({})

    def tree(self, repo, revision, path=""):
        self.hub.readable_metadata(repo, self.headers)
        store = self.hub.store
        commit_id, files = store.files(repo, revision)
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        below = {name[len(prefix):]: blob for name, blob in files.items() if name.startswith(prefix)}
        if prefix and not below:
            raise HubError(404, f"{path} does not exist on {revision}", "EntryNotFound")
        recursive, expand = self.flag("recursive"), self.flag("expand")
        entries, folders = [], {}
        for relative, blob in sorted(below.items()):
            parts = relative.split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if recursive or depth == 1:
                    folders.setdefault(folder, []).append(blob)
            if recursive or len(parts) == 1:
                size = len(store.read_blob(repo, blob))
                entries.append({"type": "file", "oid": blob, "size": size, "path": prefix + relative})
        for folder, blobs in folders.items():
            tree_id = hashlib.sha1(" ".join(sorted(blobs)).encode()).hexdigest()
            entries.append({"type": "directory", "oid": tree_id, "size": 0, "path": prefix + folder})
        entries.sort(key=lambda entry: (entry["type"] != "directory", entry["path"]))
        if expand:
            last = store.last_commits(repo, commit_id)
            for entry in entries:
                commit = last[entry["path"]]
                entry["lastCommit"] = {"id": commit["id"], "title": commit["title"], "date": commit["date"]}
        return self.send_json(entries)

    def refs(self, repo):
        metadata = self.hub.readable_metadata(repo, self.headers)
        branches = [{"name": name, "ref": f"refs/heads/{name}", "targetCommit": commit}
                    for name, commit in sorted(metadata["branches"].items())]
        return self.send_json({"branches": branches, "converts": [], "tags": [], "pullRequests": []})

    def commits(self, repo, revision):
        self.hub.readable_metadata(repo, self.headers)
        return self.send_json([
            {"id": commit["id"], "title": commit["title"], "message": commit["message"], "date": commit["date"],
             "authors": [{"user": commit["author"]}]}
            for commit in self.hub.store.history(repo, revision)
        ])

    def model_info(self, repo, revision=DEFAULT_BRANCH):
        metadata = self.hub.readable_metadata(repo, self.headers)
        store = self.hub.store
        commit_id, files = store.files(repo, revision)
        commit = store.read_commit(repo, commit_id)
        siblings = []
        for path, blob in files.items():
            sibling = {"rfilename": path}
            if self.flag("blobs"):
                sibling.update(size=len(store.read_blob(repo, blob)), blobId=blob)
            siblings.append(sibling)
        return self.send_json({
            "_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo, "modelId": repo,
            "author": repo.split("/")[0], "sha": commit_id, "lastModified": commit["date"],
            "createdAt": metadata["createdAt"], "private": metadata["private"], "disabled": False, "gated": False,
            "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
        })

    def resolve(self, repo, revision, path):
        self.hub.readable_metadata(repo, self.headers)
        store = self.hub.store
        commit_id, files = store.files(repo, revision)
        if path not in files:
            error = HubError(404, f"Entry not found: {path} at {revision}", "EntryNotFound")
            error.headers["X-Repo-Commit"] = commit_id  # lets the client remember the absence for this commit
            raise error
        data = store.read_blob(repo, files[path])
        headers = {"ETag": f'"{files[path]}"', "X-Repo-Commit": commit_id, "Accept-Ranges": "bytes"}
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if ranged and self.command == "GET":  # a resumed download asks for the rest of the file
            start = int(ranged.group(1))
            end = int(ranged.group(2)) if ranged.group(2) else len(data) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return self.send_bytes(data[start:end + 1], 206, headers)
        return self.send_bytes(data, 200, headers)
