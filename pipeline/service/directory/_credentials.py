"""Credentials: user tokens and bot API keys, each carrying its (scrambled) index and an HMAC, so
finding whom one belongs to is O(1) and a forged one is refused."""

from __future__ import annotations

import hmac

from .._data import Scrambler, secret
from ._users import Users

USER_TOKEN_PREFIX = "utok_"
BOT_KEY_PREFIX = "bkey_"
_CREDENTIAL_LEN = 5 + 8 + 32  # prefix, scrambled index (hex), HMAC (hex)


class Credentials(Users):
    """Tokens and keys, and whom they belong to."""

    def _user_token(self, user: int) -> str:
        scrambled = self._tokens.encode(user)
        return f"{USER_TOKEN_PREFIX}{scrambled:08x}{secret(self._seed, 'user', self._user_profile(user).id)}"

    def _bot_key(self, index: int) -> str:
        scrambled = self._keys.encode(index)
        return f"{BOT_KEY_PREFIX}{scrambled:08x}{secret(self._seed, 'bot', self._profile(index).id)}"

    def user_for_token(self, token: str) -> int | None:
        """The user a token belongs to, or None. O(1): the token carries its user index."""
        index = _credential_index(token, USER_TOKEN_PREFIX, self._tokens)
        if index is None or index >= self._user_count:
            return None
        return index if hmac.compare_digest(token, self._user_token(index)) else None

    def bot_for_key(self, key: str) -> int | None:
        """The bot (live or removed) an API key belongs to, or None. O(1)."""
        index = _credential_index(key, BOT_KEY_PREFIX, self._keys)
        with self._lock:
            if index is None or index >= self._universe:
                return None
        return index if hmac.compare_digest(key, self._bot_key(index)) else None


def _credential_index(value: str, prefix: str, scrambler: Scrambler) -> int | None:
    """The index a token/key claims to be for; the caller still checks its HMAC."""
    if len(value) != _CREDENTIAL_LEN or not value.startswith(prefix):
        return None
    try:
        return scrambler.decode(int(value[len(prefix):len(prefix) + 8], 16))
    except ValueError:
        return None
