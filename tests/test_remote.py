"""Messages named by local globs and fsspec URLs: the same messages as the folders they come
from, so the same model, on the local engine and on Dask."""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from nbspam.store.modelfile import load_model
from tests.helpers import SAMPLE, assert_same_model, cli_run

fsspec = pytest.importorskip("fsspec", reason="fsspec comes with the dask extra")


@pytest.fixture
def bucket():
    """memory://.../{ham,spam}/NNN.eml: the sample's training messages at a URL."""
    fs = fsspec.filesystem("memory")
    root = f"/nbspam-{uuid.uuid4().hex}"
    for label in ("ham", "spam"):
        for path in sorted((SAMPLE / "train" / label).iterdir()):
            fs.pipe(f"{root}/{label}/{path.name}", path.read_bytes())
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def trained(tmp_path, name, *data):
    path = tmp_path / name
    result = cli_run("train", *data, "-o", path, "--event-model", "multinomial")
    assert result.exit_code == 0, result.stderr
    return load_model(path)


@pytest.mark.parametrize("engine", [(), ("--engine", "dask", "-j", "1")], ids=["local", "dask"])
def test_training_from_urls_gives_the_model_of_the_folders(bucket, tmp_path, engine):
    if engine:
        pytest.importorskip("distributed", reason="--engine dask needs the dask extra")
    folders = trained(tmp_path, "folders.nbm", SAMPLE / "train")
    urls = trained(
        tmp_path, "urls.nbm", f"spam={bucket}/spam/*.eml", f"ham={bucket}/ham/*.eml", *engine
    )
    assert_same_model(urls, folders)


def test_training_from_local_globs_gives_the_model_of_the_folders(tmp_path):
    folders = trained(tmp_path, "folders.nbm", SAMPLE / "train")
    spam, ham = SAMPLE / "train" / "spam", SAMPLE / "train" / "ham"
    globs = trained(tmp_path, "globs.nbm", f"spam={spam}/0*.eml", f"ham={ham}/*.eml")
    assert_same_model(globs, folders)


def test_an_mbox_at_a_url_is_split_into_its_messages(bucket, sample_model_path):
    mbox = b"".join(
        b"From sender@example.com Mon Jan  1 00:00:00 2024\n" + path.read_bytes() + b"\n"
        for path in sorted((SAMPLE / "train" / "spam").iterdir())[:2]
    )
    fsspec.filesystem("memory").pipe(f"{bucket[len('memory://') :]}/box.mbox", mbox)
    result = cli_run("predict", "-m", sample_model_path, "-f", "jsonl", f"{bucket}/box.mbox")
    assert result.exit_code == 0, result.stderr
    ids = [json.loads(line)["path"] for line in result.stdout.splitlines()]
    assert ids == [f"{bucket}/box.mbox#1", f"{bucket}/box.mbox#2"]


def test_nothing_matching_and_an_unknown_protocol_are_one_line(bucket, sample_model_path):
    result = cli_run("predict", "-m", sample_model_path, f"{bucket}/none/*.eml")
    assert (result.exit_code, result.stderr) == (3, f"{bucket}/none/*.eml: no file matches\n")
    result = cli_run("predict", "-m", sample_model_path, "nosuch://x/*.eml")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: nosuch://x/*.eml: no such file, and not a URL nbspam reads "
        "(it reads s3://, gs://, az://, http:// and https://)\n",
    )
    result = cli_run("predict", "-m", sample_model_path, str(SAMPLE / "none-*.eml"))
    assert (result.exit_code, result.stderr) == (3, f"{SAMPLE / 'none-*.eml'}: no file matches\n")


def test_without_fsspec_a_url_says_how_to_install_it(monkeypatch, sample_model_path):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec fails
    result = cli_run("predict", "-m", sample_model_path, "memory://bucket/x.eml")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: memory://bucket/x.eml: reading URLs needs fsspec: pip install fsspec"
        " (it comes with 'dask[distributed]')\n",
    )
