"""Running the app: on a background thread (tests, demos) or blocking (``botstats serve``).

We bind the socket ourselves before uvicorn starts, so port 0 gives a known free port at
once and a busy port fails with a plain OSError in the caller, not a ``sys.exit`` inside
uvicorn.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from ._app import create_app
from ._config import ServiceConfig
from .directory._truth import Directory

STARTUP_TIMEOUT = 10.0
SHUTDOWN_TIMEOUT = 5.0
SHOWN_CREDENTIALS = 3
BACKLOG = 2048  # uvicorn's default


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY on accepted
    # connections only then, and without it every response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _http_protocol() -> str:
    """httptools (C) when installed: its HTTP parsing costs a fraction of h11's (pure Python),
    which matters when the service shares a machine with the client being measured."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


def _uvicorn_config(app: Any, access_log: bool, own_logging: bool) -> uvicorn.Config:
    kwargs: dict[str, Any] = {}
    if not own_logging:
        # Embedded in someone else's process (pytest, demo): leave its logging config alone.
        kwargs["log_config"] = None
    return uvicorn.Config(app, log_level="warning", access_log=access_log, lifespan="off",
                          loop="asyncio", http=_http_protocol(), timeout_graceful_shutdown=2,
                          **kwargs)


class RunningService:
    """A service answering on a background thread. Use as a context manager or call
    ``close()``; ``directory`` is the live ground truth."""

    # Set by the server's thread when uvicorn fails; read by __init__ while it waits.
    _failure: BaseException | None = None

    def __init__(self, config: ServiceConfig, host: str = "127.0.0.1", port: int = 0,
                 *, access_log: bool = False) -> None:
        self.config = config
        self.app = create_app(config)
        self.directory: Directory = self.app.state.directory
        sock = _bind(host, port)
        self.host = host
        self.port: int = sock.getsockname()[1]
        self.base_url = _base_url(host, self.port)
        self._server = uvicorn.Server(_uvicorn_config(self.app, access_log, own_logging=False))
        self._thread = threading.Thread(target=self._run, args=(sock,), daemon=True,
                                        name=f"botstats-service-{self.port}")
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                message = f"the service on {self.base_url} did not start"
                if self._failure is not None:
                    message += f": {self._failure!r}"
                raise RuntimeError(message) from self._failure
            time.sleep(0.002)

    def _run(self, sock: socket.socket) -> None:
        try:
            self._server.run(sockets=[sock])
        except BaseException as exc:  # reported by __init__; a thread cannot raise to it
            self._failure = exc
        finally:
            sock.close()

    def stop(self) -> None:
        """Ask the server to stop, and return at once: it closes its connections on its own
        thread (uvicorn takes 0.1-0.3 s). ``close()`` waits for it. Idempotent."""
        self._server.should_exit = True

    @property
    def running(self) -> bool:
        """Whether the server's thread is still there (until a stop has finished)."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop the server and wait for its thread. Idempotent."""
        self.stop()
        self._thread.join(SHUTDOWN_TIMEOUT)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(SHUTDOWN_TIMEOUT)

    def __enter__(self) -> RunningService:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RunningService {self.base_url} bots={self.config.bots} seed={self.config.seed}>"


def serve_in_thread(config: ServiceConfig, host: str = "127.0.0.1", port: int = 0) -> RunningService:
    """Start the service on a background thread; returns once it accepts connections.

    ``with serve_in_thread(cfg) as svc: ...`` stops it at the end of the block."""
    return RunningService(config, host, port)


def credentials(directory: Directory, base_url: str) -> dict[str, Any]:
    """Every user token and listed bot's API key. O(bots)."""
    return {"base_url": base_url, "seed": directory.config.seed,
            "user_tokens": directory.user_tokens(), "bot_keys": directory.bot_keys()}


def write_credentials(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    # Atomic: a demo polling for the file never reads half of it.
    os.replace(tmp, target)


def _banner(directory: Directory, base_url: str, credentials_file: str | None) -> str:
    cfg = directory.config
    faults = cfg.faults.active()
    tokens = list(directory.user_tokens().items())[:SHOWN_CREDENTIALS]
    bots = directory.bot_ids()[:SHOWN_CREDENTIALS]
    lines = [
        f"botstats service listening on {base_url}",
        f"  {len(directory)} bots, {cfg.user_count} users, seed {cfg.seed},"
        f" {cfg.history_days} days x {cfg.stats_per_day} stats/day, clock {directory.summary()['clock']}",
        "  faults: " + (", ".join(f"{k}={v}" for k, v in faults.items()) if faults else "none"),
        "user tokens (Authorization: Bearer <token>):",
        *(f"  {user_id}  {token}" for user_id, token in tokens),
        "bot API keys (Authorization: <key>, POST /bots/<id>/stats):",
        *(f"  {bot_id}  {directory.bot_key(bot_id)}" for bot_id in bots),
        (f"all credentials written to {credentials_file}" if credentials_file
         else "pass --credentials-file FILE to write all credentials as JSON"),
        "Ctrl+C to stop.",
    ]
    return "\n".join(lines)


def serve(config: ServiceConfig, host: str = "127.0.0.1", port: int = 8000,
          credentials_file: str | None = None, *, access_log: bool = False) -> None:
    """Run the service in the foreground until Ctrl+C / SIGTERM.

    Prints the base URL and a few credentials to stdout; writes all of them as JSON to
    ``credentials_file`` first, so a script that waits for the file can start at once.
    Raises OSError if the address cannot be bound."""
    app = create_app(config)
    directory: Directory = app.state.directory
    sock = _bind(host, port)
    # Listen before the banner: a client that connects as soon as it reads the URL waits in the
    # backlog until uvicorn accepts, instead of being refused while uvicorn is still starting.
    sock.listen(BACKLOG)
    base_url = _base_url(host, sock.getsockname()[1])
    try:
        if credentials_file:
            write_credentials(credentials_file, credentials(directory, base_url))
        print(_banner(directory, base_url, credentials_file), flush=True)
        uvicorn.Server(_uvicorn_config(app, access_log, own_logging=True)).run(sockets=[sock])
    finally:
        sock.close()
