"""A Google Cloud Storage emulator on loopback, with a log of every request, for tests and
benchmarks of the ``gs://`` path (never a dependency of the product).

``GcsEmulator`` starts ``gcp-storage-emulator`` in a child process on a free port of 127.0.0.1 and
stops it on exit, always (context manager). ``env()`` is the environment a child process needs to
use the emulator through Beam's GCS filesystem and google-cloud-storage: it must be set before the
child imports Beam, so run bertprep as a subprocess with it. The test process itself talks to the
emulator over plain HTTP (``upload``, ``download_prefix``, ``list``), never through Beam.

Each request the emulator answers is appended to a log (method, path, bytes in, bytes out, time);
``requests()`` reads it back and ``mark()`` starts a new window, so a caller can attribute
requests to the stage that made them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

FAKE_CREDENTIALS = {
    "type": "authorized_user",
    "client_id": "emulator",
    "client_secret": "emulator",
    "refresh_token": "emulator",
    "token": "emulator",
    "expiry": "2099-01-01T00:00:00Z",
}


@dataclass(frozen=True)
class Request:
    """One HTTP request the emulator answered; sizes in bytes."""

    method: str
    path: str
    bytes_in: int
    bytes_out: int
    at: float = 0.0
    """When it was answered (seconds since the epoch)."""

    @property
    def operation(self) -> str:
        """The GCS operation, by URL shape: list, get, download, upload, copy, rewrite, compose,
        delete, batch, bucket or other."""
        path = self.path.split("?", 1)[0]
        query = self.path.split("?", 1)[1] if "?" in self.path else ""
        if path.startswith("/batch/"):
            return "batch"
        if path.startswith("/upload/"):
            return "upload"
        if path.startswith("/download/") or "alt=media" in query:
            return "download"
        for verb in ("copyTo", "rewriteTo", "compose"):
            if f"/{verb}" in path:
                return {"copyTo": "copy", "rewriteTo": "rewrite"}.get(verb, verb)
        if self.method == "DELETE":
            return "delete"
        if path.endswith("/o"):
            return "list"
        if "/o/" in path:
            return "get"
        if "/b" in path:
            return "bucket"
        return "other"


def summarize(requests: list[Request]) -> dict[str, object]:
    """Counts per operation, total requests and bytes in/out."""
    return {
        "requests": len(requests),
        "bytes_in": sum(r.bytes_in for r in requests),
        "bytes_out": sum(r.bytes_out for r in requests),
        "by_operation": dict(sorted(Counter(r.operation for r in requests).items())),
    }


class GcsEmulator:
    """A running emulator (child process) plus its request log, both under ``workdir``."""

    def __init__(self, workdir: Path, start_timeout_s: float = 60.0) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "requests.log"
        self.port_path = self.workdir / "port"
        self.credentials_path = self.workdir / "credentials.json"
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self._stderr = None
        self.port = 0
        self._mark = 0

    def __enter__(self) -> GcsEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.credentials_path.write_text(json.dumps(FAKE_CREDENTIALS))
        self.log_path.write_text("")
        self.port_path.unlink(missing_ok=True)
        self._stderr = open(self.workdir / "emulator.stderr", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.gcs_emulator", "serve", str(self.workdir)],
            cwd=Path(__file__).resolve().parents[1],
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
        deadline = time.monotonic() + self.start_timeout_s
        while not self.port_path.exists() or not self.port_path.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                err = (self.workdir / "emulator.stderr").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the GCS emulator did not start: {err}")
            time.sleep(0.05)
        self.port = int(self.port_path.read_text())

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        self._stderr.close()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment of a child process that uses this emulator (Beam and google-cloud)."""
        env = dict(os.environ)
        env.update(
            STORAGE_EMULATOR_HOST=self.endpoint,
            GOOGLE_APPLICATION_CREDENTIALS=str(self.credentials_path),
            NO_GCE_CHECK="true",
            GOOGLE_CLOUD_PROJECT="test-project",
        )
        return env

    def _call(
        self, method: str, path: str, data: bytes | None = None, content_type: str = ""
    ) -> bytes:
        request = urllib.request.Request(self.endpoint + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content_type or "application/octet-stream")
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read()

    def create_bucket(self, bucket: str) -> None:
        body = json.dumps({"name": bucket}).encode()
        self._call("POST", "/storage/v1/b?project=test-project", body, "application/json")

    def upload(self, local: Path, url: str) -> None:
        """Uploads one file (a multipart upload: the emulator drops empty media bodies)."""
        bucket, name = _split(url)
        boundary = "bertprep-upload-boundary"
        body = b"".join(
            [
                f"--{boundary}\r\nContent-Type: application/json\r\n\r\n".encode(),
                json.dumps({"name": name}).encode(),
                f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
                Path(local).read_bytes(),
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        query = urllib.parse.urlencode({"uploadType": "multipart"})
        self._call(
            "POST",
            f"/upload/storage/v1/b/{bucket}/o?{query}",
            body,
            f"multipart/related; boundary={boundary}",
        )

    def list(self, prefix_url: str) -> list[str]:
        """Every object name under ``gs://bucket/prefix`` (full gs:// URLs, sorted)."""
        bucket, prefix = _split(prefix_url)
        names: list[str] = []
        token = ""
        while True:
            query = {"prefix": prefix, **({"pageToken": token} if token else {})}
            page = json.loads(
                self._call("GET", f"/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}")
            )
            names += [item["name"] for item in page.get("items", [])]
            token = page.get("nextPageToken", "")
            if not token:
                return sorted(f"gs://{bucket}/{n}" for n in names)

    def read(self, url: str) -> bytes:
        bucket, name = _split(url)
        quoted = urllib.parse.quote(name, safe="")
        return self._call("GET", f"/storage/v1/b/{bucket}/o/{quoted}?alt=media")

    def download_prefix(self, prefix_url: str, local: Path) -> list[Path]:
        """Copies every object under the prefix to ``local`` (keeping relative paths)."""
        out = []
        for url in self.list(prefix_url):
            target = Path(local) / url[len(prefix_url) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read(url))
            out.append(target)
        return out

    def mark(self) -> None:
        """Starts a new window of the request log: ``requests()`` returns what came after."""
        self._mark = self.log_path.stat().st_size

    def requests(self) -> list[Request]:
        with open(self.log_path, "rb") as f:
            f.seek(self._mark)
            lines = f.read().decode("utf-8").splitlines()
        out = []
        for line in lines:
            method, path, bytes_in, bytes_out, at = line.split("\t")
            out.append(Request(method, path, int(bytes_in), int(bytes_out), float(at)))
        return out


def _split(url: str) -> tuple[str, str]:
    if not url.startswith("gs://"):
        raise ValueError(f"not a gs:// URL: {url}")
    bucket, _, name = url[len("gs://") :].partition("/")
    return bucket, name


def serve(workdir: Path) -> None:
    """Runs the emulator on a free loopback port, logging every request; writes the port file."""
    import logging
    import threading

    from gcp_storage_emulator import server

    logging.getLogger("gcp_storage_emulator").setLevel(logging.ERROR)
    log = open(workdir / "requests.log", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    lock = threading.Lock()
    original_close = server.Response.close

    def close_and_log(response: server.Response) -> None:
        handler = response._handler
        content = response._content
        size = len(content.encode("utf-8") if isinstance(content, str) else content or b"")
        original_close(response)
        bytes_in = int(handler.headers.get("Content-Length") or 0)
        path = handler.path.replace("\t", " ")
        with lock:
            log.write(f"{handler.command}\t{path}\t{bytes_in}\t{size}\t{time.time():.3f}\n")

    server.Response.close = close_and_log
    emulator = server.create_server("127.0.0.1", 0, in_memory=True)
    emulator.start()
    port = emulator._api._httpd.server_address[1]
    (workdir / "port.tmp").write_text(str(port))
    os.replace(workdir / "port.tmp", workdir / "port")
    try:
        while True:
            time.sleep(3600)
    finally:
        emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="run the emulator (used by GcsEmulator)")
    serve_parser.add_argument("workdir", type=Path)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.workdir)


if __name__ == "__main__":
    main()
