"""A local stand-in for the part of GitHub's REST API the preview comment uses: one pull request,
its issue comments (list with Link pagination, create, update, delete) and GitHub's own limits
(65,536 characters per body, 422 beyond). Used to replay .github/scripts/preview-comment.js
under Octokit; GitHub itself cannot run here."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import SERVER_POLL

BOT = {"login": "github-actions[bot]", "type": "Bot"}
MAX_BODY = 65_536


@dataclass
class Comment:
    id: int
    body: str
    user: dict[str, str]


@dataclass
class FakeGitHub:
    """One repository `owner/repo` with pull request `number` at `head_sha`."""

    owner: str = "acme"
    repo: str = "gpu-fleet"
    number: int = 7
    head_sha: str = "0" * 40
    base_sha: str = "b" * 40
    comments: list[Comment] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    _next: int = 1000

    def add(self, body: str, user: dict[str, str]) -> Comment:
        self._next += 1
        comment = Comment(self._next, body, user)
        self.comments.append(comment)
        return comment

    def start(self) -> str:
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _json(self, comment: Comment) -> dict[str, Any]:
        return {"id": comment.id, "body": comment.body, "user": comment.user}


class _Handler(BaseHTTPRequestHandler):
    """GitHub's answers for the FakeGitHub `fake` (a subclass per fake: `FakeGitHub.start`)."""

    fake: FakeGitHub

    def _send(self, status: int, payload: Any = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        return dict(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"))

    def _route(self, method: str) -> None:
        fake = self.fake
        url = urllib.parse.urlparse(self.path)
        fake.calls.append((method, url.path))
        if self.headers.get("Authorization") != "token test-token":
            return self._send(401, {"message": "Bad credentials"})
        base = f"/repos/{fake.owner}/{fake.repo}"
        if method == "GET" and url.path == f"{base}/pulls/{fake.number}":
            return self._send(200, {"number": fake.number, "head": {"sha": fake.head_sha},
                                    "base": {"sha": fake.base_sha}})
        if url.path == f"{base}/issues/{fake.number}/comments":
            if method == "GET":
                return self._list(url)
            if method == "POST":
                body = self._body()["body"]
                if len(body) > MAX_BODY:
                    return self._too_long()
                return self._send(201, fake._json(fake.add(body, BOT)))
        match = re.fullmatch(rf"{re.escape(base)}/issues/comments/(\d+)", url.path)
        if match:
            found = [c for c in fake.comments if c.id == int(match.group(1))]
            if not found:
                return self._send(404, {"message": "Not Found"})
            if method == "PATCH":
                body = self._body()["body"]
                if len(body) > MAX_BODY:
                    return self._too_long()
                if found[0].user != BOT:
                    return self._send(403, {"message": "Resource not accessible by integration"})
                found[0].body = body
                return self._send(200, fake._json(found[0]))
            if method == "DELETE":
                fake.comments.remove(found[0])
                return self._send(204)
        return self._send(404, {"message": f"no route {method} {url.path}"})

    def _too_long(self) -> None:
        self._send(422, {"message": "Validation Failed", "errors": [
            {"resource": "IssueComment", "code": "custom", "field": "body",
             "message": "body is too long (maximum is 65536 characters)"}]})

    def _list(self, url: urllib.parse.ParseResult) -> None:
        fake = self.fake
        query = urllib.parse.parse_qs(url.query)
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        items = fake.comments[(page - 1) * per_page: page * per_page]
        headers = {}
        if page * per_page < len(fake.comments):
            host = self.headers.get("Host")
            headers["Link"] = f'<http://{host}{url.path}?per_page={per_page}&page={page + 1}>; rel="next"'
        self._send(200, [fake._json(c) for c in items], headers)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")

    def log_message(self, *args: object) -> None:
        pass
