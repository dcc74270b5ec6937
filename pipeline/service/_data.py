"""Deterministic, on-demand data: every bot, user, server, webhook and stat record is a pure
function of ``(seed, index)`` and the timeline, so a directory of 100k bots costs nothing until
a record is asked for, and the same config always serves the same data.

Ids are Discord-style snowflakes: ``(milliseconds since 2015-01-01) << 22 | low 22 bits``. The low
bits carry the bot/user index (through a seeded bijection, ``Scrambler``) and bit 22 tells bots
(1) from users (0), so an id maps back to its index in O(1) and bot ids never collide with
user ids.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from random import Random
from typing import Any, NamedTuple

from ._events import QUIET, ROUTINE_RESTART, ROUTINE_SPIKE, Event, Routine, Scale, effect

DISCORD_EPOCH_MS = 1_420_070_400_000
LOW_BITS = 22
LOW_MASK = (1 << LOW_BITS) - 1
BOT_KIND = 1
USER_KIND = 0

LIBRARIES = ["discord.js", "discord.py", "JDA", "serenity", "Discord.Net", "discordgo", "Eris",
             "Discord4J", "DSharpPlus", "nextcord", "pycord", "hikari"]
LIBRARY_WEIGHTS = [35, 25, 8, 5, 5, 5, 4, 3, 3, 3, 2, 2]
TAGS = ["moderation", "music", "fun", "utility", "economy", "leveling", "games", "anime", "meme",
        "social", "logging", "roleplay", "stream", "ai", "tickets"]
TAG_PHRASES = {
    "moderation": "keeps your server safe with auto-mod, warnings and audit logs",
    "music": "plays high quality music with playlists, filters and a 24/7 mode",
    "fun": "brings memes, mini-games and silly commands to every channel",
    "utility": "handles reminders, polls, embeds and everything in between",
    "economy": "runs a full server economy with shops, jobs and daily rewards",
    "leveling": "rewards active members with XP, rank cards and level roles",
    "games": "hosts trivia, hangman and multiplayer games right in chat",
    "anime": "tracks airing anime, finds sauce and posts waifu pictures",
    "meme": "serves fresh memes from a dozen sources on demand",
    "social": "welcomes newcomers and helps members find each other",
    "logging": "logs every message edit, join, leave and role change",
    "roleplay": "powers character sheets, dice rolls and story channels",
    "stream": "announces Twitch and YouTube streams the moment they go live",
    "ai": "answers questions and summarises long threads with AI",
    "tickets": "runs a support ticket system with transcripts",
}
NAME_HEADS = ["Nova", "Pixel", "Echo", "Astro", "Mega", "Hyper", "Lunar", "Neon", "Shadow", "Frost",
              "Blaze", "Quantum", "Turbo", "Cosmo", "Zen", "Crimson", "Vortex", "Sonic", "Iron",
              "Atlas", "Rune", "Ember", "Orbit", "Koi", "Mochi", "Tango", "Vibe", "Drift", "Sage",
              "Byte"]
NAME_TAILS = ["Bot", "Beats", "Guard", "Mod", "Tunes", "Helper", "Quest", "Keeper", "Sentry", "Buddy",
              "Chef", "Radio", "Stats", "Games", "Mint", "Scout", "Forge", "Pal", "Wave", "Logger"]
PREFIXES = ["!", "?", ".", "$", "-", ">", "+", "t!", "m!", "%", ";", "/"]
PERMISSIONS = [0, 8, 3072, 274878024704, 1099511627775, 2147485696]
REGIONS = ["us-east", "us-west", "eu-central", "eu-west", "asia-south", "asia-east", "sa-east",
           "oceania"]
CUSTOM_FIELDS = ["region", "latency_ms", "premium_guilds", "voice_enabled"]
SHAPES = ["growing", "declining", "flat", "spiky"]
SHAPE_WEIGHTS = [30, 15, 35, 20]
# A growing bot keeps one pace, or bends: a third of them level off (a niche bot's guilds
# saturate: a logistic curve) and a third turn (growth, then decline). Their shape is then
# "saturating" or "turning".
CURVES = ("saturating", "turning")
CURVE_SHARE = 1 / 3  # of the growing bots, for each curve
USER_NOISE = 0.03  # one day's noise of users around guilds x users per guild (a standard deviation)
USER_WORDS = ["night", "pixel", "moon", "code", "tea", "fox", "river", "byte", "cloud", "star",
              "panda", "ghost", "maple", "echo", "comet", "lofi"]
BIOS = ["I build bots for fun.", "Full-stack dev, part-time bot wrangler.", "Rust and coffee.",
        "Making Discord a nicer place.", "Open source enjoyer.", None, None]
SERVER_TAGS = ["gaming", "community", "anime", "music", "education", "art", "tech", "memes"]
WEBHOOK_EVENTS = ["vote", "review", "stats.posted", "test"]
# How a malformed record is broken; documented in docs/service.md in this order.
MALFORMATIONS = ["missing_id", "missing_timestamp", "negative_users", "non_numeric_guilds",
                 "cpu_load_150", "memory_load_negative", "unparseable_timestamp"]
BAD_TIMESTAMPS = ["yesterday", "2024-02-30T25:61:00Z", "n/a"]
# Names a page must show as text (Faults.hostile_names). Each one that ran would mark the page
# (``data-pwned`` on <body>), so a test can tell; the last ones are template and ECharts rich-
# text syntax, which must come out as typed.
HOSTILE_NAMES = (
    """<img src=x onerror="document.body.dataset.pwned='img'">""",
    """</script><script>document.body.dataset.pwned='script'</script><!--""",
    """<svg onload="document.body.dataset.pwned='svg'"><circle r="9"/></svg>""",
    """{{constructor.constructor('document.body.dataset.pwned=1')()}} ${document.title} """
    """{a|Rich} {b} & "quoted" <b>bold</b>""",
)
HOSTILE_CUSTOM = {
    "latency_ms": """<img src=x onerror="document.body.dataset.pwned='custom'">latency""",
    "region": """</script><script>document.body.dataset.pwned='region'</script>""",
    "premium_guilds": """{{7*7}} ${7*7} {b|premium}""",
    "voice_enabled": """<svg onload="document.body.dataset.pwned='voice'">voice""",
}


def unit(seed: int, *key: object) -> float:
    """A uniform [0, 1) draw fixed by ``(seed, key)``: stable across runs and Python versions,
    and independent of every other draw (so switching a fault on never changes the data)."""
    digest = hashlib.blake2b(repr((seed, *key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class Scrambler:
    """A seeded bijection on ``bits``-bit integers (an odd multiplier plus an offset), so
    consecutive indices give unrelated-looking ids and credentials, and map back in O(1)."""

    def __init__(self, seed: int, kind: str, bits: int) -> None:
        self.modulus = 1 << bits
        self.multiplier = int(unit(seed, "mul", kind) * self.modulus) | 1
        self.inverse = pow(self.multiplier, -1, self.modulus)
        self.offset = int(unit(seed, "add", kind) * self.modulus)

    def encode(self, index: int) -> int:
        return (index * self.multiplier + self.offset) % self.modulus

    def decode(self, value: int) -> int:
        return ((value - self.offset) * self.inverse) % self.modulus


@lru_cache(maxsize=64)
def scrambler(seed: int, kind: str, bits: int) -> Scrambler:
    return Scrambler(seed, kind, bits)


def snowflake(created: datetime, low: int, kind: int) -> str:
    ms = max(0, int(created.timestamp() * 1000) - DISCORD_EPOCH_MS)
    return str((((ms & ~1) | kind) << LOW_BITS) | (low & LOW_MASK))


def snowflake_low(value: str, kind: int) -> int | None:
    """The low 22 bits of a snowflake of the given kind, or None if ``value`` is not one."""
    if not value.isdigit() or len(value) > 20 or (value[0] == "0" and value != "0"):
        return None
    number = int(value)
    if (number >> LOW_BITS) & 1 != kind:
        return None
    return number & LOW_MASK


def iso(dt: datetime, millis: bool = False) -> str:
    if millis:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def secret(seed: int, purpose: str, subject: str) -> str:
    """32 hex chars of HMAC(seed, purpose:subject): a credential nobody can guess without
    the seed, recomputed in O(1) instead of being stored per bot/user."""
    key = f"botstats-service:{seed}".encode()
    return hmac.new(key, f"{purpose}:{subject}".encode(), hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class Timeline:
    """The virtual clock's grid: slot k is at ``slot0 + k * interval``; slots 0..initial-1 are
    the history present at start, so slot ``initial - 1`` is the configured ``end``."""

    slot0: datetime
    interval: timedelta
    initial: int
    per_day: int
    _stamps: dict[int, str] = field(default_factory=dict, compare=False, repr=False)

    def time(self, slot: int) -> datetime:
        return self.slot0 + self.interval * slot

    def day(self, slot: int) -> int:
        """Days from the first slot's UTC day to slot's (planted events are set on UTC days)."""
        return (self.time(slot).date() - self.slot0.date()).days

    def stamp(self, slot: int) -> str:
        # Every bot shares the grid, so each slot is formatted once.
        cached = self._stamps.get(slot)
        if cached is None:
            cached = self._stamps[slot] = iso(self.time(slot))
        return cached


@dataclass(frozen=True)
class BotProfile:
    """Everything about one bot that does not change with the clock: the record's static
    fields and the parameters of its stat series."""

    index: int
    id: str
    record: dict[str, Any]
    first_slot: int
    shape: str
    level0: float  # guilds at first_slot before noise
    growth: float  # multiplier per interval
    noise_sd: float
    users_per_guild: float
    cpu_base: float
    mem_base: float
    cmd_rate: float  # commands per guild per day
    restart_p: float  # probability of a restart per interval
    spike_p: float  # probability that a day is a spike day (spiky bots only)
    custom_fields: tuple[str, ...]
    region0: int
    latency_base: float
    premium_frac: float
    voice: bool
    # Planted events (see _events): None keeps the series' own random spikes and restarts.
    events: tuple[Event, ...] | None = None
    custom_labels: dict[str, str] = field(default_factory=dict)  # field -> name served
    # The bot posts one record per shard (ServiceConfig.repeated_times): two records a slot.
    per_shard: bool = False
    # A saturating or turning bot's curve (see curve_level); () for the others.
    curve: tuple[float, ...] = ()

    def expected_guilds(self, slot: int, per_day: int) -> float:
        """Guilds at ``slot`` before noise and events: the curve, or the compound pace."""
        if self.curve:
            return curve_level(self.shape, self.curve, slot / per_day)
        return max(1.0, self.level0 * self.growth ** max(0, slot - self.first_slot))

    def scale(self, day: int, per_day: int) -> Scale:
        """Guilds, users and one day's noise of log users on UTC day ``day`` (for the floors
        of a planted event)."""
        guilds = self.expected_guilds(day * per_day, per_day)
        return Scale(guilds, guilds * self.users_per_guild,
                     math.sqrt(self.noise_sd ** 2 + USER_NOISE ** 2))


def curve_level(shape: str, curve: tuple[float, ...], t: float) -> float:
    """Guilds at ``t`` days after the timeline's first slot, before noise: a logistic curve
    ``K / (1 + exp(-r (t - middle)))`` (saturating), or in log space a hyperbola whose slope
    goes from ``+rise`` per day to ``-fall`` around ``peak_day``, over about ``width`` days
    (turning)."""
    if shape == "saturating":
        ceiling, rate, middle = curve
        return max(1.0, ceiling / (1.0 + math.exp(-rate * (t - middle))))
    top, rise, fall, peak_day, width = curve
    a, b = (rise - fall) / 2, (rise + fall) / 2
    x = t - peak_day
    return max(1.0, top * math.exp(a * x - b * (math.sqrt(x * x + width * width) - width)))


class History(NamedTuple):
    """The part of a bot's life present at start, in days since the timeline's first slot:
    from its first record (``first``) to the history's last slot (``end``)."""

    first: float
    end: float


def _curve(seed: int, index: int, shape: str, peak: float,
           history: History) -> tuple[float, ...]:
    """A bending curve's parameters over ``history``: a logistic one starts the history at
    3-30% of its ceiling and ends it at 50-99% (some have levelled off, some are bending, some
    have barely begun to); a turning one peaks in the last 70% of the history."""
    first, end = history
    span = max(end - first, 1.0)

    def draw(name: str) -> float:
        return unit(seed, "curve", name, index)

    def logit(share: float) -> float:
        return math.log(share / (1 - share))

    if shape == "saturating":
        start, reached = 0.03 + 0.27 * draw("start"), 0.5 + 0.49 * draw("reached")
        rate = (logit(reached) - logit(start)) / span
        return (peak, rate, end - logit(reached) / rate)
    return (peak, 0.005 + 0.025 * draw("rise"), 0.005 + 0.025 * draw("fall"),
            first + (0.3 + 0.7 * draw("peak")) * span, 3 + 9 * draw("width"))


def make_bot(seed: int, index: int, timeline: Timeline, owners: list[str],
             added_slot: int | None) -> BotProfile:
    """Bot ``index``. ``added_slot`` is set for bots inserted by churn: created just after that
    slot, so they have no records until the clock moves on."""
    rng = Random(f"{seed}:bot:{index}")
    interval_s = timeline.interval.total_seconds()
    if added_slot is not None:
        first_slot = added_slot + 1
        created = timeline.time(added_slot) + timedelta(seconds=rng.uniform(1, interval_s - 1))
    elif rng.random() < 0.10 and timeline.initial > 1:
        # Created mid-window: fewer records than the others.
        first_slot = rng.randint(1, timeline.initial - 1)
        created = timeline.time(first_slot) - timedelta(seconds=rng.uniform(60, interval_s))
    else:
        first_slot = 0
        created = timeline.slot0 - timedelta(days=rng.uniform(1, 5 * 365))
    created = created.replace(microsecond=0)
    bot_id = snowflake(created, scrambler(seed, "bot", LOW_BITS).encode(index), BOT_KIND)

    shape = rng.choices(SHAPES, SHAPE_WEIGHTS)[0]
    # Heavy tail: the median bot peaks near 100 guilds, a few at hundreds of thousands.
    peak = 10 * 10 ** (4.7 * rng.random() ** 2.2)
    per_day = timeline.per_day
    daily = {"growing": rng.uniform(0.001, 0.015), "declining": -rng.uniform(0.001, 0.01)}
    growth = (1 + daily.get(shape, 0.0)) ** (1 / per_day)
    # A growing bot peaks at the end of the initial window, the others at its first record.
    level0 = peak / growth ** max(0, timeline.initial - 1 - first_slot) if growth > 1 else peak
    curve: tuple[float, ...] = ()
    if shape == "growing" and (bend := unit(seed, "curve", index)) < len(CURVES) * CURVE_SHARE:
        # Drawn apart from the bot's random stream, so every other draw stays as it was.
        shape = CURVES[int(bend / CURVE_SHARE)]
        curve = _curve(seed, index, shape, peak,
                       History(first_slot / per_day, (timeline.initial - 1) / per_day))
        growth = 1.0
        level0 = curve_level(shape, curve, first_slot / per_day)
    noise_sd = rng.uniform(0.02, 0.06) if shape == "flat" else rng.uniform(0.003, 0.02)
    hot = rng.random() < 0.08
    cpu_base = rng.uniform(82, 95) if hot else rng.uniform(12, 65)
    mem_base = rng.uniform(83, 95) if hot else rng.uniform(15, 68)
    has_custom = rng.random() < 0.65
    custom_fields = tuple(f for f in CUSTOM_FIELDS if has_custom and rng.random() < 0.6)
    if has_custom and not custom_fields:
        custom_fields = (rng.choice(CUSTOM_FIELDS),)

    name = rng.choice(NAME_HEADS) + rng.choice(["", " "]) + rng.choice(NAME_TAILS)
    username = name.lower().replace(" ", "") + (str(rng.randint(1, 999)) if rng.random() < 0.3 else "")
    tags = rng.sample(TAGS, rng.randint(1, 4))
    library = rng.choices(LIBRARIES, LIBRARY_WEIGHTS)[0]
    # What the listing shows: the expected guilds at the end of the initial window, without
    # noise (a listing caches the figure; it is not recomputed from the series).
    listed = max(0, round(level0 * growth ** max(0, timeline.initial - 1 - first_slot)))
    if curve:
        listed = round(curve_level(shape, curve, (timeline.initial - 1) / per_day))
    if added_slot is not None:
        listed = round(level0)
    points = int(listed ** 0.6 * rng.uniform(0.5, 3.0))
    website = f"https://{username}.example.com" if rng.random() < 0.6 else None
    record: dict[str, Any] = {
        "id": bot_id,
        "name": name,
        "username": username,
        "prefix": rng.choice(PREFIXES),
        "short_description": f"{name} {TAG_PHRASES[tags[0]]}.",
        "library": library,
        "tags": tags,
        "owners": owners,
        "created_at": iso(created),
        "server_count": listed,
        "shard_count": listed // 1000 + 1,
        "points": points,
        "monthly_points": int(points * rng.uniform(0.01, 0.15)),
        "certified": listed > 5000 and rng.random() < 0.3,
        "invite": (f"https://discord.com/oauth2/authorize?client_id={bot_id}"
                   f"&scope=bot%20applications.commands&permissions={rng.choice(PERMISSIONS)}"),
        "website": website,
        "avatar": f"https://cdn.example.com/avatars/{bot_id}/{rng.getrandbits(128):032x}.png",
    }
    return BotProfile(
        index=index, id=bot_id, record=record, first_slot=first_slot, shape=shape,
        level0=level0, growth=growth, noise_sd=noise_sd,
        users_per_guild=rng.uniform(20, 200), cpu_base=cpu_base, mem_base=mem_base,
        cmd_rate=rng.uniform(0.5, 20), restart_p=1 / (rng.uniform(10, 60) * per_day),
        spike_p=rng.uniform(0.02, 0.06), custom_fields=custom_fields,
        region0=rng.randrange(len(REGIONS)), latency_base=rng.uniform(25, 250),
        premium_frac=rng.uniform(0.005, 0.05), voice=rng.random() < 0.5, curve=curve,
    )


def routine_spike(seed: int, bot: BotProfile, day: int) -> float:
    """A spiky bot's own spike on UTC day ``day`` beside planted events (1.0: none), drawn from
    the seed so the truth can list it; as often and as large as without events."""
    if bot.shape != "spiky" or unit(seed, "routine-spike", bot.index, day) >= bot.spike_p:
        return 1.0
    return 1.8 + 2.2 * unit(seed, "routine-spike-size", bot.index, day)


def routine_restart(seed: int, bot: BotProfile, slot: int) -> bool:
    """Whether the bot restarts at ``slot`` beside planted events (its counter starts over)."""
    return unit(seed, "routine-restart", bot.index, slot) < bot.restart_p


def routine_days(seed: int, bot: BotProfile, timeline: Timeline, last: int) -> tuple[Routine, ...]:
    """The routine spikes and restarts of the bot's slots up to ``last`` (a day each)."""
    out: list[Routine] = []
    first_day, last_day = timeline.day(bot.first_slot), timeline.day(last)
    if bot.shape == "spiky":
        out += [Routine(ROUTINE_SPIKE, day, factor) for day in range(first_day, last_day + 1)
                if (factor := routine_spike(seed, bot, day)) > 1.0]
    restarts = sorted({timeline.day(slot) for slot in range(bot.first_slot, last + 1)
                       if routine_restart(seed, bot, slot)})
    out += [Routine(ROUTINE_RESTART, day) for day in restarts]
    return tuple(sorted(out, key=lambda r: (r.day, r.kind)))


def _clamp_pct(value: float) -> int:
    return min(100, max(0, round(value)))


_TRI = 6 ** 0.5  # scales (u1 + u2 - 1) to unit standard deviation


def generate_series(seed: int, bot: BotProfile, timeline: Timeline,
                    last: int) -> list[tuple[int, dict[str, Any]]]:
    """The bot's generated records from its first slot up to ``last``, oldest first, each with
    its slot (an outage leaves slots without a record)."""
    return Series(seed, bot, timeline).until(last)


class Series:
    """A bot's generated records, in one forward pass with one RNG per bot that can stop and
    go on: a prefix never changes when ``last`` grows, so advancing the clock only appends, and
    a kept ``Series`` makes only the new records. Cost is O(records made), a few microseconds
    each (noise is triangular rather than Gaussian: same spread, a third of the cost)."""

    def __init__(self, seed: int, bot: BotProfile, timeline: Timeline) -> None:
        self.bot, self.timeline = bot, timeline
        self._seed = seed
        self._rng = Random(f"{seed}:series:{bot.index}")
        self._counter = int(bot.level0 * bot.cmd_rate * self._rng.uniform(5, 400))
        self._region = bot.region0
        self._spike = 1.0
        self._level = bot.level0
        self.next_slot = bot.first_slot  # the slot of the next record made

    def until(self, last: int) -> list[tuple[int, dict[str, Any]]]:
        """The records of slots ``next_slot``..``last``, oldest first, with their slots.

        With planted events (``bot.events`` not None), the random spikes and restarts of the
        series are drawn as without them but not applied (the noise stays the same): each day
        takes its events' :class:`~._events.DayEffect`, and the routine spikes and restarts
        (:func:`routine_spike`, :func:`routine_restart`) instead, which the truth lists."""
        bot, rng = self.bot, self._rng
        random, uniform = rng.random, rng.uniform
        per_day = self.timeline.per_day
        bot_id = bot.id
        stamp = self.timeline.stamp
        records: list[tuple[int, dict[str, Any]]] = []
        counter, region, spike, level = self._counter, self._region, self._spike, self._level
        events = bot.events
        labels = bot.custom_labels
        today = QUIET
        restarted = -1  # the day a planted restart was last applied
        growth = bot.growth
        guild_sd = bot.noise_sd * _TRI
        user_sd = 0.03 * _TRI
        spiky = bot.shape == "spiky"
        curve, shape = bot.curve, bot.shape
        commands_per_guild = bot.cmd_rate / per_day
        for slot in range(self.next_slot, last + 1):
            if spiky and (slot % per_day == 0 or slot == bot.first_slot):
                # Spikes last one calendar day of the grid.
                spike = uniform(1.8, 4.0) if random() < bot.spike_p else 1.0
            if events is not None:
                day = self.timeline.day(slot)
                spike = routine_spike(self._seed, bot, day) if spiky else 1.0
                today = effect(events, day) if events else QUIET
            if curve:
                level = curve_level(shape, curve, slot / per_day)
            guilds = max(0, round(level * (1 + (random() + random() - 1) * guild_sd) * spike
                                  * today.guilds))
            level = max(1.0, level * growth)
            # Users (and commands) follow guilds; an event moves them by its own factor.
            reach = guilds if today is QUIET else guilds / today.guilds * today.users
            users = max(0, round(reach * bot.users_per_guild * (1 + (random() + random() - 1) * user_sd)))
            if random() < bot.restart_p:
                small = rng.randint(0, 50)  # the bot restarted: its counter starts over
                jitter = None
            else:
                jitter = uniform(0.7, 1.3)
            if events is None:
                counter = small if jitter is None else counter + round(
                    guilds * commands_per_guild * jitter * spike)
            elif today.restart and restarted != day:
                counter, restarted = int(unit(self._seed, "restart", bot.index, slot) * 50), day
            elif routine_restart(self._seed, bot, slot):
                counter = int(unit(self._seed, "routine-restart-to", bot.index, slot) * 50)
            else:
                counter += round(reach * commands_per_guild * (jitter or 1.0))
            custom: list[dict[str, Any]] = []
            for name in bot.custom_fields:
                label = labels.get(name, name) if labels else name
                if name == "region":
                    if random() < 0.003:
                        region = rng.randrange(len(REGIONS))
                    custom.append({"name": label, "value": REGIONS[region]})
                elif name == "latency_ms":
                    latency = bot.latency_base * (1 + (random() + random() - 1) * 0.15 * _TRI)
                    custom.append({"name": label, "value": round(max(1.0, latency), 1)})
                elif name == "premium_guilds":
                    custom.append({"name": label, "value": round(guilds * bot.premium_frac)})
                else:
                    custom.append({"name": label, "value": bot.voice})
            record = {
                "id": f"{bot_id}-{slot}",
                "bot_id": bot_id,
                "timestamp": stamp(slot),
                "users": users,
                "guilds": guilds,
                "shards": guilds // 1000 + 1,
                "memory_load": _clamp_pct(bot.mem_base + (random() + random() - 1) * 3 * _TRI),
                "cpu_load": _clamp_pct(bot.cpu_base + (random() + random() - 1) * 6 * _TRI
                                       + (15 if spike > 1 else 0) + today.cpu),
                "commands_executed": counter,
                "custom": custom,
            }
            if today.silent:
                continue
            if bot.per_shard:
                records.extend((slot, shard) for shard in shard_records(record))
            else:
                records.append((slot, record))
        self._counter, self._region, self._spike, self._level = counter, region, spike, level
        self.next_slot = max(self.next_slot, last + 1)
        return records


def shard_records(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A generated record as a bot of two shards posts it, one record per shard at the same
    time: ``shard_id`` 0 and 1, the guilds, users and commands split between them (shard 0
    takes the odd one), the rest alike. Shard 1's id is shard 0's with ``-1`` after it."""
    first, second = record, {**record, "custom": [dict(item) for item in record["custom"]]}
    second["id"] = f"{record['id']}-1"
    for key in ("guilds", "users", "commands_executed"):
        second[key] = record[key] // 2
        first[key] = record[key] - second[key]
    first["shard_id"], second["shard_id"] = 0, 1
    return first, second


def malformation(seed: int, bot_index: int, slot: int, rate: float) -> str | None:
    """Which way record ``slot`` of the bot is broken, or None: fixed per record."""
    if rate <= 0 or unit(seed, "malformed", bot_index, slot) >= rate:
        return None
    return MALFORMATIONS[int(unit(seed, "malformed-kind", bot_index, slot) * len(MALFORMATIONS))]


def malform(record: dict[str, Any], kind: str, slot: int) -> None:
    if kind == "missing_id":
        del record["id"]
    elif kind == "missing_timestamp":
        del record["timestamp"]
    elif kind == "negative_users":
        record["users"] = -record["users"] - 1
    elif kind == "non_numeric_guilds":
        record["guilds"] = "lots"
    elif kind == "cpu_load_150":
        record["cpu_load"] = 150
    elif kind == "memory_load_negative":
        record["memory_load"] = -5
    else:
        record["timestamp"] = BAD_TIMESTAMPS[slot % len(BAD_TIMESTAMPS)]


@dataclass(frozen=True)
class UserProfile:
    index: int
    id: str
    record: dict[str, Any]  # without bot_ids, which change with churn


def make_user(seed: int, index: int, timeline: Timeline) -> UserProfile:
    rng = Random(f"{seed}:user:{index}")
    # Older than any bot that was not created during the window (those are 1 day-5 years old).
    created = (timeline.slot0 - timedelta(days=rng.uniform(5 * 365, 8 * 365))).replace(microsecond=0)
    user_id = snowflake(created, scrambler(seed, "user", LOW_BITS).encode(index), USER_KIND)
    username = rng.choice(USER_WORDS) + rng.choice(["", "_", "."]) + rng.choice(USER_WORDS)
    if rng.random() < 0.5:
        username += str(rng.randint(1, 9999))
    record = {
        "id": user_id,
        "username": username,
        "avatar": f"https://cdn.example.com/avatars/{user_id}/{rng.getrandbits(128):032x}.png",
        "bio": rng.choice(BIOS),
        "created_at": iso(created),
    }
    return UserProfile(index=index, id=user_id, record=record)


def _created_since(rng: Random, user: UserProfile, timeline: Timeline) -> datetime:
    """A moment between the user's creation and the start of the clock."""
    start = datetime.fromisoformat(user.record["created_at"])
    span = (timeline.time(timeline.initial - 1) - start).total_seconds()
    return (start + timedelta(seconds=rng.uniform(0, max(0.0, span)))).replace(microsecond=0)


def make_servers(seed: int, user: UserProfile, other_user_ids: list[str],
                 timeline: Timeline) -> list[dict[str, Any]]:
    """0-8 servers the user is in; some owned by the user, some by others."""
    rng = Random(f"{seed}:servers:{user.index}")
    servers = []
    for _ in range(rng.randint(0, 8)):
        created = _created_since(rng, user, timeline)
        owner = user.id if rng.random() < 0.5 or not other_user_ids else rng.choice(other_user_ids)
        servers.append({
            "id": snowflake(created, rng.getrandbits(LOW_BITS), USER_KIND),
            "name": f"{rng.choice(USER_WORDS).title()} {rng.choice(['Hangout', 'Lounge', 'Club', 'Den', 'Guild', 'HQ'])}",
            "member_count": int(2 * 10 ** (5 * rng.random() ** 2)),
            "owner_id": owner,
            "tags": rng.sample(SERVER_TAGS, rng.randint(0, 3)),
        })
    return servers


def make_webhooks(seed: int, user: UserProfile, bot_ids: list[str],
                  timeline: Timeline) -> list[dict[str, Any]]:
    """0-3 webhooks, each on one of ``bot_ids`` (none when the user has no bots)."""
    rng = Random(f"{seed}:webhooks:{user.index}")
    if not bot_ids:
        return []
    hooks = []
    for _ in range(rng.randint(0, 3)):
        created = _created_since(rng, user, timeline)
        hook_id = snowflake(created, rng.getrandbits(LOW_BITS), 0)
        hooks.append({
            "id": hook_id,
            "bot_id": rng.choice(bot_ids),
            "url": f"https://hooks.example.net/{user.id}/{hook_id}/{rng.getrandbits(64):016x}",
            "events": sorted(rng.sample(WEBHOOK_EVENTS, rng.randint(1, len(WEBHOOK_EVENTS)))),
            "created_at": iso(created),
        })
    return hooks

