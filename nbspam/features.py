"""A message (raw mail bytes or plain text) to the list of tokens the model counts."""

from __future__ import annotations

import fnmatch
import functools
import re
from email.utils import getaddresses
from urllib.parse import urlsplit

from .config import TokenizerConfig
from .mailparse import ParsedMail, decode_bytes, looks_like_mail, parse_mail
from .tokenizer import Tokenizer

ADDRESS_HEADERS = ("from", "reply-to", "to", "cc", "return-path")


class Analyzer:
    """Turns one message into tokens according to a `TokenizerConfig`.

    Mail (``mail`` 'always', or 'auto' and the bytes look like RFC 822) is parsed and gives
    body words plus tagged tokens: ``subject:<word>``, ``from:addr:<address>``,
    ``from:domain:<domain>``, ``from:<display-name word>`` (likewise to, cc, reply-to,
    return-path), ``url:<host>``, ``header:<name>`` for every header present,
    ``<name>:<word>`` for the values of ``value_headers``, ``attachment:<type>`` and
    ``attachment:.<ext>``. Headers matching ``ignore_headers`` give nothing. Anything else
    is plain text: its words.
    """

    def __init__(self, config: TokenizerConfig) -> None:
        self.config = config
        self.words = Tokenizer(config).words
        patterns = "|".join(fnmatch.translate(h) for h in config.ignore_headers) or "(?!)"
        self._ignored = functools.lru_cache(maxsize=4096)(re.compile(patterns).match)
        self._value_headers = frozenset(config.value_headers)

    def tokens(self, data: bytes | str) -> list[str]:
        """All tokens of one message, in a deterministic order."""
        mode = self.config.mail
        if isinstance(data, str):
            if mode != "always":
                return self.words(data)
            data = data.encode("utf-8", "surrogateescape")
        if mode == "never" or (mode == "auto" and not looks_like_mail(data)):
            return self.words(decode_bytes(data))
        return self.mail_tokens(parse_mail(data, max_body_chars=self.config.max_body_chars))

    def mail_tokens(self, mail: ParsedMail) -> list[str]:
        """Tokens of a parsed message: body words, then the tagged tokens."""
        cfg = self.config
        out = self.words(mail.body)
        subject = self.words(mail.subject)
        out.extend(["subject:" + w for w in subject] if cfg.subject_tokens else subject)
        if cfg.url_tokens:
            urls = [t for t in out if "://" in t or t.startswith("www.")]
            out.extend(_host_tokens(urls + list(mail.links)))
        headers = [(n, v) for n, v in mail.headers if not self._ignored(n)]
        if cfg.address_tokens:
            for name, value in headers:
                if name in ADDRESS_HEADERS:
                    out.extend(self._address_tokens(name, value))
        if cfg.header_tokens:
            for name, value in headers:
                out.append("header:" + name)
                if name in self._value_headers:
                    out.extend(self._value_tokens(name, value))
        if cfg.attachment_tokens:
            for ctype, ext in mail.attachments:
                out.append("attachment:" + ctype)
                if ext:
                    out.append("attachment:." + ext)
        if mail.truncated:
            out.append("nbspam:truncated")
        return out

    def _address_tokens(self, name: str, value: str) -> list[str]:
        out = []
        for display, address in getaddresses([value]):
            address = address.strip("<> ").lower()
            if "@" in address:
                out.append(f"{name}:addr:{address}")
                out.append(f"{name}:domain:{address.rpartition('@')[2]}")
            elif address:
                display = f"{display} {address}"
            out.extend(f"{name}:{w}" for w in self.words(display))
        if not out:
            out.append(f"{name}:none")
        return out

    def _value_tokens(self, name: str, value: str) -> list[str]:
        if name == "message-id":
            domain = value.strip().strip("<>").rpartition("@")[2]
            return [f"message-id:@{domain.lower()}"] if domain else ["message-id:none"]
        return [f"{name}:{w}" for w in self.words(value)]


def _host_tokens(urls: list[str]) -> list[str]:
    """``url:<host>`` and ``url:<last two labels>`` for each URL or www. address."""
    out = []
    for url in urls:
        if url.startswith("www."):
            url = "http://" + url
        try:
            host = (urlsplit(url).hostname or "").rstrip(".")
        except ValueError:
            continue
        if not host:
            continue
        out.append("url:" + host)
        labels = host.split(".")
        if len(labels) > 2 and not host.replace(".", "").isdigit():
            out.append("url:" + ".".join(labels[-2:]))
    return out
