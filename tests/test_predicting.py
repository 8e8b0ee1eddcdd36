"""The batch path of `nbspam predict` (service.predicting): how many processes score a batch."""

from __future__ import annotations

from nbspam.core import parallel
from nbspam.mail.message import Message
from tests.helpers import cli_run


def messages(n: int, size: int) -> list[Message]:
    return [Message(f"m{i}", b"x" * size) for i in range(n)]


def test_a_small_batch_is_scored_in_one_process_and_a_large_one_by_the_workers():
    from nbspam.service.predicting import SMALL_BATCH, _jobs_for

    small = messages(100, (SMALL_BATCH - 1) // 100)  # one byte short of the bound
    got, jobs = _jobs_for(iter(small), 4)
    assert (list(got), jobs) == (small, 1)
    large = messages(100, -(-SMALL_BATCH // 50))  # the bound reached at the 50th: no further
    stream = iter(large)
    got, jobs = _jobs_for(stream, 4)
    assert jobs == 4
    assert len(list(stream)) == 50  # still unread: read ahead only as far as needed
    got, jobs = _jobs_for(iter(large), 4)
    assert list(got) == large  # all of them, in order
    stream = iter(small)
    assert _jobs_for(stream, 1) == (stream, 1)  # one job: nothing read ahead
    assert list(_jobs_for(iter([]), 2)[0]) == []


def test_predict_starts_no_workers_for_a_few_short_texts(tmp_path, monkeypatch):
    for label, text in (("ham", "project meeting notes"), ("spam", "win a free prize now")):
        (tmp_path / "data" / label).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "data" / label / f"{i}.txt").write_text(text)
    model = tmp_path / "m.nbm"
    assert cli_run("train", tmp_path / "data", "-o", model, "--min-count", "1").exit_code == 0
    asked = []
    imap_ordered = parallel.imap_ordered

    def counted(func, context, items, jobs=1):
        asked.append(jobs)
        return imap_ordered(func, context, items, jobs)

    monkeypatch.setattr(parallel, "imap_ordered", counted)
    result = cli_run("predict", "-m", model, "--jobs", "2", tmp_path / "data")
    assert result.exit_code == 0
    assert [line.split(": ")[1].split()[0] for line in result.stdout.splitlines()] == [
        "ham"
    ] * 3 + ["spam"] * 3
    assert asked == [1]
