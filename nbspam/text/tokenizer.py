"""Text to word tokens: Unicode normalisation, a `regex` word pattern, stop words, n-grams."""

from __future__ import annotations

import functools
import re
import unicodedata
import zlib
from itertools import filterfalse, islice, repeat
from operator import mod, mul, xor

from ..core.settings import TokenizerConfig, read_settings_file
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import regex

# Web and e-mail addresses, kept whole. They are looked for only in the few whitespace-separated
# chunks that contain "@", "://" or "www.", then blanked out before words are scanned.
# An e-mail address starts where a run of the characters of its local part starts (checked
# behind it) and takes whole runs (possessive ++): the plain [...]+@[...]+ was tried from every
# position of a run and read to the run's end each time, time quadratic in the run's length.
_ADDRESS = (
    r"""(?:https?|ftp)://[^\s<>"'`{}|\\^\[\]]+|www\.[^\s<>"'`{}|\\^\[\]]+"""
    r"|(?<![\p{L}\p{N}._%+\-])[\p{L}\p{N}._%+\-]++@[\p{L}\p{N}\-]++(?:\.[\p{L}\p{N}\-]++)+"
)
# A word: letters, marks and digits of any script, with inner ' - . _ joining parts ("don't",
# "e-mail", "3.5", "user_id"), and a currency sign kept in front ("$100").
_WORD = r"\p{Sc}?[\p{L}\p{M}\p{N}]+(?:['._\-][\p{L}\p{M}\p{N}]+)*"
# Chinese and Japanese are written without spaces: a word holding Han or kana is cut into its
# CJK runs (then into character pairs) and the words around them.
_CJK = r"[\p{Han}\p{Hiragana}\p{Katakana}]"
_CJK_SPLIT = r"""(?V1)(?P<cjk>[\p{Han}\p{Hiragana}\p{Katakana}]+)
    | \p{Sc}?[[\p{L}\p{M}\p{N}]--[\p{Han}\p{Hiragana}\p{Katakana}]]+
      (?:['._\-][[\p{L}\p{M}\p{N}]--[\p{Han}\p{Hiragana}\p{Katakana}]]+)*"""

# The same patterns restricted to ASCII, where \p{L} \p{M} \p{N} are [A-Za-z0-9], \p{Sc} is $
# and \s is [\t\n\v\f\r ]. Most mail is ASCII: the standard library's engine scans it about
# twice as fast, and a process that sees only ASCII never imports `regex`.
_ASCII_ADDRESS_RE = re.compile(
    r"""(?:https?|ftp)://[^\t\n\v\f\r <>"'`{}|\\^\[\]]+|www\.[^\t\n\v\f\r <>"'`{}|\\^\[\]]+"""
    r"|(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]++@[A-Za-z0-9\-]++(?:\.[A-Za-z0-9\-]++)+"
)
# The word pattern, \$?[A-Za-z0-9]+(?:['._\-][A-Za-z0-9]+)*, written to start with a character
# class ("$" only before a letter or digit, checked behind it): re then skips in C to where a
# word can start instead of trying the pattern at every position (12% fewer instructions).
_ASCII_WORD_RE = re.compile(
    r"[$A-Za-z0-9](?<=[A-Za-z0-9]|\$(?=[A-Za-z0-9]))[A-Za-z0-9]*(?:['._\-][A-Za-z0-9]+)*"
)
# The same words but those of one character, which the default minimum length of 2 drops:
# after the first character, more letters or digits, or a joined part. A word of one
# character ("a", "I", "5") then never becomes a string, and the words need no filter
# (5% of the words of mail, and the pass over all of them that dropped them).
_ASCII_WORD2_RE = re.compile(
    r"[$A-Za-z0-9](?<=[A-Za-z0-9]|\$(?=[A-Za-z0-9]))"
    r"(?:[A-Za-z0-9]+(?:['._\-][A-Za-z0-9]+)*|(?:['._\-][A-Za-z0-9]+)+)"
)
# The four characters `str.split` takes as blanks and a web address may hold (\s of the
# patterns above does not match them).
_ASCII_SEPARATORS = re.compile("[\x1c-\x1f]")
_BLANK = re.compile("[ \n\t\r]")  # what ends the chunk around an address
MAX_MARKS = 30  # combining marks in a row that normalising keeps (see `cut_mark_runs`)


class _Unicode:
    """The `regex` patterns, compiled on first use (importing regex costs a cold start)."""

    @functools.cached_property
    def word(self) -> regex.Pattern:
        return _compile(_WORD)

    @functools.cached_property
    def address(self) -> regex.Pattern:
        return _compile(_ADDRESS)

    @functools.cached_property
    def mark(self) -> regex.Pattern:
        return _compile(r"\p{M}")

    @functools.cached_property
    def mark_run(self) -> regex.Pattern:
        return _compile(rf"(\p{{M}}{{{MAX_MARKS}}})\p{{M}}+")  # sub by \1: the run's first marks

    @functools.cached_property
    def cjk(self) -> regex.Pattern:
        return _compile(_CJK)

    @functools.cached_property
    def cjk_split(self) -> regex.Pattern:
        return _compile(_CJK_SPLIT, verbose=True)


def _compile(pattern: str, *, verbose: bool = False) -> regex.Pattern:
    import regex

    return regex.compile(pattern, regex.VERBOSE if verbose else 0)


_UNICODE = _Unicode()
_URL_TRAILING = ".,;:!?)'\"*"


def normalize_text(text: str, config: TokenizerConfig) -> str:
    """NFKC-normalise and case-fold ``text`` as ``config`` asks (stop words go through this too).

    Runs of more than `MAX_MARKS` combining marks are cut first (see `cut_mark_runs`).
    """
    if config.normalize and not text.isascii():
        text = unicodedata.normalize("NFKC", cut_mark_runs(text)).replace("\u2019", "'")
    if config.casefold:
        text = text.casefold()
    return text


def cut_mark_runs(text: str) -> str:
    """``text`` with each run of more than `MAX_MARKS` combining marks cut to its first
    `MAX_MARKS`, and the halfwidth katakana sound marks U+FF9E, U+FF9F replaced by the marks
    NFKC makes of them (U+3099, U+309A), the only characters outside \\p{M} it turns into marks.

    NFKC sorts each run of marks into canonical order by insertion sort, in time quadratic in
    the run's length: 100,000 marks took 26 seconds. No script needs long runs; Unicode's
    Stream-Safe Text Format (UAX #15) bounds them to 30 too, by breaking a longer run with
    U+034F. Here the rest of the run is dropped, which keeps the text short as well: a word of
    Zalgo text is then one long word whatever its number of marks.
    """
    text = text.replace("\uff9e", "\u3099").replace("\uff9f", "\u309a")
    # Each run of more than MAX_MARKS marks holds a character of this sample, which is
    # read 31 times quicker than the text: most text has no mark in it, and no run.
    if not _UNICODE.mark.search(text[MAX_MARKS :: MAX_MARKS + 1]):
        return text
    return _UNICODE.mark_run.sub(r"\1", text)


def load_stop_words(spec: str, config: TokenizerConfig) -> tuple[str, ...]:
    """Resolve a stop-word choice to a sorted tuple of normalised words.

    ``spec`` is 'english' (the built-in list), 'none', or the path of a file with one word per
    line ('#' starts a comment), refused where others than its owner and root may write it
    (`settings.read_settings_file`): its words are left out of every score. Words are
    normalised exactly as text is, so they match tokens.
    """
    if spec == "none":
        return ()
    from pathlib import Path

    if spec == "english":  # read beside this module: importlib.resources costs 8 ms of imports
        text = (Path(__file__).parents[1] / "data" / "english_stop_words.txt").read_text("utf-8")
    else:
        try:
            text = read_settings_file(spec, "stop-word file")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read stop-word file {spec} ({exc}); give a file with one word per "
                "line, 'english' or 'none'"
            ) from None
    words = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(sorted({normalize_text(w, config) for w in words if w}))


class Tokenizer:
    """Turns text into tokens according to one `TokenizerConfig`; pure and deterministic."""

    def __init__(self, config: TokenizerConfig) -> None:
        self.config = config
        self._stop = frozenset(config.stop_words)
        # hashed word pairs of the text (0: none): a text's own only with word_pairs 'all';
        # `features.Analyzer` tokenizes the subject and headers as 'all' where they get theirs
        self._pairs = config.pair_buckets if config.word_pairs == "all" else 0
        # ASCII words: of at least two characters where no shorter one is kept
        self._ascii_words = (_ASCII_WORD2_RE if config.min_length >= 2 else _ASCII_WORD_RE).findall
        # What the ASCII scan then drops when no word is too long: the stop words (None:
        # with a minimum length above 2, each word is looked at)
        self._drop = self._stop if config.min_length <= 2 else None

    def words(self, text: str, *, in_order: bool = True) -> list[str]:
        """Tokens of ``text``: words and CJK bigrams, word n-grams, then web and e-mail
        addresses (kept whole, in no n-gram).

        Words shorter than ``min_length`` and stop words are dropped; words longer than
        ``max_length`` become a SpamBayes-style ``skip:<first letter> <length rounded down to
        10>`` token (or are dropped when ``long_words`` is 'drop'). ``in_order``: as `split`.
        """
        out, addresses = self.split(text, in_order=in_order)
        out.extend(addresses)
        return out

    def split(self, text: str, *, in_order: bool = True) -> tuple[list[str], list[str]]:
        """(words, CJK bigrams and n-grams; web and e-mail addresses) of ``text``, the two
        lists `words` joins, each in text order.

        With ``in_order`` False, for counting, a text that is partly ASCII may give the same
        tokens in another order, sooner: no word or address holds a blank, so the chunks
        between blanks are scanned in two groups, the ASCII ones by the quicker patterns.
        (Word n-grams need the order: with them, the text is scanned in order.)

        Only the first ``max_body_chars`` characters of the text are read, and of those only
        the first ``max_body_chars`` once normalised: NFKC makes up to 18 characters of one
        (U+FDFA) and case folding up to 3, and the tokens take time in proportion.
        """
        limit = self.config.max_body_chars
        text = normalize_text(text[:limit], self.config)[:limit]
        cfg = self.config
        if (
            in_order
            or text.isascii()
            or cfg.ngrams > 1
            or self._pairs
            or _ASCII_SEPARATORS.search(text)
        ):
            return self._split(text)
        chunks = text.split()
        out, addresses = self._split(" ".join(filter(str.isascii, chunks)))
        more, more_addresses = self._split(" ".join(filterfalse(str.isascii, chunks)))
        out.extend(more)
        addresses.extend(more_addresses)
        return out, addresses

    def _split(self, text: str) -> tuple[list[str], list[str]]:
        """`split` of normalised text, in text order."""
        cfg = self.config
        addresses: list[str] = []
        if "@" in text or "://" in text or "www." in text:
            text, addresses = _take_addresses(text)
        low, high, stop = cfg.min_length, cfg.max_length, self._stop
        if text.isascii():
            tokens = self._ascii_words(text)
            long = bool(tokens) and max(map(len, tokens)) > high
            if self._drop is not None and not long:  # no Python loop; the order kept
                if self._drop:
                    tokens = list(filterfalse(self._drop.__contains__, tokens))
                return self._joined(tokens), addresses
            if cfg.ngrams == 1 and not self._pairs:  # order does not matter
                out = [t for t in tokens if low <= len(t) <= high and t not in stop]
                if long and cfg.long_words == "skip":  # stop words give none, as in _special
                    out.extend(
                        f"skip:{t[0]} {len(t) // 10 * 10}"
                        for t in tokens
                        if len(t) > high and t not in stop
                    )
                return out, addresses
        else:
            tokens = _UNICODE.word.findall(text)
            if not _UNICODE.cjk.search(text) and max(map(len, tokens), default=0) <= high:
                # what the loop below keeps of a text without Han, kana or long words
                out = [t for t in tokens if len(t) >= low and t not in stop]
                return self._joined(out), addresses
        out = []
        for token in tokens:
            if low <= len(token) <= high and token.isascii():
                if token not in stop:
                    out.append(token)
            else:
                self._special(token, out)
        return self._joined(out), addresses

    def _joined(self, words: list[str]) -> list[str]:
        """``words`` with their word n-grams and hashed word pairs, as the config asks."""
        if self.config.ngrams > 1:
            words.extend(_ngrams(words, self.config.ngrams))
        if self._pairs:
            words.extend(pair_tokens(words, self._pairs))
        return words

    def _special(self, token: str, out: list[str]) -> None:
        """The rare words: with Han or kana (cut up), short, long or non-ASCII."""
        if not token.isascii() and _UNICODE.cjk.search(token):
            for match in _UNICODE.cjk_split.finditer(token):
                if match.lastgroup == "cjk":
                    out.extend(_bigrams(match.group()))
                else:
                    self._special(match.group(), out)
        elif len(token) < self.config.min_length or token in self._stop:
            pass
        elif len(token) > self.config.max_length:
            if self.config.long_words == "skip":
                out.append(f"skip:{token[0]} {len(token) // 10 * 10}")
        else:
            out.append(token)


def _take_addresses(text: str) -> tuple[str, list[str]]:
    """(text with its web and e-mail addresses blanked out, the addresses in text order).

    Only the chunks between the blanks " \\n\\t\\r" that hold an "@", "://" or "www." are
    searched. Each chunk's ends are looked for no further than the previous chunk and the
    next blank: a long text with many links takes time in proportion to its length.
    """
    spans = set()
    for mark in ("@", "://", "www."):
        end = 0  # a blank, or the start: no span of this mark starts before it
        at = text.find(mark)
        while at >= 0:
            start = 1 + max(
                text.rfind(" ", end, at),
                text.rfind("\n", end, at),
                text.rfind("\t", end, at),
                text.rfind("\r", end, at),
            )
            blank = _BLANK.search(text, at)
            end = blank.start() if blank else len(text)
            spans.add((start, end))
            at = text.find(mark, end)
    pattern = _ASCII_ADDRESS_RE if text.isascii() else _UNICODE.address
    pieces, found, done = [], [], 0
    for start, end in sorted(spans):
        for match in pattern.finditer(text, start, end):
            pieces.append(text[done : match.start()])
            found.append(match.group())
            done = match.end()
    pieces.append(text[done:])
    return " ".join(pieces), [
        raw.rstrip(".") if "@" in raw and "/" not in raw else raw.rstrip(_URL_TRAILING)
        for raw in found
    ]


def _bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run ('東京都' -> ['東京', '京都'])."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def pair_tokens(words: list[str], buckets: int) -> list[str]:
    """``pair:<n>`` for each two adjacent words (`skip:` tokens and n-grams left out), n a
    hash of the pair into ``buckets`` buckets, as CRM114 and rspamd hash their features:
    the vocabulary grows by at most ``buckets`` terms (per tag: ``subject:pair:<n>``),
    where pairs kept whole grew it fivefold. The hash (CRC-32 of each word, combined) is
    the same in every process and on every machine."""
    joined = "".join(words)  # most lists have neither: then no test of each word
    if " " in joined or "skip:" in joined:
        words = [w for w in words if not w.startswith("skip:") and " " not in w]
    codes = list(map(_word_code, words))
    # (a * 0x9E3779B1 ^ b) % buckets of each two in a row, by maps in C: twice as quick on
    # the few words of a header as a comprehension
    mixed = map(xor, map(mul, codes, repeat(0x9E3779B1)), islice(codes, 1, None))
    return list(map("pair:%d".__mod__, map(mod, mixed, repeat(buckets))))


def _word_code(word: str) -> int:
    # Not cached: an lru_cache of 65,536 words held 4.7 MB in each worker process after
    # 19,000 messages (24,000 words, 88% of the calls found) and made counting slower, not
    # quicker (the pairs' words are a subject's and headers' few; a CRC-32 is 0.13 us).
    return zlib.crc32(word.encode("utf-8", "surrogatepass"))


def _ngrams(tokens: list[str], n: int) -> list[str]:
    """Word n-grams of orders 2..n joined by one space (unigrams are already in ``tokens``)."""
    words = [t for t in tokens if not t.startswith("skip:")]
    return [" ".join(words[i : i + k]) for k in range(2, n + 1) for i in range(len(words) - k + 1)]
