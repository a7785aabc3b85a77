"""The vision family end to end on the simulated vendor: defects caught, the clean one passes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VerifierRun
from verifier import resources
from verifier.cases.corpus import load_corpus

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
VISION = load_corpus(["vision"]).cases
# The small test profile documents 2048 pixels as the largest side.
MAX_SIDE = 2048


def ids(*checks: str, where: Callable[[dict[str, Any]], bool] = lambda data: True) -> set[str]:
    return {
        f"vision/{c.id}"
        for c in VISION
        if c.data["check"] in checks and where(c.data) and not over_limit(c.data)
    }


def over_limit(data: dict[str, Any]) -> bool:
    return any(max(i.get("size", [64, 64])) > MAX_SIDE for i in data.get("images", []))


def largest(data: dict[str, Any]) -> int:
    return max(max(i.get("size", [64, 64])) for i in data["images"])


def several(data: dict[str, Any]) -> bool:
    return len(data["images"]) > 1


def webp(data: dict[str, Any]) -> bool:
    return data["images"][0].get("format") == "webp"


ANSWERED = ids("semantic", "stale_cache", "transport")
OVER_LIMIT = {f"vision/{c.id}" for c in VISION if over_limit(c.data)}
CHECK = {f"vision/{c.id}": c.data["check"] for c in VISION}
INVALID = ids("invalid")
# What each defect must fail, with which code; every other case passes.
DEFECTS: dict[str, dict[str, set[str]]] = {
    # The prompt counts no image tokens either: every image-token case within the limit.
    "vision-images-ignored": {"answer_mismatch": ANSWERED, "image_tokens_mismatch": ids("tokens")},
    "vision-first-image-only": {"only_first_image_used": ids("semantic", where=several)},
    "vision-order-swapped": {"image_order_swapped": ids("semantic", where=several)},
    "vision-webp-unsupported-silently": {"format_not_seen": ids("transport", where=webp)},
    "vision-token-miscount-large": {
        "image_tokens_mismatch": ids("tokens", where=lambda d: largest(d) > 512)
    },
    "vision-invalid-image-500": {"invalid_image_5xx": INVALID, "image_5xx": OVER_LIMIT},
    # The wire defect that answers every invalid request as if valid: invalid images too, and
    # images over the documented limit, which get an answer about something else.
    "invalid-request-200": {
        "invalid_image_accepted": INVALID,
        "answer_mismatch": {key for key in OVER_LIMIT if CHECK[key] == "semantic"},
        "image_tokens_mismatch": {key for key in OVER_LIMIT if CHECK[key] == "tokens"},
    },
}


def vision_run(run_verifier: Run, url: str, *args: str) -> VerifierRun:
    run = run_verifier(url, "--families", "vision", "--max-retries", "0", *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


def failed(run: VerifierRun) -> dict[str, set[str]]:
    by_code: dict[str, set[str]] = {}
    for key, outcome in run.outcomes().items():
        if outcome["status"] == "fail":
            by_code.setdefault(outcome["code"], set()).add(key)
    return by_code


def test_clean_vendor_passes_with_the_profile_s_image_rule(
    simulator: Start, run_verifier: Run, small_profile_dir: Path
) -> None:
    profile = str(small_profile_dir)
    run = vision_run(run_verifier, simulator("--profile", profile), "--profile", profile)
    family = run.family("vision")
    assert run.returncode == 0, run.stdout[-3000:]
    assert family["counts"] == {
        "pass": len(VISION) - len(OVER_LIMIT),
        "fail": 0,
        "error": 0,
        "unsupported": len(OVER_LIMIT),
    }
    # Images over the documented limit are refused with a 400 that says so.
    outcomes = run.outcomes()
    for key in OVER_LIMIT:
        assert "largest side allowed is 2048" in outcomes[key]["message"], key
    assert run.scorecard["endpoint"]["vision"] is True
    assert set(family["metrics"]["checks"]) == {c.data["check"] for c in VISION}


def test_clean_vendor_without_a_profile_runs_everything_but_the_size_limit(
    simulator: Start, run_verifier: Run
) -> None:
    run = vision_run(run_verifier, simulator())
    unsupported = {k for k, o in run.outcomes().items() if o["status"] == "unsupported"}
    # Without an image-token rule the tokens cases still check what any rule says (an image
    # costs prompt tokens); only the documented largest side needs the profile.
    assert unsupported == {"vision/invalid-oversize"}
    assert run.family("vision")["counts"]["fail"] == 0
    assert run.returncode == 0


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_is_caught_with_its_code(
    simulator: Start, run_verifier: Run, small_profile_dir: Path, defect: str
) -> None:
    profile = str(small_profile_dir)
    run = vision_run(
        run_verifier, simulator("--profile", profile, "--defect", defect), "--profile", profile
    )
    assert failed(run) == DEFECTS[defect]
    assert run.family("vision")["counts"]["error"] == 0
    assert run.returncode == 1


def test_a_stale_image_cache_is_caught(
    simulator: Start, run_verifier: Run, small_profile_dir: Path
) -> None:
    profile = str(small_profile_dir)
    url = simulator("--profile", profile, "--defect", "vision-stale-cache", fresh=True)
    run = vision_run(run_verifier, url, "--profile", profile)
    codes = failed(run)
    assert codes["stale_image_cache"] == ids("stale_cache")
    # Cases that share their question text with an earlier one get its answer too.
    assert set(codes) == {"stale_image_cache", "answer_mismatch"}


def test_a_text_only_endpoint_must_refuse_images_with_a_4xx(
    simulator: Start, run_verifier: Run
) -> None:
    run = vision_run(run_verifier, simulator("--no-vision"))
    family = run.family("vision")
    assert run.scorecard["endpoint"]["vision"] is False
    # Every invalid image but the oversized one, which needs the profile's documented limit.
    invalid = INVALID - {"vision/invalid-oversize"}
    statuses = {k: o["status"] for k, o in run.outcomes().items()}
    assert {k for k, s in statuses.items() if s == "pass"} == invalid
    assert family["counts"]["unsupported"] == len(VISION) - len(invalid)
    assert run.returncode == 0


def test_a_text_only_endpoint_that_answers_images_with_500_fails(
    simulator: Start, run_verifier: Run
) -> None:
    run = vision_run(run_verifier, simulator("--no-vision", "--defect", "vision-invalid-image-500"))
    assert run.scorecard["endpoint"]["vision"] is None
    codes = failed(run)
    invalid = INVALID - {"vision/invalid-oversize"}
    assert codes["invalid_image_5xx"] == invalid
    # Every valid image.
    assert codes["image_5xx"] == {f"vision/{c.id}" for c in VISION} - INVALID
    assert run.returncode == 1
