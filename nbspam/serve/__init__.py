"""`nbspam serve`: a resident scorer that speaks the spamd protocol (spamc, Exim) and milter
(Postfix, Sendmail), docs/serving.md.

The modules, each with one job: `models` (the site model once in memory, its journal
applied as it grows, read again when the file is replaced; the user a request names to
the layer over it), `scoring`
(what a request asks of a model: a verdict, the message with its header, a report, a
lesson; through the same library functions the commands call), `spamd` and `milter` (the
two protocols, bytes in and out, no scoring of their own), `server` (sockets, limits,
time-outs, signals, the log line, systemd's socket activation and readiness).
"""
