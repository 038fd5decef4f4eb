"""Who may call what: bearer tokens with scopes, per-token request rates, and the rule that decides whether
the application may start without tokens.

A token is a random string handed to a user once (``contrastext token``); the server keeps only its entry
``name:scope:sha256`` (the name is what logs and audit lines show; the hash is of the token). Scopes nest:
``read`` (embed, classify, cluster, topics, list and read classifiers) ⊂ ``train`` (create a classifier) ⊂
``admin`` (delete classifiers). A plain sha256 is enough because tokens are 256-bit random, not passwords: there
is nothing to guess from the hash, so a slow password hash would only add latency to every request.
"""


import hashlib
import hmac
import ipaddress
import logging
import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from contrastext.errors import InputError

log = logging.getLogger(__name__)

SCOPES = ("read", "train", "admin")  # each includes the ones before it
TOKEN_PREFIX = "ctx_"
_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}):(?P<scope>read|train|admin):"
                    r"(?:sha256:)?(?P<digest>[0-9a-f]{64})$")
_bearer = HTTPBearer(auto_error=False, description="a token from `contrastext token` (scope read, train or admin)")


class AuthConfigError(InputError):
    """The token settings are unusable, or the server would listen beyond loopback without tokens."""


@dataclass(frozen=True)
class Principal:
    """Who a request is from: the token's name and scope (``anonymous``/``admin`` when auth is off)."""

    name: str
    scope: str

    def allows(self, scope: str) -> bool:
        return SCOPES.index(self.scope) >= SCOPES.index(scope)


ANONYMOUS = Principal("anonymous", "admin")


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token(name: str, scope: str) -> tuple[str, str]:
    """A new random token and the entry (``name:scope:sha256``) that lets the server accept it."""
    entry = f"{name}:{scope}:{'0' * 64}"
    if not _ENTRY.match(entry):
        raise AuthConfigError(f"token name {name!r} must be letters, digits, '_', '.', '@', '-' (≤ 64 chars) and "
                              f"scope one of {', '.join(SCOPES)}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, f"{name}:{scope}:{token_digest(token)}"


def parse_entries(text: str, source: str) -> list[tuple[str, str, str]]:
    """``(name, scope, digest)`` of every entry in ``text`` (entries separated by newlines, commas or spaces;
    ``#`` starts a comment). A malformed entry is an error naming where it came from, never skipped."""
    entries, names = [], set()
    for number, line in enumerate(text.splitlines(), 1):
        for item in re.split(r"[,\s]+", line.split("#", 1)[0].strip()):
            if not item:
                continue
            match = _ENTRY.match(item)
            if match is None:  # never shown: it may be a token pasted where its entry belongs
                what = ("a token, not an entry: the server takes the entry line `contrastext token` prints"
                        if item.startswith(TOKEN_PREFIX) else
                        f"not a token entry name:scope:sha256 ({len(item)} characters; make one with "
                        "`contrastext token --name NAME --scope read|train|admin`)")
                raise AuthConfigError(f"{source}, line {number}: item {len(entries) + 1} is {what}")
            if match["name"] in names:
                raise AuthConfigError(f"{source}: the token name {match['name']!r} appears twice")
            names.add(match["name"])
            entries.append((match["name"], match["scope"], match["digest"]))
    return entries


def load_entries(tokens_env: str | None, tokens_file: str | None) -> list[tuple[str, str, str]]:
    """The entries of ``$tokens_env`` and of ``tokens_file`` (a mounted Secret or a file on the nodes)."""
    entries = []
    if tokens_env and os.environ.get(tokens_env, "").strip():
        entries += parse_entries(os.environ[tokens_env], f"${tokens_env}")
    if tokens_file:
        path = Path(tokens_file).expanduser()
        if not path.is_file():
            raise AuthConfigError(f"auth.tokens_file {tokens_file} is not a file")
        entries += parse_entries(path.read_text(encoding="utf-8"), str(path))
    names = [name for name, _, _ in entries]
    if len(names) != len(set(names)):
        raise AuthConfigError(f"a token name appears in both ${tokens_env} and {tokens_file}")
    return entries


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def settle(mode: str, entries: list, host: str | None) -> bool:
    """Whether requests need a token. ``host`` None: not known here (``serve deploy`` takes it from
    http_options), so taken as reachable from other machines. Raises where starting would be unsafe."""
    if mode == "none":
        log.warning("AUTH IS OFF (auth.mode: none): anyone who reaches %s can embed, train and delete "
                    "classifiers", host or "the server")
        return False
    if entries:
        return True
    if mode == "tokens":
        raise AuthConfigError("auth.mode is tokens but no token is configured: set auth.tokens_env "
                              "or auth.tokens_file (entries from `contrastext token`)")
    if is_loopback(host):
        log.warning("auth: no token configured, so requests need none; this server listens on %s only", host)
        return False
    where = f"on {host}" if host else "on the interfaces http_options names"
    raise AuthConfigError(f"refusing to serve {where} without tokens: set auth.tokens_env or "
                          "auth.tokens_file (entries from `contrastext token`), or auth.mode: none to "
                          "serve without authentication")


class TokenTable:
    """The accepted tokens' entries; ``find`` compares a presented token's hash with every entry."""

    def __init__(self, entries: list[tuple[str, str, str]]):
        self.entries = [(name, scope, bytes.fromhex(digest)) for name, scope, digest in entries]

    def find(self, token: str) -> Principal | None:
        presented = hashlib.sha256(token.encode("utf-8")).digest()
        found = None
        for name, scope, digest in self.entries:  # no early exit: every entry is compared
            if hmac.compare_digest(presented, digest):
                found = Principal(name, scope)
        return found


class RateLimiter:
    """A token bucket per principal (per ingress replica): ``rate`` requests/s on average, ``burst`` at once."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def wait_s(self, key: str) -> float:
        """0 when a request may pass now (and takes its place), else the seconds until one may."""
        now = time.monotonic()
        with self._lock:
            level, last = self._buckets.get(key, (float(self.burst), now))
            level = min(float(self.burst), level + (now - last) * self.rate)
            if level >= 1.0:
                self._buckets[key] = (level - 1.0, now)
                return 0.0
            self._buckets[key] = (level, now)
            return (1.0 - level) / self.rate


@dataclass
class Guard:
    """What an ingress replica checks: the token table (None: auth off) and the per-token request rate."""

    table: TokenTable | None
    limiter: RateLimiter | None

    @classmethod
    def build(cls, settings: Any, required: bool) -> "Guard":
        table = TokenTable(list(settings.entries)) if required else None
        limiter = (RateLimiter(settings.requests_per_s, settings.burst)
                   if required and settings.requests_per_s else None)
        return cls(table, limiter)

    def principal(self, credentials: HTTPAuthorizationCredentials | None, scope: str) -> Principal:
        if self.table is None:
            return ANONYMOUS
        challenge = f'Bearer realm="contrastext", scope="{scope}"'
        if credentials is None:
            raise HTTPException(401, f"this route needs a bearer token with scope {scope} "
                                     "(Authorization: Bearer <token>)", headers={"WWW-Authenticate": challenge})
        who = self.table.find(credentials.credentials)
        if who is None:
            raise HTTPException(401, "the bearer token is not valid",
                                headers={"WWW-Authenticate": challenge + ', error="invalid_token"'})
        if not who.allows(scope):
            raise HTTPException(403, f"token {who.name!r} has scope {who.scope}; this route needs scope {scope}",
                                headers={"WWW-Authenticate": challenge + ', error="insufficient_scope"'})
        if self.limiter is not None:
            wait = self.limiter.wait_s(who.name)
            if wait > 0:
                raise HTTPException(429, f"token {who.name!r} is over its {self.limiter.rate:g} requests/s; "
                                         f"try again in {wait:.2f} s", headers={"Retry-After": str(math.ceil(wait))})
        return who


def require(scope: str):
    """A FastAPI dependency: the request's ``Principal`` (also on ``request.state.principal``), or 401 / 403 /
    429 from the ingress replica's ``Guard`` (``request.app.state.guard``)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    async def dependency(request: Request,
                         credentials: HTTPAuthorizationCredentials | None = Security(_bearer)) -> Principal:
        guard: Guard = request.app.state.guard  # set by the ingress replica at start: no guard, no answer
        who = guard.principal(credentials, scope)
        request.state.principal = who
        return who

    dependency.__name__ = f"require_{scope}"
    return dependency
