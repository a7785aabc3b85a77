"""The false-alarm rate and power of ``public_cases_special_cased``, the --rotate comparison.

Two measurements:

- **The clean simulated vendor over many secrets.** For each secret the vendor is told it
  (``verifier simulate --rotate``) and the verifier runs every family whose cases vary with
  ``--rotate`` over chat, both under the kimi-k2-thinking profile: how many pairs each family
  compared, how many went either way, and whether the ruling fired. The clean vendor is
  right on every case and every twin, so any alarm here is a bug.
- **The decision rule under the null and under special-casing.** A vendor that treats every
  prompt alike, of accuracy A per case (each case's own chance drawn around A, the same for
  the case and its twin), answers P pairs; the verifier's own comparison
  (``verifier.scorecard.rotated.comparison``) rules on the records. The share of trials where
  it fires is the false-alarm rate. A vendor that also special-cases the published prompts
  (right on a share S of those it would otherwise get wrong, as if a better model answered
  them) gives the power at S. Case and twin are drawn independently given their chance: the
  noisiest vendor of that accuracy. A deterministic one whose twin goes as its case does
  gives fewer discordant pairs, so the rule fires sooner for it.

    python bench/rotation.py                             # 20 secrets, 2,000 trials per row
    python bench/rotation.py --secrets 0 --trials 10000  # the decision rule alone

The last line is one JSON record.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifier.cases.rotation import SUFFIX  # noqa: E402
from verifier.config import FAMILY_NAMES  # noqa: E402
from verifier.outcome import CaseRecord, Outcome, Status  # noqa: E402
from verifier.scorecard.rotated import ALPHA, comparison  # noqa: E402
from verifier.simulator.process import SimulatorProcess, child_env  # noqa: E402

ENV = "VERIFIER_BENCH_ROTATION"
# Every family whose cases vary: all but parity (its reference's prompts are the published) and
# context (its haystacks are drawn from the run's seed, which the secret gives: no twins).
FAMILIES = tuple(name for name in FAMILY_NAMES if name not in ("parity", "context"))
PROFILE = "kimi-k2-thinking"
# Tool calling's pairs over one API (its 174 cases, 172 graded on both sides over chat).
PAIRS = 172
ACCURACIES = (0.5, 0.8, 0.95)
SHARES = (0.0, 0.1, 0.25, 0.5)


def clean_runs(secrets: int) -> list[dict[str, Any]]:
    """One --rotate run against the clean vendor per secret: each family's comparison."""
    rows = []
    for number in range(secrets):
        env = {ENV: f"bench-rotation-secret-{number:04d}"}
        vendor = SimulatorProcess(["--profile", PROFILE, "--rotate", ENV], env)
        try:
            with tempfile.TemporaryDirectory() as folder:
                command = [
                    *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
                    *("--endpoint", vendor.url, "--out", f"{folder}/out", "--rotate", ENV),
                    *("--families", ",".join(FAMILIES), "--api", "chat", "--profile", PROFILE),
                    *("--repeats", "tool_calling=1", "--concurrency", "8"),
                ]
                subprocess.run(
                    command, cwd=folder, env=child_env(env), capture_output=True, check=False
                )
                card = json.loads(Path(f"{folder}/out/scorecard.json").read_text())
        finally:
            vendor.stop()
        for name in FAMILIES:
            found = card["families"][name]["metrics"]["rotation"]
            rows.append(
                {
                    "secret": number,
                    "family": name,
                    "pairs": found["pairs"],
                    "lost": found["lost"],
                    "gained": found["gained"],
                    "alarm": found["p_value"] < ALPHA,
                }
            )
    return rows


def _record(case: str, right: bool) -> CaseRecord:
    outcome = Outcome(Status.PASS, metrics={"accurate": right})
    return CaseRecord(f"tool_calling/{case}", "tool_calling", outcome)


def trial(rng: random.Random, accuracy: float, share: float, pairs: int) -> bool:
    """One simulated run: whether the verifier's comparison calls it special-casing."""
    records = []
    for n in range(pairs):
        # Each case's own chance, around the vendor's accuracy; the same for its twin.
        chance = min(1.0, max(0.0, rng.gauss(accuracy, 0.15)))
        public = rng.random() < share or rng.random() < chance
        records += [_record(f"c{n}", public), _record(f"c{n}{SUFFIX}", rng.random() < chance)]
    (ruling,) = comparison(records)["rulings"]
    return bool(ruling["verdict"] == "fail")


def decision_rule(trials: int, pairs: int, seed: int) -> list[dict[str, Any]]:
    """The share of trials the ruling fires, per accuracy and special-cased share."""
    rng = random.Random(seed)
    rows = []
    for accuracy in ACCURACIES:
        for share in SHARES:
            fired = sum(trial(rng, accuracy, share, pairs) for _ in range(trials))
            rows.append(
                {"accuracy": accuracy, "share": share, "trials": trials, "fired": fired / trials}
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--secrets", type=int, default=20, help="clean runs (default: 20)")
    parser.add_argument("--trials", type=int, default=2000, help="per row (default: 2000)")
    parser.add_argument("--pairs", type=int, default=PAIRS, help=f"default: {PAIRS}")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    clean = clean_runs(args.secrets)
    alarms = sum(row["alarm"] for row in clean)
    print(f"clean vendor, {args.secrets} secrets: {alarms} alarms in {len(clean)} family runs")
    for row in clean:
        if row["lost"] or row["gained"]:
            print(f"  secret {row['secret']} {row['family']}: {row['lost']}/{row['gained']}")
    rule = decision_rule(args.trials, args.pairs, args.seed)
    print(f"decision rule, {args.pairs} pairs, alpha {ALPHA}: share of runs called special-cased")
    print("accuracy  " + "  ".join(f"S={share:<5}" for share in SHARES))
    for accuracy in ACCURACIES:
        cells = [f"{r['fired']:<7.3f}" for r in rule if r["accuracy"] == accuracy]
        print(f"{accuracy:<8}  " + "  ".join(cells))
    record = {
        "bench": "rotation",
        "alpha": ALPHA,
        "clean": {"secrets": args.secrets, "family_runs": len(clean), "alarms": alarms},
        "rule": rule,
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
