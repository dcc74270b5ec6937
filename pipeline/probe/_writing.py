"""The probe's proposals written into a config file, its comments and other settings kept (tomlkit)."""

from __future__ import annotations

from pathlib import Path

from ..core import BotstatsError, ConfigError, load_settings, replacing
from ._report import ProbeReport


def write_settings(report: ProbeReport, path: Path) -> list[str]:
    """Merge the decided proposals into the config file at ``path`` (created if missing),
    keeping its comments and everything else; returns the keys written. The result is checked
    as botstats reads it before it replaces the file."""
    import tomlkit

    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        doc = tomlkit.parse(text)
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise ConfigError(f"{path}: cannot read it to merge the probe's settings into: {exc}. "
                          f"Fix the file, or --write another one.") from exc
    written = []
    for proposal in report.proposals:
        if not proposal.decided:
            continue
        section, key = proposal.key.split(".", 1)
        if section not in doc:
            doc.add(section, tomlkit.table())
        doc[section][key] = proposal.value
        written.append(proposal.key)
    try:
        with replacing(path) as tmp:
            tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
            load_settings(tmp, env={})  # what botstats will read: refuse to write a broken file
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}.") from exc
    except BotstatsError as exc:
        raise ConfigError(f"the merged settings would not load ({exc}); {path} is left as "
                          f"it was.") from exc
    return written
