"""Settings as frozen values and their checks (the tokenizer's and the training's), built
from a flat mapping and a YAML file; `settings` resolves a run's settings from them."""

from __future__ import annotations

import math
import os

from ..errors import ConfigError
from .record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: a mail filter's cold start reads this
    from pathlib import Path
    from typing import Any, Literal

    EventModel = Literal["multinomial", "bernoulli", "fisher", "complement"]

EVENT_MODELS: tuple[str, ...] = ("multinomial", "bernoulli", "fisher", "complement")
#: --event-model auto: the event model and its settings chosen by internal cross-validation
#: (`selection`); a trained model always holds the event model chosen, never 'auto'.
AUTO = "auto"
#: The event model of auto where nothing is cross-validated to choose by: too few messages,
#: or a model fitted from counts alone (`model.fit`).
AUTO_FALLBACK = "multinomial"
#: A typed table's decision rule where the settings do not say (`table_training.table_rule`):
#: the cutoffs of least cost, a false positive costing as much as a false negative, and an
#: unsure verdict a third of either, so that a row is unsure only where its odds are below
#: 2 to 1 either way (Chow's rule). A target false-positive rate and 15 per false positive
#: are mail settings, where a lost ham is worse than a spam let through; a table's two
#: labels are nothing of the kind.
TABLE_RULE: dict[str, float | None] = {"target_fpr": None, "cost_fp": 1.0, "cost_unsure": 1 / 3}
MAIL_MODES: tuple[str, ...] = ("auto", "always", "never")
#: How --max-features picks its terms: most documents, or most mutual information.
SELECTIONS: tuple[str, ...] = ("frequency", "mi")
#: Which adjacent word pairs the tokenizer counts: none, those of the subject and headers,
#: or all (the body's and plain text's too).
WORD_PAIRS: tuple[str, ...] = ("none", "headers", "all")

#: Headers whose tokens are not counted by default. An upstream filter, the delivering
#: server or the way a corpus was collected may have added them, so their tokens can give
#: good results for bogus reasons (a spam folder whose every message carries X-Spam-Flag).
DEFAULT_IGNORE_HEADERS: tuple[str, ...] = (
    "x-spam-*",
    "x-bogosity",
    "x-spambayes-*",
    "x-crm114-*",
    "x-dspam-*",
    "x-virus-*",
    "x-nbspam-*",
    "x-amavis-*",
    "x-antivirus*",
    "x-filter*",
    "x-razor*",
    "x-pyzor*",
    "status",
    "x-status",
    "x-keywords",
    "x-uid",
    "x-imap*",
    "lines",
    "content-length",
    "delivered-to",
    "x-original-to",
    "envelope-to",
    "x-envelope-*",
    "x-loop",
    "x-beenthere",
    "x-mailman-version",
    "errors-to",
    "x-mozilla-status*",
    "x-evolution*",
    "x-gmail-labels",
)

#: Headers whose values are tokenized (prefixed with the header name) by default; every
#: other header not ignored contributes only a presence token ``header:<name>``.
DEFAULT_VALUE_HEADERS: tuple[str, ...] = (
    "x-mailer",
    "user-agent",
    "content-type",
    "content-transfer-encoding",
    "message-id",
    "received",
    "organization",
    "x-priority",
    "importance",
    "precedence",
    "mime-version",
    "list-id",
    "x-ms-has-attach",
)


class TokenizerConfig(Record):
    """How a message becomes tokens. Saved in the model so `predict` tokenizes as `train` did."""

    normalize: bool = True
    casefold: bool = True
    min_length: int = 2
    max_length: int = 30
    long_words: Literal["skip", "drop"] = "skip"
    stop_words: tuple[str, ...] = ()
    ngrams: int = 1
    # which adjacent word pairs are counted: none, those of the subject and headers, or all
    # (the body's and plain text's too), each hashed into pair_buckets buckets:
    # `tokenizer.pair_tokens`
    word_pairs: Literal["none", "headers", "all"] = "headers"
    pair_buckets: int = 1 << 20
    mail: Literal["auto", "always", "never"] = "auto"
    subject_tokens: bool = True
    address_tokens: bool = True
    url_tokens: bool = True
    header_tokens: bool = True
    attachment_tokens: bool = True
    number_tokens: bool = True  # plain text, not mail: `features.number_tokens`
    value_headers: tuple[str, ...] = DEFAULT_VALUE_HEADERS
    ignore_headers: tuple[str, ...] = DEFAULT_IGNORE_HEADERS
    max_body_chars: int = 200_000


class TrainConfig(Record):
    """How counts become a model. ``prior`` is 'fitted', 'uniform' or a label -> weight map.
    ``stop_words`` are the resolved stop words: the model leaves out every term made of one
    (an n-gram holding one), a column mask over counts that keep them."""

    event_model: EventModel | Literal["auto"] = AUTO
    alpha: float = 0.1
    prior: str | tuple[tuple[str, float], ...] = "fitted"
    min_count: int = 1
    max_df: float = 1.0
    max_features: int | None = None
    select: Literal["frequency", "mi"] = "frequency"
    binary: bool = True
    # complement naive Bayes: each class's weights divided by the sum of their sizes
    complement_norm: bool = False
    positive: str | None = None
    calibrate: bool = True
    folds: int = 5
    # the false-positive rate the spam cutoff is chosen to hold out of sample; None: the
    # cutoffs of least cost (cost_fp, cost_fn, cost_unsure); cost_fn and cost_unsure also
    # place the ham cutoff below a spam cutoff chosen for the target
    target_fpr: float | None = 0.001
    cost_fp: float = 15.0
    cost_fn: float = 1.0
    cost_unsure: float = 0.5
    cutoffs: tuple[float, float] | None = None
    # the fisher event model (Robinson's f(w) and Fisher's combining): bogofilter's x and
    # min_dev; its s is 0.0178, but 0.1 ranks better on all three development corpora
    strength: float = 0.1
    background: float = 0.52
    min_dev: float = 0.375
    stop_words: tuple[str, ...] = ()
    # whether the model scores with the word pairs the tokenizer counts (``pair:`` terms):
    # auto's "+ without word pairs" turns it off, a mask over the same counts (not a setting)
    score_pairs: bool = True


class Settings(Record):
    """Everything `train` needs; `stop_words` is the user's choice before it is resolved."""

    tokenizer: TokenizerConfig = TokenizerConfig()
    training: TrainConfig = TrainConfig()
    stop_words: str = "none"
    # the settings the user gave (a file or options), where a typed table's defaults differ
    given: frozenset[str] = frozenset()

    _uncompared = frozenset({"given"})


#: Upper bounds of settings whose cost grows with their value (n-grams of length n make
#: n - 1 more terms of each word), also what a model file may hold.
MAX_NGRAMS = 5
MAX_TOKEN_LENGTH = 10_000
MAX_FOLDS = 100
MAX_JOBS = 1024  # worker processes, all forked at once: more only fill the process table
MAX_LABELS = 1000  # the most labels a model holds
MAX_LABEL_CHARS = 1000  # the longest label
MAX_PAIRS = 1 << 24
# a table's --bins: uniform binning keeps bins - 1 edges of every continuous column whatever
# its values (10**6 bins of 40 rows: a 13 MB model in 10 s; 10**9 ran out of memory, 10**20
# was an internal error); quantile's are at most the column's distinct values
MAX_BINS = 1000
#: how a table's binned columns are cut (`text.tables`), here for the checks that must not
#: import numpy with that module (train forks its workers before numpy is imported)
BINNINGS = ("quantile", "uniform")
# alpha is added to every count and alpha times the number of terms (or categories) to each
# class's total: past this, that total overflows to infinity and every score is NaN (and a
# count is lost in the rounding of count + alpha long before)
MAX_ALPHA = 1e100
# value_headers and ignore_headers: the most names, and the longest (header names are short;
# each message's names are matched against every pattern of ignore_headers)
MAX_HEADER_NAMES = 200
MAX_HEADER_NAME_CHARS = 100

_TOKENIZER_KEYS = set(TokenizerConfig.fields()) - {"stop_words"}
_TRAIN_KEYS = set(TrainConfig.fields()) - {"stop_words", "score_pairs"}
KNOWN_KEYS: frozenset[str] = frozenset(_TOKENIZER_KEYS | _TRAIN_KEYS | {"stop_words"})
#: Settings of `filter`, not of training: one settings file serves both (train leaves them).
FILTER_KEYS: frozenset[str] = frozenset({"header_style"})
#: filter's header styles (`filtering.status_headers`): nbspam's own, SpamAssassin's,
#: bogofilter's.
HEADER_STYLES = ("nbspam", "spamassassin", "bogofilter")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML configuration file into a flat mapping of setting -> value.

    Keys are the command-line option names, in kebab-case or snake_case. A file others than
    its owner and root may write is refused (`trust.check_file`): its settings decide what
    a run does, the files it reads among them (``stop-words``).
    """
    import yaml

    try:
        text = read_settings_file(path, "config file")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise ConfigError(f"config file {path} is not valid YAML: {problem}{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of setting: value")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def read_settings_file(path: str | os.PathLike[str], what: str) -> str:
    """The text (UTF-8) of the file of settings at ``path``, after refusing one that others
    than its owner and root may write (`trust.check_file`, naming it ``what``): whoever may
    write it decides what the run does. OSError where it cannot be read; UnicodeDecodeError
    where it is not UTF-8."""
    from .trust import check_file

    with open(path, "rb") as f:
        check_file(os.fstat(f.fileno()), path, what, fd=f.fileno())
        return f.read().decode("utf-8")


def build_settings(values: dict[str, Any], *, source: str = "settings") -> Settings:
    """Validate a flat mapping of settings and build the frozen `Settings` value.

    Unknown keys, wrong types and out-of-range values raise `ConfigError` naming the key.
    """
    values = {key: v for key, v in values.items() if key not in FILTER_KEYS}
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        known = ", ".join(sorted(KNOWN_KEYS))
        raise ConfigError(f"unknown setting {unknown[0]!r} in {source}; known settings: {known}")
    checked = {key: _check(key, value) for key, value in values.items()}
    tok = {k: v for k, v in checked.items() if k in _TOKENIZER_KEYS}
    trn = {k: v for k, v in checked.items() if k in _TRAIN_KEYS}
    settings = Settings(
        tokenizer=TokenizerConfig(**tok), training=TrainConfig(**trn), given=frozenset(checked)
    )
    if "stop_words" in checked:
        settings = settings.replace(stop_words=checked["stop_words"])
    if settings.tokenizer.max_length < settings.tokenizer.min_length:
        raise ConfigError("max_length must be at least min_length")
    check_selection(settings.training)
    return settings


def header_style_from(path: str) -> str | None:
    """The header style the settings file at ``path`` gives `filter` (``header-style``), or
    None where it gives none. A key neither filter's nor train's is an error, as for train."""
    values = load_yaml(path)
    unknown = sorted(set(values) - KNOWN_KEYS - FILTER_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r} in {path}")
    style = values.get("header_style")
    if style is not None and style not in HEADER_STYLES:
        raise ConfigError(
            f"header-style in {path} must be one of {', '.join(HEADER_STYLES)}, not {style!r}"
        )
    return style


def check_selection(training: TrainConfig) -> None:
    """ConfigError where select mi has no max_features: it ranks, the number keeps."""
    if training.select == "mi" and training.max_features is None:
        raise ConfigError("setting select mi needs max_features, the number of terms to keep")


def _check(key: str, value: Any) -> Any:
    """Return ``value`` converted to the type of setting ``key``, or raise ConfigError."""
    ints = {  # the least and the greatest value (None: no bound)
        "min_length": (1, MAX_TOKEN_LENGTH),
        "max_length": (1, MAX_TOKEN_LENGTH),
        "ngrams": (1, MAX_NGRAMS),
        "pair_buckets": (1, MAX_PAIRS),
        "min_count": (1, None),
        "max_body_chars": (1, None),
        "folds": (2, MAX_FOLDS),
        "max_features": (1, None),
    }
    bools = {
        "normalize",
        "casefold",
        "subject_tokens",
        "address_tokens",
        "url_tokens",
        "header_tokens",
        "attachment_tokens",
        "number_tokens",
        "binary",
        "calibrate",
        "complement_norm",
        "score_pairs",
    }
    choices = {
        "event_model": (AUTO, *EVENT_MODELS),
        "select": SELECTIONS,
        "mail": MAIL_MODES,
        "long_words": ("skip", "drop"),
        "word_pairs": WORD_PAIRS,
    }
    if key in bools:
        if not isinstance(value, bool):
            raise ConfigError(f"setting {key} must be true or false, not {value!r}")
        return value
    if key in ints:
        if value is None and key == "max_features":
            return None
        low, high = ints[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"setting {key} must be a whole number >= {low}, not {value!r}")
        if high is not None and value > high:
            raise ConfigError(f"setting {key} must be at most {high}, not {value!r}")
        return value
    if key in choices:
        if value not in choices[key]:
            raise ConfigError(
                f"setting {key} must be one of {', '.join(choices[key])}, not {value!r}"
            )
        return value
    if key in ("alpha", "cost_fp", "cost_fn", "cost_unsure"):
        number = _number(key, value, low=0.0)
        if key == "alpha" and number > MAX_ALPHA:
            raise ConfigError(f"setting alpha must be at most {MAX_ALPHA:g}, not {value!r}")
        return number
    if key in ("strength", "background", "min_dev"):
        number = _number(key, value, low=0.0)
        low, high, what = {
            "strength": (0.0, math.inf, "a number > 0"),
            "background": (0.0, 1.0, "a probability in (0, 1)"),
            "min_dev": (-1.0, 0.5, "a number in [0, 0.5)"),
        }[key]
        if not low < number < high:
            raise ConfigError(f"setting {key} must be {what}, not {value!r}")
        return number
    if key == "target_fpr":
        if value is None or value == "none":
            return None
        number = _number(key, value, low=0.0)
        if not 0.0 <= number < 1.0:
            raise ConfigError(f"setting target_fpr must be a fraction in [0, 1), not {value!r}")
        return number
    if key == "cutoffs":
        return parse_cutoffs(value)
    if key == "max_df":
        number = _number(key, value, low=0.0)
        if not 0.0 < number <= 1.0:
            raise ConfigError(f"setting max_df must be a fraction in (0, 1], not {value!r}")
        return number
    if key == "prior":
        return parse_prior(value)
    if key in ("value_headers", "ignore_headers"):
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"setting {key} must be a list of header names")
        return _header_names(key, value)
    if key in ("stop_words", "positive"):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"setting {key} must be text, not {value!r}")
        return value if key == "positive" else (value or "none")
    raise AssertionError(key)  # every known key is handled above


def _header_names(key: str, names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The header names (or patterns) of setting ``key``, at most `MAX_HEADER_NAMES` of at
    most `MAX_HEADER_NAME_CHARS` characters. A model file carries them, and whoever wrote
    it decides them: every message's header names are matched against all the patterns of
    ignore_headers, joined into one regular expression that each process compiles, and
    400,000 patterns cost 18 seconds and 950 MB for every message scored."""
    if len(names) > MAX_HEADER_NAMES:
        raise ConfigError(
            f"setting {key} holds at most {MAX_HEADER_NAMES} header names, not {len(names):,}"
        )
    found = tuple(name.strip().lower() for name in names)
    if any(len(name) > MAX_HEADER_NAME_CHARS for name in found):
        raise ConfigError(
            f"setting {key} holds a name longer than {MAX_HEADER_NAME_CHARS} characters"
        )
    return found


def _number(key: str, value: Any, *, low: float) -> float:
    if isinstance(value, bool):  # float(True) is 1.0: ``alpha: yes`` is no number
        raise ConfigError(f"setting {key} must be a number, not {value!r}")
    if not isinstance(value, float):
        try:
            value = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"setting {key} must be a number, not {value!r}") from None
    if math.isnan(value) or (not math.isfinite(value) and low == 0.0) or value < low:
        raise ConfigError(f"setting {key} must be a finite number >= {low:g}, not {value!r}")
    return float(value)


def parse_prior(value: Any) -> str | tuple[tuple[str, float], ...]:
    """'fitted', 'uniform', a mapping label -> weight, or text 'spam=0.3,ham=0.7'."""
    if value in ("fitted", "uniform"):
        return value
    if isinstance(value, str):
        pairs = []
        for part in value.split(","):
            label, sep, weight = part.partition("=")
            if not sep:
                raise ConfigError(
                    f"prior must be fitted, uniform or LABEL=WEIGHT,... (for example "
                    f"spam=0.4,ham=0.6), not {value!r}"
                )
            pairs.append((label.strip(), weight.strip()))
        value = dict(pairs)
    if isinstance(value, dict) and value:
        prior = tuple(sorted((str(k), _number("prior", v, low=0.0)) for k, v in value.items()))
        if sum(w for _, w in prior) <= 0 or any(w == 0 for _, w in prior):
            raise ConfigError("an explicit prior needs a positive weight for every label")
        return prior
    raise ConfigError(f"prior must be fitted, uniform or a mapping label: weight, not {value!r}")


def parse_cutoffs(value: Any) -> tuple[float, float] | None:
    """None, or (ham_cutoff, spam_cutoff) on the log-odds from 'HAM,SPAM' or a pair."""
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, (list, tuple)) or len(parts) != 2:
        raise ConfigError(
            f"cutoffs must be two log-odds HAM,SPAM (for example -5,5), not {value!r}"
        )
    ham, spam = (_number("cutoffs", part, low=-math.inf) for part in parts)
    if ham > spam:
        raise ConfigError(f"the ham cutoff {ham:g} must not be above the spam cutoff {spam:g}")
    return ham, spam


def config_from_dict(cls: type, values: Any) -> Any:
    """A frozen config saved as JSON, back, each value checked as `build_settings` checks
    it: lists become tuples; unknown keys, wrong types and values out of range raise
    ConfigError."""
    if not isinstance(values, dict):
        raise ConfigError(f"settings must be a mapping, not {type(values).__name__}")
    if cls is TrainConfig and "model" in values and "event_model" not in values:
        # files and dumps written before the event model's one name saved it as "model"
        values = {("event_model" if key == "model" else key): v for key, v in values.items()}
    values = _before_word_pairs(cls, values)
    unknown = set(values) - set(cls.fields())
    if unknown:
        raise ConfigError(f"unknown setting {sorted(unknown)[0]!r}")
    config = cls(**{key: _saved(key, value) for key, value in values.items()})
    if getattr(config, "max_length", 1) < getattr(config, "min_length", 1):
        raise ConfigError("max_length must be at least min_length")
    if isinstance(config, TrainConfig):
        check_selection(config)
    return config


def _before_word_pairs(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """Saved settings of a file or dump written before ``word_pairs`` named which pairs
    are counted, as they read now: the tokenizer's ``pairs: N`` (N buckets, 0 none) counted
    every pair, or none; a file without it counted none (where the default is now
    otherwise), and the training's ``word_pairs`` true or false is ``score_pairs``."""
    if cls is TokenizerConfig and "word_pairs" not in values:
        values = dict(values)
        buckets = values.pop("pairs", 0)
        if buckets:
            values["word_pairs"], values["pair_buckets"] = "all", buckets
        else:
            values["word_pairs"] = "none"
    if cls is TrainConfig and isinstance(values.get("word_pairs"), bool):
        values = {("score_pairs" if k == "word_pairs" else k): v for k, v in values.items()}
    return values


def _saved(key: str, value: Any) -> Any:
    """A saved setting checked and converted: the resolved stop words are a list of words,
    an explicit prior a list of [label, weight] pairs."""
    if key == "stop_words":
        if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
            raise ConfigError("setting stop_words must be a list of words")
        return tuple(value)
    if key == "event_model" and value == AUTO:
        raise ConfigError("a trained model names the event model it uses, not 'auto'")
    if key == "prior" and isinstance(value, list):
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in value):
            raise ConfigError("setting prior must be a list of [label, weight] pairs")
        value = dict(value)
    return _check(key, value)
