"""Text to word tokens: Unicode normalisation, a `regex` word pattern, stop words, n-grams."""

from __future__ import annotations

import unicodedata
from importlib import resources
from pathlib import Path

import regex

from .config import TokenizerConfig
from .errors import ConfigError

# One pattern, tried left to right at each position:
#   url    a web address kept whole (trailing punctuation is trimmed afterwards)
#   email  an e-mail address kept whole
#   cjk    a run of Han or kana characters (scripts written without spaces: cut into bigrams)
#   word   letters, marks and digits of any script, with inner ' - . _ joining parts
#          ("don't", "e-mail", "3.5", "user_id"), and a currency sign kept in front ("$100")
_TOKEN_RE = regex.compile(
    r"""(?V1)
    (?:https?|ftp)://[^\s<>"'`{}|\\^\[\]]+|www\.[^\s<>"'`{}|\\^\[\]]+
    | [\p{L}\p{N}._%+\-]+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)+
    | [\p{Han}\p{Hiragana}\p{Katakana}]+
    | \p{Sc}?[[\p{L}\p{M}\p{N}]--[\p{Han}\p{Hiragana}\p{Katakana}]]+
        (?:['._\-][[\p{L}\p{M}\p{N}]--[\p{Han}\p{Hiragana}\p{Katakana}]]+)*
    """,
    regex.VERBOSE,
)
_CJK_RE = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")
_URL_TRAILING = ".,;:!?)'\"*"


def normalize_text(text: str, config: TokenizerConfig) -> str:
    """NFKC-normalise and case-fold ``text`` as ``config`` asks (stop words go through this too)."""
    if config.normalize and not text.isascii():
        text = unicodedata.normalize("NFKC", text).replace("\u2019", "'")
    if config.casefold:
        text = text.casefold()
    return text


def load_stop_words(spec: str, config: TokenizerConfig) -> tuple[str, ...]:
    """Resolve a stop-word choice to a sorted tuple of normalised words.

    ``spec`` is 'english' (the built-in list), 'none', or the path of a file with one word per
    line ('#' starts a comment). Words are normalised exactly as text is, so they match tokens.
    """
    if spec == "none":
        return ()
    if spec == "english":
        text = resources.files("nbspam").joinpath("data/english_stop_words.txt").read_text("utf-8")
    else:
        try:
            text = Path(spec).read_text(encoding="utf-8")
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

    def words(self, text: str) -> list[str]:
        """Tokens of ``text``: words, URLs, addresses, CJK bigrams, then word n-grams.

        Words shorter than ``min_length`` and stop words are dropped; words longer than
        ``max_length`` become a SpamBayes-style ``skip:<first letter> <length rounded down to
        10>`` token (or are dropped when ``long_words`` is 'drop').
        """
        cfg = self.config
        low, high, stop = cfg.min_length, cfg.max_length, self._stop
        out: list[str] = []
        for token in _TOKEN_RE.findall(normalize_text(text, cfg)):
            if low <= len(token) <= high and token.isascii():
                if token not in stop:
                    # only a URL can end in punctuation ("www.example.org.")
                    out.append(token.rstrip(_URL_TRAILING) if token[-1] in _URL_TRAILING else token)
            else:
                self._special(token, out)
        if cfg.ngrams > 1:
            out.extend(_ngrams(out, cfg.ngrams))
        return out

    def _special(self, token: str, out: list[str]) -> None:
        """The rare tokens: URLs and addresses (kept whole), CJK runs (bigrams), short, long
        and non-ASCII words."""
        if "://" in token or token.startswith("www."):
            out.append(token.rstrip(_URL_TRAILING))
        elif "@" in token:
            out.append(token.rstrip("."))
        elif _CJK_RE.match(token):
            out.extend(_bigrams(token))
        elif len(token) < self.config.min_length or token in self._stop:
            pass
        elif len(token) > self.config.max_length:
            if self.config.long_words == "skip":
                out.append(f"skip:{token[0]} {len(token) // 10 * 10}")
        else:
            out.append(token)


def _bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run ('東京都' -> ['東京', '京都'])."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _ngrams(tokens: list[str], n: int) -> list[str]:
    """Word n-grams of orders 2..n joined by one space (unigrams are already in ``tokens``)."""
    words = [t for t in tokens if not t.startswith("skip:")]
    return [" ".join(words[i : i + k]) for k in range(2, n + 1) for i in range(len(words) - k + 1)]
