"""The embedded service in its own process, for the benchmarks: started on a free port,
waited for until healthy, closed after."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent


class Service:
    """``python -m pipeline serve --port 0 <args>``; stderr goes to ``log``."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        cmd = [sys.executable, "-m", "pipeline", "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE,
                                     stderr=log.open("wb"), text=True)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()  # "botstats service listening on http://..."
        match = re.search(r"(http://\S+)", first)
        if not match:
            self.close()
            raise SystemExit(f"the service did not start: {first!r}; see {log}")
        self.base_url = match.group(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.base_url}/_admin/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"the service at {self.base_url} never became healthy")
            time.sleep(0.05)

    def cpu_seconds(self) -> float | None:
        """User + system CPU the service process has used so far (None off Linux)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        # utime and stime are fields 14 and 15 of the stat line (11 and 12 after the name).
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def health(self) -> dict[str, Any]:
        return httpx.get(f"{self.base_url}/_admin/health", timeout=10).json()

    def listing_requests(self) -> int:
        return int(self.health()["listing_requests"])

    def advance(self, intervals: int = 1) -> None:
        httpx.post(f"{self.base_url}/_admin/advance?intervals={intervals}",
                   timeout=60).raise_for_status()

    def warm(self) -> None:
        """Every bot's newest records made now (POST /_admin/warm): the service answers reads
        near the end of a list in O(new) from then on, as an indexed service would."""
        httpx.post(f"{self.base_url}/_admin/warm", timeout=3600).raise_for_status()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
