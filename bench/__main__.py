"""``python -m bench``: the runner (bench/run.py)."""

from bench.run import main

main()
