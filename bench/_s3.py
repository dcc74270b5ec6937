"""moto's S3 server (the one the tests use) in its own process, counting the bytes uploaded to
it: what an archive whose data path is ``s3://`` costs a run in object storage.

    python bench/_s3.py --port P      # serve; GET /_uploaded answers the counts so far

Every PUT body (an object, or a part of a multipart upload) is counted as moto reads it, under
the object key's table (``<prefix>/main/<table>/...``; anything else under its first segments).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

COUNTS = "/_uploaded"


class _Counted:
    """A WSGI input stream that adds what is read from it to ``counts[key]``."""

    def __init__(self, stream: Any, counts: Counter[str], key: str, lock: threading.Lock) -> None:
        self.stream, self.counts, self.key, self.lock = stream, counts, key, lock

    def _add(self, data: bytes) -> bytes:
        with self.lock:
            self.counts[self.key] += len(data)
        return data

    def read(self, *args: Any) -> bytes:
        return self._add(self.stream.read(*args))

    def readline(self, *args: Any) -> bytes:
        return self._add(self.stream.readline(*args))

    def __iter__(self) -> Any:
        return (self._add(line) for line in self.stream)


def _table(path: str) -> str:
    """The table a key belongs to: the segment after ``main`` (DuckLake's schema folder)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if "main" in parts[:-1]:
        return parts[parts.index("main") + 1]
    return "/".join(parts[:2]) or "/"


def counting(app: Any) -> Any:
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == COUNTS:
            with lock:
                body = json.dumps(dict(counts)).encode()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if environ.get("REQUEST_METHOD") == "PUT":
            environ["wsgi.input"] = _Counted(environ["wsgi.input"], counts,
                                             _table(environ.get("PATH_INFO", "")), lock)
        return app(environ, start_response)

    return wrapped


def serve(host: str, port: int) -> None:
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, counting(app), threaded=True, request_handler=MotoRequestHandler)


class S3Server:
    """The counting server on a free loopback port, with bucket ``bucket``; closed after."""

    KEY_ID, SECRET, REGION = "AKIDBENCH", "bench-secret-0", "us-east-1"

    def __init__(self, log: Path, bucket: str = "lake") -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.bucket = bucket
        self.proc = subprocess.Popen([sys.executable, __file__, "--port", str(port)],
                                     stdout=log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.put(f"{self.endpoint}/{bucket}", timeout=2).status_code < 300:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise SystemExit(f"the S3 server did not start; see {log}")
            time.sleep(0.1)

    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.KEY_ID, "AWS_SECRET_ACCESS_KEY": self.SECRET}

    def settings(self, prefix: str) -> dict[str, str]:
        """[store] settings that put an archive's data files under ``s3://<bucket>/<prefix>/``."""
        return {"data_path": f"s3://{self.bucket}/{prefix}/", "s3_endpoint": self.endpoint,
                "s3_url_style": "path", "s3_region": self.REGION}

    def uploaded(self) -> dict[str, int]:
        """Bytes uploaded so far, by table."""
        return dict(httpx.get(f"{self.endpoint}{COUNTS}", timeout=30).json())

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    serve(args.host, args.port)
