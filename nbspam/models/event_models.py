"""The event models: how a model's counts become its scoring form, one small class each.

As scikit-learn's discrete naive Bayes classes share one skeleton and differ only in a few
pieces, a naive Bayes event model here supplies just two: whether a message's terms count
by presence, and the linear form J_c(x) = intercept_c + sum_a f(x_a) coef_ca of its joint
log-likelihood (`naive_bayes`, docs/math.md, "The linear form: weights and bias"); the shared `EventModel.form` makes the rest
(the log-odds of two classes). Robinson–Fisher combining is not linear, and supplies its
own form (`Fisher`). The vocabulary filters, the prior, cutoffs, calibration, learn and
forget are shared by all. A new event model is a new class here and its name in
`settings.EVENT_MODELS`; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:  # numpy is imported by the maths, not here: the one-message path reads this
    from typing import ClassVar, Protocol

    import numpy as np

    from ..core.settings import TrainConfig
    from .scoring_forms import FisherForm, LinearForm

    # a type only: Protocol is typing's, which the one-message path does not import
    class Counted(Protocol):
        """What an event model makes its scoring form from: a model's counts and settings
        (`model.Model` is one)."""

        labels: tuple[str, ...]
        terms: Sequence[str]
        class_count: np.ndarray
        term_count: np.ndarray
        doc_count: np.ndarray
        training: TrainConfig

        @property
        def is_binary(self) -> bool: ...

        @property
        def positive_index(self) -> int: ...


#: The terms whose temporaries an event model holds at a time, where it takes them a block
#: at a time (`Fisher`).
BLOCK = 1 << 15


class EventModel:
    """How one event model scores: ``name`` is the value of --event-model."""

    name: ClassVar[str]

    def presence(self, cfg: TrainConfig) -> bool:
        """Whether a term counts once per message (f(x) = [x > 0]) or every time (f(x) = x)."""
        raise NotImplementedError

    def linear(
        self, counts: KeptCounts, log_prior: np.ndarray, cfg: TrainConfig
    ) -> tuple[np.ndarray, np.ndarray]:
        """(coef (C, k), intercept (C,)) from the counts over the kept terms (k of them)."""
        raise NotImplementedError

    def form(
        self, model: Counted, kept: np.ndarray, memo: dict | None = None
    ) -> LinearForm | FisherForm:
        """The scoring form of ``model`` over its kept terms (columns ``kept`` of its
        vocabulary): here, a naive Bayes model's linear form, with the class prior, and for
        two classes the log-odds weights and bias. ``memo``, where given, keeps what the
        form derives from the model's counts alone, not from the columns kept, for the
        forms of other settings on the same counts (the candidates of auto on one fold):
        by name, (what it was made of, its array); made of None, an array of other counts
        to write into again."""
        from . import naive_bayes as nb
        from .scoring_forms import LinearForm

        cfg = model.training
        log_prior = nb.class_log_prior(model.class_count, nb.prior_weights(cfg.prior, model.labels))
        coef, intercept = self.linear(KeptCounts(model, kept), log_prior, cfg)
        positive = model.positive_index if model.is_binary else None
        weights = bias = None
        if positive is not None:
            weights, bias = nb.pair_weights(coef, intercept, positive, 1 - positive)
        presence = self.presence(cfg)
        return LinearForm(kept, model.terms, coef, intercept, presence, weights, bias, positive)


class KeptCounts:
    """A model's counts over its kept columns, as `ClassCounts` names them, each array of
    counts taken when read: an event model reads one of the two, and a copy of the other
    would be the size of the model's counts for nothing. The terms are not named (the
    linear forms read only the numbers)."""

    __slots__ = ("_model", "_kept")
    terms = ()

    def __init__(self, model: Counted, kept: np.ndarray) -> None:
        self._model, self._kept = model, kept

    @property
    def labels(self) -> tuple[str, ...]:
        return self._model.labels

    @property
    def class_count(self) -> np.ndarray:
        return self._model.class_count

    @property
    def term_count(self) -> np.ndarray:
        return self._model.term_count[:, self._kept]

    @property
    def doc_count(self) -> np.ndarray:
        return self._model.doc_count[:, self._kept]


class Multinomial(EventModel):
    """Words drawn from a class's distribution over the vocabulary, theta_ac smoothed by
    alpha; with ``binary`` each word counts once per message (docs/math.md, "Multinomial event model")."""

    name = "multinomial"

    def presence(self, cfg: TrainConfig) -> bool:
        return cfg.binary

    def linear(
        self, counts: KeptCounts, log_prior: np.ndarray, cfg: TrainConfig
    ) -> tuple[np.ndarray, np.ndarray]:
        from . import naive_bayes as nb

        return nb.multinomial_linear(self.occurrences(counts, cfg), log_prior, cfg.alpha)

    @staticmethod
    def occurrences(counts: KeptCounts, cfg: TrainConfig) -> np.ndarray:
        """(C, k): the messages holding each word (``binary``), else its occurrences."""
        return counts.doc_count if cfg.binary else counts.term_count


class Bernoulli(EventModel):
    """Each vocabulary word present or absent in a message, absent words counting too
    (through the intercept); theta_ac the smoothed share of class c's messages holding a."""

    name = "bernoulli"

    def presence(self, cfg: TrainConfig) -> bool:
        return True

    def linear(
        self, counts: KeptCounts, log_prior: np.ndarray, cfg: TrainConfig
    ) -> tuple[np.ndarray, np.ndarray]:
        from . import naive_bayes as nb

        return nb.bernoulli_linear(counts.doc_count, counts.class_count, log_prior, cfg.alpha)


class Complement(Multinomial):
    """Complement naive Bayes (Rennie et al. 2003): each class's weights estimated from the
    messages of all the other classes, from the multinomial model's counts (``binary``: each
    word once per message), with no prior; ``complement_norm`` divides each class's weights
    by the sum of their sizes (docs/math.md, "Complement naive Bayes"). Rennie's transforms of the counts (tf, idf, length)
    are left out, so that learn, forget and merge stay exact."""

    name = "complement"

    def linear(
        self, counts: KeptCounts, log_prior: np.ndarray, cfg: TrainConfig
    ) -> tuple[np.ndarray, np.ndarray]:
        from . import naive_bayes as nb

        occurrences = self.occurrences(counts, cfg)
        return nb.complement_linear(occurrences, cfg.alpha, norm=cfg.complement_norm)


class Fisher(EventModel):
    """Robinson's smoothed spam probability f(w) of each word from the document counts, and
    Fisher's chi-square combining of a message's clues (the words with |f - 1/2| >=
    min_dev), as bogofilter scores mail; two classes, presence only (docs/math.md, "Robinson–Fisher combining")."""

    name = "fisher"

    def presence(self, cfg: TrainConfig) -> bool:
        return True

    def form(self, model: Counted, kept: np.ndarray, memo: dict | None = None) -> FisherForm:
        """The clues among the kept terms, with ln f and ln(1 - f) of each; no prior. With a
        ``memo`` (`EventModel.form`), f of every term of the vocabulary is kept in it for
        the next forms of the same counts and the same strength and background (of the
        latest strength alone, written into the array of the one before), and the kept
        terms' taken from it: f of a term depends on its own counts alone, so the values
        are the same to the bit. The clues are found, and their logs taken, `BLOCK` terms
        at a time into the form's own arrays: no temporaries the size of the vocabulary."""
        import numpy as np

        from ..errors import TrainingError
        from .fisher import word_probabilities
        from .scoring_forms import FisherForm

        if not model.is_binary:
            raise TrainingError(f"the fisher event model needs two labels, not {len(model.labels)}")
        cfg = model.training
        known = dict(
            positive=model.positive_index, strength=cfg.strength, background=cfg.background
        )
        f = None  # without a memo, f of a block of the kept terms, made at each pass
        if memo is not None:  # f of every term, from the memo
            key = ("fisher", cfg.strength, cfg.background)
            held, f = memo.get("fisher", (None, None))
            if held != key:  # the latest strength's alone: one array the model's width
                size = model.doc_count.shape[1]
                out = f if f is not None and f.size == size else None
                f = word_probabilities(model.doc_count, model.class_count, out=out, **known)
                memo["fisher"] = key, f

        def kept_f(block: slice) -> np.ndarray:
            if f is None:
                return word_probabilities(
                    model.doc_count, model.class_count, columns=kept[block], **known
                )
            return f[kept[block]]

        blocks = [slice(start, start + BLOCK) for start in range(0, kept.size, BLOCK)]
        clues = np.empty(kept.size, bool)
        for block in blocks:
            clues[block] = np.abs(kept_f(block) - 0.5) >= cfg.min_dev
        n = int(np.count_nonzero(clues))
        columns, log_f, log_not_f = np.empty(n, kept.dtype), np.empty(n), np.empty(n)
        done = 0
        for block in blocks:
            chosen = clues[block]
            clue_f = kept_f(block)[chosen]
            end = done + clue_f.size
            columns[done:end] = kept[block][chosen]
            log_f[done:end], log_not_f[done:end] = np.log(clue_f), np.log1p(-clue_f)
            done = end
        return FisherForm(columns, model.terms, log_f, log_not_f, model.positive_index)


_BY_NAME: dict[str, EventModel] = {
    m.name: m for m in (Multinomial(), Bernoulli(), Fisher(), Complement())
}


def event_model(name: str) -> EventModel:
    """The event model of --event-model ``name`` (one of `settings.EVENT_MODELS`)."""
    return _BY_NAME[name]
