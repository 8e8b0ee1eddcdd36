"""A message (raw mail bytes or plain text) to the list of tokens the model counts."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from itertools import chain, repeat

from ..core.settings import TokenizerConfig
from ..mail.mailparse import ParsedMail, decode_bytes, looks_like_mail, parse_mail
from .tokenizer import Tokenizer

ADDRESS_HEADERS = ("from", "reply-to", "to", "cc", "return-path")
# Header values whose tokens each Analyzer remembers, per kind: a mailbox repeats them
# (its owner's address, list headers, Received lines once their date and queue id are gone:
# 8,235 distinct in the 32,585 of the SpamAssassin corpus). Most repeats are near each
# other: over half of that corpus, 512 entries find 78% of the Received and list values
# again, 4,096 entries 80%; each entry holds some ten tokens. Longer values are not kept.
HEADER_CACHE = 512
CACHED_VALUE_LENGTH = 1000


class Analyzer:
    """Turns one message into tokens according to a `TokenizerConfig`.

    Mail (``mail`` 'always', or 'auto' and the bytes look like RFC 822) is parsed and gives
    body words plus tagged tokens: ``subject:<word>``, ``from:addr:<address>``,
    ``from:domain:<domain>``, ``from:<display-name word>`` (likewise to, cc, reply-to,
    return-path), ``url:<host>``, ``header:<name>`` for every header present,
    ``<name>:<word>`` for the values of ``value_headers`` (of Received, without its date
    and queue id; of Message-ID, its domain), ``attachment:<type>`` and
    ``attachment:.<ext>``. Headers matching ``ignore_headers`` give nothing. Anything else
    is plain text: its words.

    Hashed word pairs (``word_pairs``) are counted in the subject and the headers (tagged
    as they are: ``subject:pair:<n>``) unless it is 'none', and in the body and plain text
    (``pair:<n>``) only where it is 'all'.
    """

    def __init__(self, config: TokenizerConfig) -> None:
        self.config = config
        tokenizer = Tokenizer(config)  # the body's and plain text's pairs only with 'all'
        self.body_words = tokenizer.words
        self.body_split = tokenizer.split
        if config.word_pairs == "headers":  # the subject and headers with their pairs
            tokenizer = Tokenizer(config.replace(word_pairs="all"))
        self.words = tokenizer.words
        self.split = tokenizer.split
        self._ignored = functools.lru_cache(maxsize=4096)(glob_matcher(config.ignore_headers))
        self._value_headers = frozenset(config.value_headers)
        self._address = functools.lru_cache(maxsize=HEADER_CACHE)(self._address_tokens)
        self._value = functools.lru_cache(maxsize=HEADER_CACHE)(self._one_value_tokens)

    def tokens(self, data: bytes | str) -> list[str]:
        """All tokens of one message, in a deterministic order."""
        mode = self.config.mail
        if isinstance(data, str):
            if mode != "always":
                return self.text_tokens(data)
            data = data.encode("utf-8", "surrogateescape")
        if mode == "never" or (mode == "auto" and not looks_like_mail(data)):
            return self.text_tokens(data)
        return self.mail_tokens(parse_mail(data, max_body_chars=self.config.max_body_chars))

    def text_tokens(self, data: bytes | str) -> list[str]:
        """The words of plain text (bytes are decoded), of its first ``max_body_chars``
        characters as for a mail body; a longer text also gets ``nbspam:truncated``."""
        limit = self.config.max_body_chars
        if isinstance(data, bytes):
            # no character is longer than 4 bytes: this many bytes hold the first limit
            cut = len(data) > 4 * limit
            data = decode_bytes(data[: 4 * limit] if cut else data, complete=not cut)
        cut = len(data) > limit
        if cut:
            data = data[:limit]
        out = self.body_words(data, in_order=False)
        if self.config.number_tokens:
            out.extend(number_tokens(data))
        if cut:
            out.append("nbspam:truncated")
        return out

    def mail_tokens(self, mail: ParsedMail) -> list[str]:
        """Tokens of a parsed message: body words, then the tagged tokens."""
        cfg = self.config
        out, addresses = self.body_split(mail.body, in_order=False)
        out.extend(addresses)
        subject = self.words(mail.subject)
        out.extend(map("subject:".__add__, subject) if cfg.subject_tokens else subject)
        if cfg.url_tokens:
            urls = [a for a in addresses if "://" in a or a.startswith("www.")]
            out.extend(_host_tokens(urls + list(mail.links)))
        headers = [(n, v) for n, v in mail.headers if not self._ignored(n)]
        if cfg.address_tokens:
            for name, value in headers:
                if name in ADDRESS_HEADERS:
                    long = len(value) > CACHED_VALUE_LENGTH
                    out.extend((self._address_tokens if long else self._address)(name, value))
        if cfg.header_tokens:
            values: dict[str, list[str]] = {}
            for name, value in headers:
                out.append("header:" + name)
                if name in self._value_headers:
                    values.setdefault(name, []).append(value)
            for name, texts in values.items():
                out.extend(self._value_tokens(name, texts))
        if cfg.attachment_tokens:
            for ctype, ext in mail.attachments:
                out.append("attachment:" + ctype)
                if ext:
                    out.append("attachment:." + ext)
        if mail.truncated:
            out.append("nbspam:truncated")
        return out

    def _address_tokens(self, name: str, value: str) -> tuple[str, ...]:
        """``name:addr:<address>`` and ``name:domain:<domain>`` for each e-mail address in
        the value, ``name:<word>`` for the other words (display names, comments), or
        ``name:none`` if there is nothing.

        Where the value has addresses in angle brackets (``"Ann" <ann@example.com>``), only
        those are addresses: an address-like display name (``"paypal@paypal.com"
        <x@evil.example>``, a phisher's favourite) gives plain ``name:<word>`` tokens.
        """
        bracketed = _ANGLE_ADDRESS.findall(value)
        if not bracketed:
            words, addresses = self.split(value)
            return self._tagged(name, words, addresses) or (f"{name}:none",)
        words, shown = self.split(_ANGLE_ADDRESS.sub(" ", value))
        words.extend(shown)  # addresses in display names and comments count as words
        addresses = []
        for text in bracketed:
            text = text.strip()
            if "@" in text and len(text.split()) == 1:  # one word: no blank inside
                addresses.append(text)
            else:
                words.extend(self.words(text))
        return self._tagged(name, words, addresses) or (f"{name}:none",)

    @staticmethod
    def _tagged(name: str, words: list[str], addresses: list[str]) -> tuple[str, ...]:
        out = list(map(f"{name}:".__add__, words))
        for address in addresses:
            if "@" in address and "://" not in address:
                address = address.lower()
                out.append(f"{name}:addr:{address}")
                out.append(f"{name}:domain:{address.rpartition('@')[2]}")
            else:
                out.append(f"{name}:{address}")
        return tuple(out)

    def _value_tokens(self, name: str, values: list[str]) -> list[str]:
        """Tokens of the values of every header called ``name``.

        With word n-grams they are tokenized as one text; otherwise value by value, each
        remembered (the same tokens, in another order).
        """
        if name == "message-id":
            domains = (value.strip().strip("<>").rpartition("@")[2] for value in values)
            return [f"message-id:@{d.lower()}" if d else "message-id:none" for d in domains]
        if name == "received":  # hosts, addresses and software; the date and queue id are noise
            values = [_without_queue_id(value.rpartition(";")[0] or value) for value in values]
        elif name == "content-type":  # a MIME boundary is a one-off string, never seen again
            values = [_BOUNDARY.sub("", value) for value in values]
        if self.config.ngrams > 1:  # n-grams run on from one value to the next
            return list(map(f"{name}:".__add__, self.words("\n".join(values))))
        return list(chain.from_iterable(map(self._one_value, repeat(name), values)))

    def _one_value(self, name: str, value: str) -> tuple[str, ...]:
        if len(value) > CACHED_VALUE_LENGTH:
            return self._one_value_tokens(name, value)
        return self._value(name, value)

    def _one_value_tokens(self, name: str, value: str) -> tuple[str, ...]:
        return tuple(map(f"{name}:".__add__, self.words(value)))


_DIGIT_RUN = re.compile("[0-9]{3,}")
#: Runs of more digits than this share one token.
MAX_DIGITS = 12


def number_tokens(text: str) -> list[str]:
    """``digits:<n>`` for each run of n >= 3 ASCII digits in ``text`` (n at most
    `MAX_DIGITS`): the shape of a number, where the number itself (a short code, a phone
    number, a price) is too rare to learn. Plain text only: on the SMS corpus they take the
    Bernoulli model's (1-ROCA)% from 0.558 to 0.445, on mail (SpamAssassin, enron1) they
    change nothing measurable and cost 8% of the time of scoring it."""
    return [f"digits:{min(len(run), MAX_DIGITS)}" for run in _DIGIT_RUN.findall(text)]


def _host_tokens(urls: list[str]) -> list[str]:
    """``url:<host>`` and ``url:<last two labels>`` for each URL or www. address."""
    return list(chain.from_iterable(map(_url_host_tokens, urls)))


@functools.lru_cache(maxsize=1024)  # links repeat: footers, images, trackers
def _url_host_tokens(url: str) -> tuple[str, ...]:
    if url.startswith("www."):
        url = "http://" + url
    try:
        host = (_hostname(url) or "").rstrip(".")
    except ValueError:
        return ()
    if not host:
        return ()
    labels = host.split(".")
    if len(labels) > 2 and not host.replace(".", "").isdigit():
        return ("url:" + host, "url:" + ".".join(labels[-2:]))
    return ("url:" + host,)


# The boundary parameter of a Content-Type value, quoted or not.
_BOUNDARY = re.compile(r'(?i)\bboundary\s*=\s*(?:"[^"]*"?|[^\s;]*)')
# An address in angle brackets, as in "Ann Lee" <ann@example.com>.
_ANGLE_ADDRESS = re.compile(r"<([^<>]*)>")
_UNUSUAL_URL = re.compile(r"[\[\]%\t\r\n]")
_NETLOC_END = re.compile(r"[/?#]")


# The queue id of a Received header ("id 4F2A1B3C"), unique to one message: the word "id"
# after a blank or "(" (not the end of a host name such as mail.example.co.id). The plain
# pattern, (?<![^\s(])id\s+\S+ ignoring case, is written to start with a character class
# (the letters an ignore-case "i" matches): re then skips in C to a possible "i" instead of
# trying the look-behind at every position (2.5x quicker on Received values). The class of
# all four letters, two of them beyond Latin-1, takes re 0.5 ms to compile, 1.5% of the CPU of
# scoring one message; an ASCII value needs only "i" and "I", a class compiled in 0.04 ms,
# and the rare other value gets the whole pattern from re's cache of compiled patterns.
_RECEIVED_ID = re.compile(r"[iI](?<![^\s(][iI])[dD]\s+\S+")
_ANY_RECEIVED_ID = "[iI\u0130\u0131](?<![^\\s(][iI\u0130\u0131])[dD]\\s+\\S+"


def _without_queue_id(value: str) -> str:
    """A Received ``value`` with its queue ids (see `_RECEIVED_ID`) made a blank."""
    if value.isascii():
        return _RECEIVED_ID.sub(" ", value)
    return re.sub(_ANY_RECEIVED_ID, " ", value)


def glob_matcher(globs: Sequence[str]) -> Callable[[str], bool]:
    """A test of a name against shell-style ``globs`` that says what ``fnmatch.fnmatchcase``
    says of any of them: a glob without wildcards is looked up in a set, one whose only
    wildcard is a final ``*`` is a prefix for ``str.startswith``, and only the others are
    joined into one regular expression (``fnmatch.translate``). The 30 default ignored
    headers are all of the first two kinds; as one expression they took 0.8 ms to compile,
    2.5% of the CPU of scoring one message."""
    exact: set[str] = set()
    prefixes: list[str] = []
    rest: list[str] = []
    for glob in globs:
        if not _has_wildcard(glob):
            exact.add(glob)
        elif glob.endswith("*") and not _has_wildcard(glob[:-1]):
            prefixes.append(glob[:-1])
        else:
            rest.append(glob)
    starts = tuple(prefixes)
    if not rest:
        return lambda name: name in exact or name.startswith(starts)
    import fnmatch

    match = re.compile("|".join(map(fnmatch.translate, rest))).match
    return lambda name: name in exact or name.startswith(starts) or match(name) is not None


def _has_wildcard(glob: str) -> bool:
    return "*" in glob or "?" in glob or "[" in glob


def _hostname(url: str) -> str | None:
    """``urlsplit(url).hostname``, taken apart by hand for a plain ASCII http(s) URL (the
    common case, four times faster); raises ValueError where urlsplit does."""
    if not (url.startswith(("http://", "https://")) and url.isascii()) or _UNUSUAL_URL.search(url):
        from urllib.parse import urlsplit  # rarely needed: keep it off a cold start

        return urlsplit(url).hostname
    netloc = url[url.index("//") + 2 :]
    end = _NETLOC_END.search(netloc)
    if end:
        netloc = netloc[: end.start()]
    return netloc.rpartition("@")[2].partition(":")[0].lower() or None
