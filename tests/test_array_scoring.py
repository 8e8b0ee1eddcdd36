"""The one-message scorer gives what the batch scorer gives, without numpy or scipy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nbspam.core.settings import build_settings
from nbspam.mail.message import Message, Problems
from nbspam.mail.messages import read_messages
from nbspam.models.explain import explain_message
from nbspam.models.model import fit_messages, score
from nbspam.service import array_scoring
from nbspam.service.array_scoring import ArrayScorer, load_array_scorer
from nbspam.store.modelfile import load_model, save_model
from nbspam.text.features import Analyzer

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(
    scope="module",
    params=[
        "multinomial",
        "bernoulli",
        "three-class",
        "fisher",
        "complement",
        "three-class complement",
    ],
)
def saved(request, tmp_path_factory, sample_messages, sample_model_path):
    if request.param == "multinomial":  # as `nbspam train` writes it, with a calibration
        return load_model(sample_model_path), sample_model_path
    messages = sample_messages
    if request.param.startswith("three-class"):
        messages = [
            m if i % 3 else m.__class__(m.id, m.data, "other") for i, m in enumerate(messages)
        ]
        model = request.param.partition(" ")[2] or "multinomial"
        settings = build_settings({"min_count": 2, "event_model": model})
    elif request.param == "complement":  # on counts, normalised: the table holds its weights
        settings = build_settings(
            {
                "event_model": "complement",
                "binary": False,
                "complement_norm": True,
                "cutoffs": "-5,5",
            }
        )
    else:
        settings = build_settings({"event_model": request.param, "cutoffs": "-5,5"})
    model = fit_messages(messages, settings)
    path = tmp_path_factory.mktemp("quick") / "m.nbm"
    save_model(model, path)
    return model, path


def test_quick_equals_batch(saved):
    model, path = saved
    scorer = load_array_scorer(path)
    messages = list(read_messages([str(SAMPLE)], Problems()))
    assert len(messages) > 60
    for batch in score(model, messages):
        one = scorer.predict(batch.id, next(m.data for m in messages if m.id == batch.id))
        assert one.log_odds == batch.log_odds  # the same sums in the same order: bit for bit
        assert one.label == batch.label and one.verdict == batch.verdict
        assert (one.calibrated is None) == (batch.calibrated is None)
        assert one.calibrated == batch.calibrated
        _assert_same_probabilities(one, batch)


def test_the_scorer_of_an_in_memory_model_equals_the_files_table(saved):
    """`ArrayScorer.of_model` (serve's scorer of a model with journal or layer records)
    gives the log-odds of the file's scoring table, bit for bit, for every event model."""
    model, path = saved
    from_file, in_memory = load_array_scorer(path), ArrayScorer.of_model(model)
    messages = list(read_messages([str(SAMPLE)], Problems()))
    for message in messages:
        one, other = (
            from_file.predict(message.id, message.data),
            in_memory.predict(message.id, message.data),
        )
        assert other.log_odds == one.log_odds and other.label == one.label
        assert other.verdict == one.verdict and other.calibrated == one.calibrated
        assert other.probabilities == one.probabilities


def test_explain_gives_the_log_odds_predict_gives(saved):
    model, path = saved
    if not model.is_binary:
        pytest.skip("with more classes predict reports no log-odds")
    scorer = load_array_scorer(path)
    analyzer = Analyzer(model.tokenizer)
    for message in read_messages([str(SAMPLE)], Problems()):
        explained = explain_message(model, message.id, analyzer.tokens(message.data))
        assert explained.log_odds == scorer.predict(message.id, message.data).log_odds


def _assert_same_probabilities(one, batch):
    """Two classes: the same formula on the same log-odds, so the same floats; more
    classes: a log-sum-exp in math against numpy's, equal to ~1e-12."""
    if batch.log_odds is not None:
        assert one.probabilities == batch.probabilities
    else:
        assert one.probabilities == pytest.approx(batch.probabilities, rel=1e-12, abs=1e-300)


def test_binary_search_finds_every_term_and_no_other(saved):
    model, path = saved
    scorer = load_array_scorer(path)
    assert [scorer.column(t) for t in model.terms] == list(range(len(model.terms)))
    assert scorer.column("\uffff not a term") is None and scorer.column("") is None


def test_a_term_with_a_lone_surrogate_is_in_no_vocabulary(saved):
    model, path = saved
    scorer = load_array_scorer(path)
    text = "see http://x\ud800y.example/ now"  # the link is one token, surrogate and all
    assert scorer.column("http://x\ud800y.example/") is None
    batch = next(score(model, [Message("m", text)]))
    assert scorer.predict("m", text).log_odds == batch.log_odds


def test_a_message_of_many_distinct_terms_is_scored_by_dictionary(saved):
    model, path = saved
    scorer = load_array_scorer(path)
    data = b"".join(b"X-H%d: v\n" % i for i in range(5000)) + b"\nfree money"
    batch = next(score(model, [Message("m", data)]))
    assert scorer.predict("m", data).log_odds == batch.log_odds
    assert scorer._tables is not None  # one lookup a term, not 5,000 binary searches


@pytest.mark.parametrize("command", [["predict", "-f", "jsonl"], ["filter"]])
def test_one_message_on_stdin_imports_neither_numpy_nor_scipy_nor_pathlib_nor_typing(
    saved, command
):
    model, path = saved
    if command[0] == "filter" and not model.is_binary:
        pytest.skip("filter scores with two-class models only")
    unneeded = [m for m in NOT_ON_THE_PATH if model.training.event_model not in m]
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['nbspam', {command[0]!r}, '-m', {str(path)!r}, *{command[1:]!r}]\n"
        "try:\n    runpy.run_module('nbspam', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules))\n"
        "print(sorted(m for m in ('pathlib', 'nbspam.store.journal') if m in sys.modules))\n"
        "print(sorted(m for m in ('dataclasses', 'inspect', 'typing') if m in sys.modules))\n"
        f"print(sorted(m for m in {unneeded!r} if m in sys.modules))\n"
    )
    message = (SAMPLE / "new" / "002.eml").read_bytes()
    out = (
        subprocess.run(
            [sys.executable, "-c", probe], input=message, capture_output=True, check=True
        )
        .stdout.decode()
        .splitlines()
    )
    if command[0] == "predict":
        assert json.loads(out[0])["path"] == "-"
    else:  # the message, its verdict header first
        assert out[0].startswith("X-Nbspam-Status: ") and len(out) > 5
    out = out[-5:]  # what the probe printed after the command
    assert out[1] == "[]"
    # nor pathlib (with urllib.parse and ipaddress, a tenth of the start), nor the journal's
    # module where the model has no journal
    assert out[2] == "[]"
    # nor dataclasses with inspect (ast, dis, tokenize) nor typing: nearly a `python -c pass`
    assert out[3] == "[]"
    # nor the readers of files, folders and tables, nor what a fisher model, an explanation
    # or a training summary needs, nor (filter) the folders' moves, state and lock
    assert out[4] == "[]"


NOT_ON_THE_PATH = (
    "csv",
    "shlex",
    "nbspam.mail.messages",
    "nbspam.mail.mbox",
    "nbspam.mail.table_rows",
    "nbspam.service.mailstore",
    "nbspam.store.lock",
    "shutil",
    "tempfile",
    "nbspam.service.explanation_text",
    "nbspam.models.fisher",  # but for a fisher model
    "nbspam.cli.render",  # predictions are written by cli.prediction_lines
    "base64",  # binascii decodes base64; base64 adds 0.3 ms of imports
    "fnmatch",  # the default ignored headers are names and prefixes
)


def test_scoring_one_message_loads_neither_hashlib_nor_an_unneeded_html_parser(saved):
    # hashlib loads OpenSSL, 3-10 ms of a cold start: only training (message digests) needs
    # it; the HTML parser (some 20 ms) is loaded for HTML only, and with it (by logging)
    # `string`, whose Template compiles a pattern at import, which plain text does without
    _, path = saved
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['nbspam', 'predict', '-m', {str(path)!r}]\n"
        "try:\n    runpy.run_module('nbspam', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(*(m in sys.modules for m in ('hashlib', 'selectolax', 'string')))\n"
    )
    for name, loaded in (("001.eml", "False False False"), ("002.eml", "False True True")):
        message = (SAMPLE / "new" / name).read_bytes()
        out = subprocess.run(
            [sys.executable, "-c", probe], input=message, capture_output=True, check=True
        ).stdout.decode()
        assert out.splitlines()[-1] == loaded, name


@pytest.mark.parametrize("jobs", [1, 2])
def test_batch_of_the_scoring_table_equals_the_model(saved, jobs):
    model, path = saved
    messages = list(read_messages([str(SAMPLE)], Problems())) * 3  # several chunks
    scorer = list(load_array_scorer(path).predict_messages(messages, jobs=jobs))
    full = list(score(model, messages))
    assert [p.id for p in scorer] == [p.id for p in full]
    for one, batch in zip(scorer, full):
        assert one.log_odds == batch.log_odds  # bit for bit
        assert (one.label, one.verdict, one.calibrated) == (
            batch.label,
            batch.verdict,
            batch.calibrated,
        )
        _assert_same_probabilities(one, batch)


def test_a_batch_reads_each_page_of_the_model_once(saved, monkeypatch):
    """Before a batch is scored, the weights a score sums and the vocabulary are read, each
    page once, even where few pages are kept: the rows of coef as one array (not the whole
    array once a class, nor at all where a two-class model sums its log-odds weights), and
    the term offsets once, where the term groups are checked (the vocabulary's size is
    their shape). The batch then scores as the model does."""
    from collections import Counter

    from nbspam.store.container import PAGE

    model, path = saved
    scorer = load_array_scorer(path)
    pages = scorer._box.pages
    assert pages is not None
    monkeypatch.setattr(pages, "KEPT", 1)
    reads: Counter[int] = Counter()
    pread = pages.pread
    monkeypatch.setattr(pages, "pread", lambda size, at: reads.update([at]) or pread(size, at))
    scorer.build_index()

    def pages_of(name: str) -> list[int]:  # where the pages wholly inside array name start
        offset, size = pages.blob(name)
        first = -(-offset // PAGE) * PAGE
        return [pages._start + at for at in range(first, offset + size - PAGE + 1, PAGE)]

    for name in ("score_coef", "score_weights", "terms", "term_offsets"):
        if name in scorer._box.views:
            assert all(reads[at] <= 1 for at in pages_of(name)), name
    assert any(reads[at] for at in pages_of("terms"))
    messages = list(read_messages([str(SAMPLE / "new")], Problems()))
    batch = {p.id: p.log_odds for p in score(model, messages)}
    assert {p.id: p.log_odds for p in scorer.predict_messages(messages)} == batch


def test_predicting_a_folder_imports_neither_numpy_nor_scipy(saved):
    _, path = saved
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['nbspam', 'predict', '-m', {str(path)!r}, {str(SAMPLE / 'new')!r}]\n"
        "try:\n    runpy.run_module('nbspam', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, text=True
    ).stdout.splitlines()
    assert len(out) == len(list((SAMPLE / "new").iterdir())) + 1
    assert out[-1] == "[]"


def test_one_message_checks_the_pages_it_reads_and_only_those(tmp_path):
    """The one-message path reads the model a page at a time and verifies each page it
    reads against the file's page checksums: a weight of the message's terms corrupted is
    refused in one line; a corrupted count, which scoring never reads, is not read at all
    (the commands that read the whole file still refuse it)."""
    from nbspam.store.container import PAGE, PAGES
    from tests.helpers import cli_run
    from tests.test_hostile_models import MESSAGE, _column, unpack

    model = tmp_path / "m.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
    data = model.read_bytes()
    header, arrays = unpack(data)
    assert PAGES in arrays
    head_len = int.from_bytes(data[12:16], "little")
    start = (16 + head_len + 7) // 8 * 8
    offsets = json.loads(data[16 : 16 + head_len])["arrays"]
    message = tmp_path / "one.eml"
    message.write_bytes(MESSAGE)
    expected = cli_run("predict", "-m", model, input=MESSAGE).stdout
    # a byte of the weight of "winner"; a byte in the middle of the counts, pages away from
    # the arrays scoring reads
    for name, at, scored in [
        ("score_weights", _column(arrays, b"winner") * 8, False),
        ("term_count", len(arrays["term_count"][2]) // 2, True),
    ]:
        raw = bytearray(data)
        raw[start + offsets[name]["offset"] + at] ^= 0x40
        bad = tmp_path / f"{name}.nbm"
        bad.write_bytes(bytes(raw))
        result = cli_run("predict", "-m", bad, input=MESSAGE)
        if scored:
            assert (result.exit_code, result.stdout) == (0, expected)
        else:
            assert (result.exit_code, result.stdout) == (1, "")
            assert result.stderr == f"Error: {bad} is corrupt (checksum mismatch)\n"
        info = cli_run("info", "-m", bad)
        assert (info.exit_code, info.stderr) == (
            1,
            f"Error: {bad} is corrupt (checksum mismatch)\n",
        )
    assert len(arrays["term_count"][2]) > 4 * PAGE


def _wide_model(tmp_path, messages: int, words: int = 40):
    """A model of ``messages`` short texts of ``words`` words each, most of them seen once:
    a vocabulary of about ``messages * words`` terms."""
    texts = [
        Message(f"m{i}", " ".join(f"w{i}x{j}" for j in range(words)) + " shared", label)
        for i, label in zip(range(messages), ["ham", "spam"] * messages)
    ]
    model = fit_messages(texts, build_settings({"event_model": "multinomial", "cutoffs": "-5,5"}))
    path = tmp_path / f"wide{messages}.nbm"
    save_model(model, path)
    return model, path


def test_paged_lookup_finds_every_term_and_no_other_across_many_groups(tmp_path):
    """The one-message lookup (a search over groups of terms, then within one) finds the
    column of every term of a vocabulary of many groups, and nothing between them."""
    from nbspam.service.array_scoring import GROUP

    model, path = _wide_model(tmp_path, 120)
    quick = load_array_scorer(path)
    assert quick._paged is not None and len(model.terms) > 12 * GROUP
    assert [quick.column(t) for t in model.terms] == list(range(len(model.terms)))
    between = [t + "\x01" for t in model.terms[:: GROUP // 4]] + ["", "\uffff", "0"]
    assert [quick.column(t) for t in between] == [None] * len(between)
    message = "w3x1 w77x39 shared w119x0 nothing"
    assert (
        quick.predict("m", message).log_odds == next(score(model, [Message("m", message)])).log_odds
    )


def test_one_message_reads_pages_that_do_not_grow_with_the_model(tmp_path):
    """Scoring one message reads the pages its terms lead to (a few a term, and two a level
    of the search among groups of terms), not the file: a small share of a model of 40,000
    terms, and never more than `Pages.KEPT` pages kept in memory."""
    from nbspam.service.array_scoring import GROUP
    from nbspam.store.container import PAGE, Pages

    message = " ".join(f"w{i}x{i % 40}" for i in range(0, 1000, 67)) + " shared unknown words"
    model, path = _wide_model(tmp_path, 1000)
    quick = load_array_scorer(path)
    assert (
        quick.predict("m", message).log_odds == next(score(model, [Message("m", message)])).log_odds
    )
    terms, levels = 18, (len(model.terms) // GROUP).bit_length()
    read, pages = quick._box.pages.reads, path.stat().st_size // PAGE
    assert read <= 6 * terms + 2 * levels and read < pages / 4, (read, pages)
    assert len(quick._box.pages._pages) <= Pages.KEPT


def test_a_resident_scorer_remembers_the_terms_it_looked_up(saved, monkeypatch):
    """serve keeps one scorer for message after message: the second time a message's terms
    are scored they are remembered, read from no page of the file (looking each up again
    among the pages made a server eight times slower on the SpamAssassin model), and the
    log-odds are the same."""
    model, path = saved
    scorer = load_array_scorer(path)
    message = (SAMPLE / "new" / "001.eml").read_bytes()
    first = scorer.predict("m", message)
    reads = []
    pages = scorer._box.pages
    monkeypatch.setattr(pages, "read", lambda at, size: reads.append(at) or b"")
    assert scorer.predict("m", message) == first
    assert reads == []


def _without_groups(path: Path, to: Path) -> Path:
    """The model file at ``path`` as a writer before term groups wrote it: the same arrays
    and page checksums, without term_groups and term_group_starts."""
    from tests.test_hostile_models import pack, unpack

    header, arrays = unpack(path.read_bytes())
    del arrays["term_groups"], arrays["term_group_starts"]
    to.write_bytes(pack(header, _fit_pages(arrays)))
    return to


def _fit_pages(arrays: dict) -> dict:
    """``arrays`` with page_crc as long as the arrays before it now need."""
    from nbspam.store.container import PAGE, PAGES

    length = sum((len(data) + 7) // 8 * 8 for name, (_, _, data) in arrays.items() if name != PAGES)
    arrays[PAGES][1] = [1 + (length + PAGE - 1) // PAGE]
    return arrays


def test_a_lookup_reads_one_page(tmp_path):
    """A model file holds term groups (the term at each 2 KiB of its terms, read once when
    it is opened), so looking a term up reads the one page of its group's other terms and
    nothing else; the search over groups of 256 terms it replaces read three pages or more
    a term (offsets and terms at each level below those remembered, then the group's)."""
    from nbspam.store.container import PAGE

    model, path = _wide_model(tmp_path, 1000)  # 40,000 terms, 150 pages of terms
    reads = []
    for term in model.terms[::997] + ("w5x5 nothing", "zzz", "w999x39\x01"):
        quick = load_array_scorer(path)
        before = quick._box.pages.reads
        quick._paged.column(term.encode())
        reads.append(quick._box.pages.reads - before)
        quick._box.pages.close()
    assert max(reads) == 1, reads
    data = path.read_bytes()
    header = json.loads(data[16 : 16 + int.from_bytes(data[12:16], "little")])
    groups = header["arrays"]["term_group_starts"]["shape"][1] - 1
    assert groups == len("\n".join(model.terms).encode()) // 2048 + 1
    assert path.stat().st_size > 40 * PAGE


def test_the_term_groups_lead_to_every_term_and_to_no_other(tmp_path):
    """Exactness of the lookup by groups: every term has its own column, and a key that
    shares a group's bytes without being a term is in none: a term's prefix or extension,
    two neighbouring terms joined by a line break (a line-break search would find it), the
    first term of a group cut short, keys before the first and after the last term. A
    message of such keys scores as the model read whole does, to the bit."""
    model, path = _wide_model(tmp_path, 200)
    quick = load_array_scorer(path)
    assert quick._paged._column == quick._paged._grouped
    firsts = quick._paged._firsts
    assert len(firsts) > 5 and all(f.decode() in model.terms for f in firsts)
    assert [quick.column(t) for t in model.terms] == list(range(len(model.terms)))
    vocabulary = set(model.terms)
    neighbours = [a + "\n" + b for a, b in zip(model.terms[::50], model.terms[1::50])]
    cut = [f.decode()[:-1] for f in firsts] + [f.decode() + "\n" for f in firsts]
    keys = [t[:-1] for t in model.terms[::37]] + [t + "0" for t in model.terms[::41]]
    keys += neighbours + cut + ["", "\n", "\x00", "\uffff", "shared\n", "\nshared"]
    absent = [k for k in keys if k not in vocabulary]
    assert len(absent) > 100 and [quick.column(k) for k in absent] == [None] * len(absent)
    text = " ".join(t for t in model.terms[::301]) + " " + " ".join(absent[::7])
    whole = ArrayScorer.of_model(model)
    assert quick.predict("m", text).log_odds == whole.predict("m", text).log_odds
    assert quick.predict("m", text).log_odds == next(score(model, [Message("m", text)])).log_odds


def test_a_file_without_term_groups_is_searched_as_before(saved, tmp_path):
    """A model file written before term groups (page checksums, no groups) is read a page
    at a time and searched over groups of terms as before: the same columns, the same
    predictions, to the bit, as the file with groups."""
    model, path = saved
    old = _without_groups(path, tmp_path / "old.nbm")
    quick, before = load_array_scorer(path), load_array_scorer(old)
    assert before._paged is not None and before._paged._column != before._paged._grouped
    assert [before.column(t) for t in model.terms] == list(range(len(model.terms)))
    for message in sorted((SAMPLE / "new").iterdir()):
        data = message.read_bytes()
        assert before.predict("m", data) == quick.predict("m", data)
    from tests.helpers import cli_run

    data = (SAMPLE / "new" / "001.eml").read_bytes()
    assert (
        cli_run("predict", "-m", old, input=data).stdout
        == cli_run("predict", "-m", path, input=data).stdout
    )
    assert cli_run("info", "-m", old).exit_code == 0


def test_term_groups_add_little_to_the_file(tmp_path):
    """The groups cost about 1% of the terms' bytes: a file grows by far less than 10%."""
    model, path = _wide_model(tmp_path, 1000)
    old = _without_groups(path, tmp_path / "old.nbm")
    assert path.stat().st_size <= 1.02 * old.stat().st_size


def _crafted(path: Path, to: Path, edit) -> Path:
    """The model at ``path`` with ``edit(header, arrays)`` applied and valid checksums."""
    from tests.test_hostile_models import craft

    to.write_bytes(craft(path.read_bytes(), edit))
    return to


def _set_start(arrays, row: int, index: int, value: int) -> None:
    """term_group_starts[row, index] = value."""
    import struct

    dtype, shape, data = arrays["term_group_starts"]
    code = "<I" if dtype == "<u4" else "<Q"
    raw = bytearray(data)
    struct.pack_into(code, raw, (row * shape[1] + index) * struct.calcsize(code), value)
    arrays["term_group_starts"][2] = bytes(raw)


@pytest.mark.parametrize(
    "name, edit, one",
    [
        ("columns end early", lambda h, a: _set_start(a, 0, -1, 5), "refused"),
        ("starts end early", lambda h, a: _set_start(a, 1, -1, 5), "refused"),
        ("a group out of order", lambda h, a: _set_start(a, 0, 1, 10**6), "refused"),
        ("a start beyond the terms", lambda h, a: _set_start(a, 1, 1, 10**9), "refused"),
        ("a first term changed", lambda h, a: _set_first(a, b"zz"), "scored"),
        ("no starts", lambda h, a: a.pop("term_group_starts") and None, "refused"),
        (
            "a group's column moved",
            lambda h, a: _set_start(a, 0, 1, _column_of(a, 1) + 1),
            "either",
        ),
        ("one group of all the terms", lambda h, a: _one_group(a), "refused"),
    ],
)
def test_crafted_term_groups_are_refused_in_one_line(tmp_path, name, edit, one):
    """Term groups that do not fit the terms (a crafted file with valid checksums): one
    message is refused in one line where its lookup meets them (or misses, or finds a term
    the file holds), and every command that reads the vocabulary whole refuses the file."""
    from tests.helpers import cli_run

    model, path = _wide_model(tmp_path, 120)
    bad = _crafted(path, tmp_path / "bad.nbm", edit)
    text = " ".join(model.terms[:3] + model.terms[200:1000:50] + model.terms[-3:])
    result = cli_run("predict", "-m", bad, input=text)
    if one == "refused" or (one == "either" and result.exit_code):
        assert (result.exit_code, result.stdout) == (1, "")
        assert result.stderr.startswith(f"Error: {bad} is not a valid nbspam model: "), (
            result.stderr
        )
        assert len(result.stderr.splitlines()) == 1
    else:
        assert result.exit_code == 0, result.stderr
    info = cli_run("info", "-m", bad)
    assert (info.exit_code, info.stdout, len(info.stderr.splitlines())) == (1, "", 1)
    assert info.stderr.startswith(f"Error: {bad} is not a valid nbspam model: "), info.stderr


def test_an_old_file_whose_offsets_make_a_group_of_all_the_terms_is_refused(tmp_path, monkeypatch):
    """A file without term groups whose term offsets (crafted, valid checksums) make its
    first group of 256 terms span the whole vocabulary (its second group starts at a term
    near the end): one lookup in it would read all the terms, some 30 KB here. It is
    refused in one line past `OLD_GROUP_BYTES` (256 KiB; 16 KiB here, for a small model)."""
    import struct

    from tests.helpers import cli_run

    model, path = _wide_model(tmp_path, 120)
    old = _without_groups(path, tmp_path / "old.nbm")

    def edit(header, arrays):
        dtype, shape, data = arrays["term_offsets"]
        code = "I" if dtype == "<u4" else "Q"
        offsets = list(struct.unpack(f"<{shape[0]}{code}", data))
        far = len(offsets) - 3  # the second group's first term: a term near the end
        offsets[256], offsets[257] = offsets[far], offsets[far + 1]
        assert offsets[256] > (1 << 14) + 256
        arrays["term_offsets"][2] = struct.pack(f"<{shape[0]}{code}", *offsets)

    bad = _crafted(old, tmp_path / "bad.nbm", edit)
    monkeypatch.setattr(array_scoring, "OLD_GROUP_BYTES", 1 << 14)
    result = cli_run("predict", "-m", bad, input=model.terms[3])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: {bad} is not a valid nbspam model: a group of 256 terms longer than 16 KiB\n"
    )
    assert cli_run("predict", "-m", old, input=model.terms[3]).exit_code == 0
    info = cli_run("info", "-m", bad)
    assert (info.exit_code, info.stdout) == (1, "")
    assert info.stderr == (
        f"Error: {bad} is not a valid nbspam model: the term offsets do not match the terms\n"
    )


def _set_first(arrays, first: bytes) -> None:
    """The first term of the second group replaced by ``first`` (same length or not)."""
    firsts = arrays["term_groups"][2].split(b"\n")
    firsts[1] = first
    arrays["term_groups"][2] = b"\n".join(firsts)
    arrays["term_groups"][1] = [len(arrays["term_groups"][2])]
    _fit_pages(arrays)


def _one_group(arrays) -> None:
    """The vocabulary as one group (the numbers fit the terms): every lookup would read the
    whole of the terms, some 40 KB here, where a group of nbspam's is read in one page."""
    import struct

    dtype, shape, data = arrays["term_group_starts"]
    code = "I" if dtype == "<u4" else "Q"
    numbers = struct.unpack(f"<{2 * shape[1]}{code}", data)
    (d, end) = numbers[shape[1] - 1], numbers[-1]
    arrays["term_groups"][2] = first = arrays["term_groups"][2].split(b"\n")[0]
    arrays["term_groups"][1] = [len(first)]
    arrays["term_group_starts"][1] = [2, 2]
    arrays["term_group_starts"][2] = struct.pack(f"<4{code}", 0, d, 0, end)
    _fit_pages(arrays)


def _column_of(arrays, group: int) -> int:
    import struct

    dtype, shape, data = arrays["term_group_starts"]
    code = "<I" if dtype == "<u4" else "<Q"
    return struct.unpack_from(code, data, group * struct.calcsize(code))[0]


def test_a_resident_scorer_keeps_the_frequent_terms_among_many_rare(saved, monkeypatch):
    """The terms a scorer remembers are kept in two generations: when the newer is full it
    becomes the older, and a term found there is brought back, so a word of every message
    is not looked up among the pages again each time rare words fill the memory (a server
    that forgot everything when full looked up the SpamAssassin model's frequent words
    again every few hundred messages)."""
    from nbspam.service import array_scoring

    model, path = saved
    monkeypatch.setattr(array_scoring, "REMEMBERED", 4)
    table = load_array_scorer(path)._paged
    looked: list[bytes] = []
    search = table._column
    monkeypatch.setattr(table, "_column", lambda key: looked.append(key) or search(key))
    rare = [t.encode() for t in model.terms[1:10]]
    frequent = model.terms[0].encode()
    for key in [frequent, *rare[:3], frequent, rare[3], frequent, *rare[4:9], frequent]:
        assert table.column(key) == model.terms.index(key.decode())
    assert looked.count(frequent) == 1 and len(looked) == 10
    assert len(table._memo.new) + len(table._memo.old) <= 2 * 4
