# Two commands do all the set-up on a fresh machine with only python3:
#   make demo   create .venv, install nbspam, train on sample_data/, predict and explain
#   make test   create .venv, install nbspam with its test tools, run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
OUT    ?= demo-out
PIP     = $(BIN)/python -m pip --disable-pip-version-check --quiet

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# compat editable mode: a plain path entry, which imports faster than an import hook
EDITABLE = --config-settings editable_mode=compat

# nbspam's own modules are compiled once here: where PYTHONDONTWRITEBYTECODE is set, every
# start would otherwise compile them again
$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(PIP) install $(EDITABLE) -e .
	$(BIN)/python -m compileall -q nbspam
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(PIP) install $(EDITABLE) -e '.[test]'
	$(BIN)/python -m compileall -q nbspam
	touch $(VENV)/.runtime $@

demo: $(VENV)/.runtime
	@mkdir -p $(OUT)
	$(BIN)/nbspam train sample_data/train -o $(OUT)/spam.nbm
	$(BIN)/nbspam predict -m $(OUT)/spam.nbm sample_data/new sample_data/mbox/spam.mbox sample_data/maildir/ham
	$(BIN)/nbspam explain -m $(OUT)/spam.nbm --top 8
	$(BIN)/nbspam explain -m $(OUT)/spam.nbm --top 12 sample_data/new/001.eml

test: $(VENV)/.test
	$(BIN)/python -m pytest -q

lint: $(VENV)/.test
	$(BIN)/ruff check nbspam tests bench

# bogofilter (Debian's package) runs beside nbspam for comparison where it can be installed
bench: $(VENV)/.test
	@command -v bogofilter >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bogofilter; } >/dev/null 2>&1 || echo "bogofilter could not be installed: its rows are skipped"
	for corpus in spamassassin sms-spam-collection enron1; do \
	  $(BIN)/python bench/cv.py ../shared/corpora/$$corpus --variant "nbspam" \
	    --variant "nbspam multinomial:event-model=multinomial" \
	    --variant "nbspam bernoulli:event-model=bernoulli;alpha=0.5" \
	    --variant "nbspam fisher:event-model=fisher" --sklearn --bogofilter || exit 1; \
	done
	$(BIN)/python bench/tables.py ../shared/corpora/spambase/spambase.csv --sklearn
	$(BIN)/python bench/speed.py
	$(BIN)/python bench/twins.py ../shared/corpora/spamassassin

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache .hypothesis
