# Two commands do all the set-up on a fresh machine with only python3:
#   make demo   create .venv, install nbspam, train on sample_data/, predict and explain,
#               then print the commands to try next
#   make test   create .venv, install nbspam with its test tools, run the tests
# and for the rest:
#   make lint          ruff over the code, tests and benchmarks
#   make man           the man pages of nbspam and each command, into build/man
#   make install-man   install them into $(PREFIX)/share/man/man1 (PREFIX=/usr/local)
#   make bench         accuracy and speed beside scikit-learn and bogofilter (minutes)
#   make clean         remove .venv, the demo's output and the caches
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
OUT    ?= demo-out
PREFIX ?= /usr/local
MANDIR ?= $(PREFIX)/share/man/man1
MANOUT  = build/man
PIP     = $(BIN)/python -m pip --disable-pip-version-check --quiet

.PHONY: demo test lint bench clean man install-man

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
	@echo
	@echo "Try next (the model is $(OUT)/spam.nbm; README.md and docs/ explain the rest):"
	@echo "  . $(BIN)/activate   # or call $(BIN)/nbspam"
	@echo "  nbspam predict -m $(OUT)/spam.nbm -f jsonl sample_data/new"
	@echo "  nbspam filter -m $(OUT)/spam.nbm < sample_data/new/001.eml   # the message, with its verdict header"
	@echo "  nbspam evaluate sample_data/train --folds 4"
	@echo "  nbspam info -m $(OUT)/spam.nbm"
	@echo "  nbspam --help   # every command; nbspam COMMAND --help for its options"
	@echo "  make man && man build/man/nbspam.1   # the manual pages"

test: $(VENV)/.test
	$(BIN)/python -m pytest -q

lint: $(VENV)/.test
	$(BIN)/ruff check nbspam tests bench tools

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
	$(BIN)/python bench/bigtable.py
	$(BIN)/python bench/twins.py ../shared/corpora/spamassassin
	@command -v spamc >/dev/null 2>&1 || { apt-get install -y -qq spamc || { apt-get update -qq && apt-get install -y -qq spamc; }; } >/dev/null 2>&1 || echo "spamc could not be installed: its latency is skipped"
	$(BIN)/python bench/serve.py --corpus ../shared/corpora/spamassassin
	# last, so that a regression it reports (a failing exit) leaves no benchmark unrun
	$(BIN)/python bench/speed.py --history bench/RESULTS.md

# the pages are made from the click commands by click-man, one of the test tools;
# install-man only copies them, so `make man && sudo make install-man` builds as yourself
man: $(MANOUT)/nbspam.1
	@echo "man pages in $(MANOUT)/: man $(MANOUT)/nbspam.1"

$(MANOUT)/nbspam.1: $(VENV)/.test tools/man.py $(wildcard nbspam/*.py nbspam/*/*.py)
	rm -rf $(MANOUT)
	$(BIN)/python tools/man.py $(MANOUT) >/dev/null

install-man: $(MANOUT)/nbspam.1
	install -d $(DESTDIR)$(MANDIR)
	install -m 644 $(MANOUT)/*.1 $(DESTDIR)$(MANDIR)/

clean:
	rm -rf $(VENV) $(OUT) $(MANOUT) .pytest_cache .ruff_cache .hypothesis
