"""One coverage-guided target under atheris (libFuzzer), in a process of its own:

    python -m tests.fuzz.atheris_main TARGET [libFuzzer flags] CORPUS_DIR [SEED_DIR ...]

`tests/fuzz/run.py` starts it with `-max_total_time` (the target's share of the budget)
and reads libFuzzer's lines (`#N ... cov: C`) for the report; a failure ends the process
with the input written where `-artifact_prefix` says. The target's packages are
instrumented as they are first imported: the seeds are run once inside the hook, so
every module a target reaches is imported (and instrumented) then; a seed that fails
is reported by libFuzzer, which runs every seed again as its first inputs.
"""

from __future__ import annotations

import contextlib
import sys


def main() -> None:
    import atheris  # the `fuzz` extra: `make fuzz` installs it

    from tests.fuzz.targets import TARGETS

    target = TARGETS[sys.argv[1]]
    with atheris.instrument_imports(include=list(target.packages)):
        for seed in target.seeds():
            with contextlib.suppress(Exception):
                target.run(seed)
    argv = [sys.argv[0], *sys.argv[2:]]
    atheris.Setup(argv, target.run)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
