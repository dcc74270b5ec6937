"""`botstats cron`: the crontab line and the systemd service + timer that run `botstats run` on
[schedule].harvest, with absolute paths to this installation; and how to call this
installation's `botstats` at all."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..core import Settings, Shard, cron_trigger, next_fire_times, on_calendar, parse_crontab


def botstats_command(*, absolute: bool) -> str:
    """How to call this installation's botstats: the console script beside ``sys.executable``,
    else the one on PATH, else ``python -m pipeline``.

    ``absolute`` for a crontab or a unit file (absolute paths, this very interpreter);
    otherwise for a hint to a person: ``botstats`` when PATH finds this very script, else its
    path relative to the working directory.
    """
    script = Path(sys.executable).with_name("botstats")
    found = shutil.which("botstats")
    if script.exists():
        if absolute:
            return str(script.absolute())
        if found and Path(found).resolve() == script.resolve():
            return "botstats"
        try:
            return os.path.relpath(script)
        except ValueError:
            return str(script)
    if not absolute:
        return "python -m pipeline"
    if found:
        return str(Path(found).absolute())
    return f"{shlex.quote(str(Path(sys.executable).absolute()))} -m pipeline"


@dataclass(frozen=True)
class Installation:
    """Absolute paths of this installation, for the crontab line and the systemd units."""

    botstats: str  # the console script, or "python -m pipeline"
    config: str | None
    workdir: str
    log_file: str
    flags: tuple[str, ...] = ()  # --db/--base-url typed on this command line, passed on
    shard: Shard | None = None  # the worker of one shard (`botstats cron --shard K/N`)

    @property
    def unit(self) -> str:
        """The systemd units' name: botstats, or botstats-shard-K for a shard's worker."""
        return "botstats" if self.shard is None else f"botstats-shard-{self.shard.k}"

    @property
    def run_args(self) -> tuple[str, ...]:
        return ("run",) if self.shard is None else ("run", "--shard", str(self.shard))


def this_installation(settings: Settings, config_file: str | None,
                      flags: tuple[str, ...] = (), shard: Shard | None = None) -> Installation:
    """This venv's ``botstats`` (next to ``sys.executable``), the config in use, the cwd."""
    command = botstats_command(absolute=True)
    source = config_file or settings.source or None
    config = str(Path(source).absolute()) if source else None
    workdir = Path.cwd().absolute()
    name = "botstats.log" if shard is None else f"botstats-shard-{shard.k}.log"
    log_file = settings.log.file or str(settings.db_path.parent / name)
    return Installation(command, config, str(workdir), str((workdir / log_file).absolute()), flags,
                        shard)


def _command(inst: Installation, *args: str) -> str:
    words = [inst.botstats] if " -m " in inst.botstats else [shlex.quote(inst.botstats)]
    if inst.config:
        words += ["--config", shlex.quote(inst.config)]
    words += [shlex.quote(f) for f in inst.flags]
    return " ".join([*words, *args])


def crontab_text(settings: Settings, inst: Installation) -> str:
    expr = settings.schedule.harvest or "0 * * * *"
    parse_crontab(expr, where="[schedule].harvest")
    run = _command(inst, *inst.run_args)
    age = max_age_for(expr, settings.schedule.timezone, datetime.now(UTC))
    check = _command(inst, "status", "--max-age", age)
    workdir = shlex.quote(inst.workdir)
    what = "harvest" if inst.shard is None else f"harvest shard {inst.shard}"
    return "\n".join([
        f"# botstats: {what}, then trends, on [schedule].harvest. Install with `crontab -e`.",
        "# CRON_TZ is honoured by cronie (Fedora, RHEL, Arch); Debian's cron uses the system zone.",
        "# Exit codes: 0 complete, 3 partial, 1 failed, 4 interrupted, 75 another run active.",
        f"CRON_TZ={settings.schedule.timezone}",
        f"{expr} cd {workdir} && {run} >> {shlex.quote(inst.log_file)} 2>&1",
        "# Optional alert: prints (so cron mails it, with MAILTO set) only when no harvest has",
        f"# completed for twice the longest gap between runs ({age})"
        + (", on any shard (one machine is enough)." if inst.shard is not None else "."),
        f"# {expr} cd {workdir} && {check} > /dev/null",
        "",
    ])


def max_age_for(expr: str, timezone: str, now: datetime) -> str:
    """A `status --max-age` for a harvest on ``expr``: twice the longest gap between its runs
    over the next weeks (a weekday-only schedule has a weekend in it), in one unit."""
    fires = next_fire_times(cron_trigger(expr, timezone), 200, now)
    gaps = [b - a for a, b in zip(fires, fires[1:], strict=False)]
    minutes = math.ceil(2 * max(gaps, default=timedelta(hours=1)).total_seconds() / 60)
    for unit, size in (("d", 1440), ("h", 60)):
        if minutes % size == 0:
            return f"{minutes // size}{unit}"
    return f"{minutes}m"


def systemd_units(settings: Settings, inst: Installation) -> tuple[str, str]:
    """(botstats.service, botstats.timer) for `botstats run` on [schedule].harvest (named
    botstats-shard-K for a shard's worker)."""
    expr = settings.schedule.harvest or "0 * * * *"
    calendars = on_calendar(expr, settings.schedule.timezone, where="[schedule].harvest")
    service = "\n".join([
        "[Unit]",
        "Description=botstats: harvest the bot-listing service"
        + (f" (shard {inst.shard})" if inst.shard is not None else "") + ", then build trends",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=oneshot",
        f"WorkingDirectory={inst.workdir}",
        f"ExecStart={_command(inst, *inst.run_args)}",
        "# Secrets stay out of the unit: put BOTSTATS_USER_TOKEN=... in this file (mode 600).",
        f"EnvironmentFile=-{inst.workdir}/botstats.env",
        "# 3 = partial (retried next run), 75 = another run held the lock: not unit failures.",
        "SuccessExitStatus=3 75",
        "# SIGTERM: the harvest finishes its current batch and records the run as interrupted.",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=120",
        "",
    ])
    timer = "\n".join([
        "[Unit]",
        "Description=botstats: run on [schedule].harvest",
        "",
        "[Timer]",
        *(f"OnCalendar={c}" for c in calendars),
        "Persistent=true",
        *([f"RandomizedDelaySec={settings.schedule.jitter}"] if settings.schedule.jitter else []),
        f"Unit={inst.unit}.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
        "",
    ])
    return service, timer


def cron_text(settings: Settings, config_file: str | None, flags: tuple[str, ...] = (),
              shard: Shard | None = None) -> str:
    """Everything `botstats cron` prints; ``flags`` (e.g. ``--db /abs/x.duckdb``) are passed on;
    ``shard``: for the worker of that shard."""
    inst = this_installation(settings, config_file, flags, shard)
    service, timer = systemd_units(settings, inst)
    unit = inst.unit
    return "\n".join([
        "# --- crontab ---------------------------------------------------------------",
        crontab_text(settings, inst),
        f"# --- or systemd: /etc/systemd/system/{unit}.service ".ljust(78, "-"),
        service,
        f"# --- /etc/systemd/system/{unit}.timer ".ljust(78, "-"),
        timer,
        f"# then: systemctl daemon-reload && systemctl enable --now {unit}.timer",
        "",
    ])
