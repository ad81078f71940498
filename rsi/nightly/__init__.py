"""``rsi nightly``: re-verify, re-bench and re-run the pipeline unattended, compare every figure with a baseline
nightly and the history, and write a report (docs/nightly.md).

Modules: ``plan`` (the phases and their exact commands), ``run`` (machine lock, resume, orchestration), ``figure``
and ``extract`` (figures with their samples, from each phase's output), ``history`` (nightly runs in the SQLite
store), ``compare`` (the judge's statistics applied across runs), ``next`` (which op group to search next),
``plots`` and ``report`` (report.html, report.md, results.csv, repro.sh), ``cli`` (the subcommand).
"""
