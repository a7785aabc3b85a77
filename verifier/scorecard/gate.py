"""The day-0 gate: per-family thresholds a scorecard must meet, and the verdict on them.

Thresholds come from the defaults below, overridden by the profile's ``gate``
setting, overridden by a TOML file (``--gate-thresholds FILE``)::

    [default]              # every family
    min_score = 1.0
    max_error_rate = 0.05

    [structured_output]
    max_silent_acceptance = 0

    [tool_calling]
    min_pass_k = 0.9
    require = true         # an unsupported or missing family fails the gate
    max_ttft_p90_ms = 800  # met when the p90's 95% interval lies below it
    min_output_tps_p50 = 40
    # Accuracy against the --baseline's, paired case by case: the whole family, and a table
    # by category ("each" is every category) when categories need their own margin.
    max_accuracy_drop = 0.05            # or { all = 0.05, parallel = 0.2, each = 0.3 }

    [tool_calling.messages]  # the family's cases over one API (chat, messages, responses)
    min_score = 0.95

A family that is inconclusive (too many transport errors, too few graded
cases) fails the gate; it never passes it. So does an accuracy comparison that is
inconclusive, or that has no baseline to compare with.

Thresholds that name an API gate a family per API: each API the family ran over is held to
the family's case thresholds (:data:`PER_API`) with that API's table on top, and the family's
entry over all its APIs only to the rest (its rulings across APIs, ``require``, speed,
accuracy against the baseline).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from ..errors import ConfigError
from ..protocol.apis import API_NAMES


class Missed(TypedDict):
    """A threshold a family does not meet: its name, its limit, and what was found."""

    threshold: str
    limit: Any
    actual: Any


class FamilyGate(TypedDict):
    """The gate's verdict on one family.

    ``gated`` is False for a family that was not run, unsupported or only recorded (``why``
    says which); ``accuracy`` holds max_accuracy_drop's rulings when that threshold is set;
    ``apis`` the gate of each API's entry when the thresholds name an API (their misses are
    also in ``missed``, each threshold named after its API).
    """

    gated: bool
    passed: bool
    missed: list[Missed]
    why: NotRequired[str]
    accuracy: NotRequired[list[dict[str, Any]]]
    apis: NotRequired[dict[str, FamilyGate]]


class GateVerdict(TypedDict):
    """The scorecard's ``gate``: passed only when every gated family passed."""

    passed: bool
    source: str
    thresholds: dict[str, dict[str, Any]]
    families: dict[str, FamilyGate]


THRESHOLDS: dict[str, type[int] | tuple[type[int], type[float]]] = {
    # Share of graded cases that passed (the point estimate; the interval is reported beside).
    "min_score": (int, float),
    # Share of attempted cases that ended in a transport error.
    "max_error_rate": (int, float),
    # Graded cases (pass + fail) a verdict needs.
    "min_graded": int,
    # structured_output: cases whose schema was accepted and whose output broke it.
    "max_silent_acceptance": int,
    # tool_calling: share of cases right on every repeat.
    "min_pass_k": (int, float),
    # The family must have run and been graded.
    "require": bool,
    # Speed (the performance section): met only when the 95% interval's far bound is.
    "max_ttft_p90_ms": (int, float),
    "min_output_tps_p50": (int, float),
    # tool_calling, structured_output: the most accuracy may drop below the --baseline's
    # (a share), per family ("all") and category; a number, or a table by category.
    "max_accuracy_drop": (int, float),
}
# The thresholds on a family's cases, which an API's table may set for that API's cases alone;
# the others (require, speed, accuracy against the baseline) are the family's over all APIs.
PER_API = ("min_score", "max_error_rate", "min_graded", "max_silent_acceptance", "min_pass_k")
# Conformance by default: no failed check, few transport errors, enough cases to judge.
# pass^k depends on the model as much as on the serving: set it from a reference run.
DEFAULTS: dict[str, Any] = {"min_score": 1.0, "max_error_rate": 0.05, "min_graded": 10}
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {"structured_output": {"max_silent_acceptance": 0}}
# Family verdicts no threshold applies to, and what the gate says of them: nothing was graded.
UNGATED = {"unsupported": "unsupported", "recorded": "recorded: nothing compared"}
# The families that record accuracy per case, so that a run can pair it with a baseline's.
ACCURACY_FAMILIES = ("tool_calling", "structured_output")
# max_accuracy_drop's table: the family's cases together, every category, or one category.
ALL, EACH = "all", "each"
# A drop is significant when the exact McNemar test's two-sided p-value is below this.
ALPHA = 0.05
NO_BASELINE = (
    "no baseline: pass --baseline SCORECARD, a scorecard the reference endpoint's run wrote "
    "(--reference-endpoint serves parity only)"
)


def _accuracy_limit(value: Any, where: str, section: str) -> None:
    """max_accuracy_drop: only where accuracy is graded per case; shares in (0, 1), by group."""
    key = "max_accuracy_drop"
    if section not in ACCURACY_FAMILIES:
        raise ConfigError(
            f"{where}: [{section}] {key}: only {' and '.join(ACCURACY_FAMILIES)} grade accuracy "
            f"per case; set it under [{ACCURACY_FAMILIES[0]}] or [{ACCURACY_FAMILIES[1]}]"
        )
    margins = value if isinstance(value, Mapping) else {ALL: value}
    for group, margin in margins.items():
        if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 < margin < 1:
            raise ConfigError(
                f"{where}: [{section}] {key} = {value!r}: each margin must be a share above 0 "
                f"and below 1 (a drop of 0 can never be shown); {group!r} is {margin!r}; give "
                f"a number, or a table by category: {ALL} (the family), {EACH} (every "
                "category) or a category's name"
            )


def _checked(table: Any, where: str, families: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Validate a thresholds table: {"default" | family: {threshold: value}}."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table of families")
    checked: dict[str, dict[str, Any]] = {}
    for section, values in table.items():
        if section != "default" and section not in families:
            close = difflib.get_close_matches(str(section), families, n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else ""
            known = ", ".join(families)
            raise ConfigError(
                f"{where}: unknown family [{section}]{hint}; use [default] or one of {known}"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"{where}: [{section}] must be a table of thresholds")
        checked[section] = _checked_values(values, where, str(section))
    return checked


def _checked_values(values: Mapping[str, Any], where: str, section: str) -> dict[str, Any]:
    """Validate one section's thresholds, and its API tables (``[tool_calling.messages]``)."""
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if key in API_NAMES and "." not in section:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: [{section}.{key}] must be a table of thresholds")
            checked[key] = _checked_values(value, where, f"{section}.{key}")
            others = sorted(set(value) - set(PER_API))
            if others:
                raise ConfigError(
                    f"{where}: [{section}.{key}] {others[0]}: not set per API (an API's table "
                    f"takes {', '.join(PER_API)}); set it under [{section}]"
                )
            continue
        _check_value(key, value, where, section)
        checked[key] = value
    return checked


def _check_value(key: str, value: Any, where: str, section: str) -> None:
    """One threshold's name, type and range."""
    if key == "max_accuracy_drop":
        _accuracy_limit(value, where, section)
        return
    kind = THRESHOLDS.get(key)
    if kind is None:
        close = difflib.get_close_matches(str(key), THRESHOLDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        known = ", ".join(THRESHOLDS)
        apis = "" if "." in section else f"; or an API's table: {', '.join(API_NAMES)}"
        raise ConfigError(
            f"{where}: [{section}] {key}: unknown threshold{hint}; known: {known}{apis}"
        )
    wrong_bool = isinstance(value, bool) and kind is not bool
    if wrong_bool or not isinstance(value, kind):
        raise ConfigError(f"{where}: [{section}] {key} = {value!r} has the wrong type")
    if kind is not bool and value < 0:
        raise ConfigError(f"{where}: [{section}] {key} = {value!r} must be >= 0")
    if key.endswith(("_score", "_rate", "_pass_k")) and value > 1:
        raise ConfigError(f"{where}: [{section}] {key} = {value!r} is a share: 0 to 1")


def load_thresholds(
    path: Path | None, profile_gate: Any, families: tuple[str, ...]
) -> tuple[dict[str, dict[str, Any]], str]:
    """The thresholds of every family, and where they came from.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or names an unknown family,
            threshold or a value of the wrong type.
    """
    layers = [{"default": DEFAULTS, **FAMILY_DEFAULTS}]
    source = "defaults"
    if profile_gate is not None:
        layers.append(_checked(profile_gate, "profile gate", families))
        source = "profile"
    if path is not None:
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(
                f"--gate-thresholds: cannot read {str(path)!r}: {exc.strerror or exc}"
            ) from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--gate-thresholds: {str(path)!r} is not TOML: {exc}") from None
        layers.append(_checked(table, f"--gate-thresholds {path}", families))
        source = f"file {path}"
    resolved: dict[str, dict[str, Any]] = {}
    for family in families:
        merged: dict[str, Any] = {}
        for layer in layers:
            for key, value in (*layer.get("default", {}).items(), *layer.get(family, {}).items()):
                # An API's table adds to the one a lower layer set; a threshold replaces it.
                merged[key] = {**merged.get(key, {}), **value} if key in API_NAMES else value
        resolved[family] = merged
    return resolved, source


def _silent(family: Mapping[str, Any]) -> int:
    """structured_output's silent acceptances (schema accepted, output broke it)."""
    return sum(row.get("cases", 0) for row in family["metrics"].get("silent_acceptance", []))


def _speed_misses(speed: Mapping[str, Any] | None, limits: Mapping[str, Any]) -> list[Missed]:
    """The speed thresholds the family's performance figures do not meet (pure).

    A threshold is met only when the whole 95% interval meets it: a TTFT p90 whose upper
    bound is below the limit, a decode rate p50 whose lower bound is above it. Too few
    streamed requests to bound the figure is a miss, said so.
    """
    missed: list[Missed] = []
    for threshold, figure, name, side in (
        ("max_ttft_p90_ms", "ttft_ms", "p90", 1),
        ("min_output_tps_p50", "output_tokens_per_second", "p50", 0),
    ):
        if threshold not in limits:
            continue
        limit = limits[threshold]
        found = (speed or {}).get(figure)
        if not found:
            missed.append({"threshold": threshold, "limit": limit, "actual": "no streamed answer"})
            continue
        value, bound = found[name]["value"], found[name]["interval"][side]
        actual = {"value": value, "interval": found[name]["interval"], "n": found["n"]}
        if bound is None or (bound > limit if side else bound < limit):
            missed.append({"threshold": threshold, "limit": limit, "actual": actual})
    return missed


def family_gate(
    family: Mapping[str, Any] | None,
    limits: Mapping[str, Any],
    speed: Mapping[str, Any] | None = None,
) -> FamilyGate:
    """Which thresholds a family's scorecard entry (and its performance figures) misses (pure).

    Limits that name an API gate the family per API: each API's entry is held to the case
    thresholds (:data:`PER_API`) with its API's table on top, the family's entry to the rest.
    """
    named = [api for api in API_NAMES if api in limits]
    if not named or family is None or family["verdict"] in UNGATED:
        return _family_gate(family, {k: v for k, v in limits.items() if k not in API_NAMES}, speed)
    cases = {k: v for k, v in limits.items() if k in PER_API}
    overall = _family_gate(
        family, {k: v for k, v in limits.items() if k not in PER_API and k not in named}, speed
    )
    entries = family.get("apis") or {family.get("api", "chat"): family}
    apis: dict[str, FamilyGate] = {}
    for api, entry in entries.items():
        gated = _family_gate(entry, {**cases, **limits.get(api, {})})
        apis[api] = gated
        overall["missed"] += [
            {**missed, "threshold": f"{api} {missed['threshold']}"} for missed in gated["missed"]
        ]
    for api in named:
        apis.setdefault(
            api, {"gated": False, "passed": True, "missed": [], "why": "not run over this API"}
        )
    overall["passed"] = not overall["missed"]
    overall["apis"] = apis
    return overall


def _family_gate(
    family: Mapping[str, Any] | None,
    limits: Mapping[str, Any],
    speed: Mapping[str, Any] | None = None,
) -> FamilyGate:
    """Which thresholds one scorecard entry (and its performance figures) misses (pure)."""
    missed: list[Missed] = []

    def miss(threshold: str, limit: Any, actual: Any) -> None:
        missed.append({"threshold": threshold, "limit": limit, "actual": actual})

    if family is None or family["verdict"] in UNGATED:
        why = "not run" if family is None else UNGATED[family["verdict"]]
        if limits.get("require"):
            miss("require", True, why)
        return {"gated": False, "passed": not missed, "missed": missed, "why": why}
    counts = family["counts"]
    graded = counts["pass"] + counts["fail"]
    attempted = graded + counts["error"]
    if family["verdict"] == "inconclusive":
        miss("conclusive", True, "inconclusive")
    rulings = family.get("rulings")
    # A family that decides over all its cases together (a sequential test) stops once it has
    # decided: its rulings, not a count of cases, say whether it saw enough (an undecided one
    # makes the family inconclusive, missed above). Rulings across APIs, or against rotated
    # twins, compare the cases' twins, and say nothing of how many were graded.
    sequential = [r for r in rulings or () if "across" not in r and "twins" not in r]
    if not sequential and graded < limits.get("min_graded", 0):
        miss("min_graded", limits["min_graded"], graded)
    if "min_score" in limits and (family["score"] is None or family["score"] < limits["min_score"]):
        miss("min_score", limits["min_score"], family["score"])
    error_rate = counts["error"] / attempted if attempted else 0.0
    if "max_error_rate" in limits and error_rate > limits["max_error_rate"]:
        miss("max_error_rate", limits["max_error_rate"], round(error_rate, 4))
    if "max_silent_acceptance" in limits and "silent_acceptance" in family["metrics"]:
        silent = _silent(family)
        if silent > limits["max_silent_acceptance"]:
            miss("max_silent_acceptance", limits["max_silent_acceptance"], silent)
    for ruling in rulings or ():
        if ruling["verdict"] == "fail":
            miss(f"ruling {ruling['name']}", "same", ruling["outcome"])
    if rulings == [] and limits.get("require"):
        miss("require", True, "nothing compared: no reference")
    pass_k = family["metrics"].get("pass_k")
    if "min_pass_k" in limits:
        rate = pass_k.get("rate") if isinstance(pass_k, Mapping) else None
        if rate is None or rate < limits["min_pass_k"]:
            miss("min_pass_k", limits["min_pass_k"], rate)
    missed += _speed_misses(speed, limits)
    result: FamilyGate = {"gated": True, "passed": not missed, "missed": missed}
    if "max_accuracy_drop" in limits:
        rulings = accuracy_rulings(family["metrics"], limits["max_accuracy_drop"])
        for ruling in rulings:
            if ruling["verdict"] != "pass":
                miss(f"max_accuracy_drop {ruling['category']}", ruling["margin"], ruling)
        result["passed"], result["accuracy"] = not missed, rulings
    return result


def accuracy_verdict(compared: Mapping[str, Any], margin: float) -> str:
    """pass, fail or inconclusive: a paired accuracy comparison against a margin (pure).

    - fail: the drop is significant (the exact McNemar test's two-sided p below 0.05, with
      more cases lost than gained) and the observed drop is larger than `margin`;
    - pass: the 95% interval of the difference shows any drop is within the margin (its
      lower bound at or above -margin);
    - inconclusive: neither (too few cases to tell), or no case graded in both runs.
    The two are exclusive: a fail's difference, hence its lower bound, is below -margin.
    """
    if not compared.get("pairs"):
        return "inconclusive"
    drop = -compared["difference"]
    if compared["p_value"] < ALPHA and compared["lost"] > compared["gained"] and drop > margin:
        return "fail"
    if compared["interval"][0] >= -margin:
        return "pass"
    return "inconclusive"


def accuracy_rulings(metrics: Mapping[str, Any], limit: Any) -> list[dict[str, Any]]:
    """max_accuracy_drop's verdict on each group it names: the family (all), categories (pure).

    Without a baseline's per-case outcomes there is no verdict (``None``, with why); a
    category the thresholds name that no paired case has is inconclusive, said so.
    """
    margins: Mapping[str, Any] = limit if isinstance(limit, Mapping) else {ALL: limit}
    paired = (metrics.get("accuracy") or {}).get("paired")
    if not isinstance(paired, Mapping) or "unavailable" in paired:
        why = NO_BASELINE if not isinstance(paired, Mapping) else paired["unavailable"]
        return [
            {"category": group, "margin": margin, "verdict": None, "why": why}
            for group, margin in margins.items()
        ]
    categories = paired["by_category"]
    named = {g: m for g, m in margins.items() if g != EACH}
    if EACH in margins:
        named = {**dict.fromkeys(categories, margins[EACH]), **named}
    # The family first, then its categories by name.
    groups = dict(sorted(named.items(), key=lambda kv: (kv[0] != ALL, kv[0])))
    rulings = []
    for group, margin in groups.items():
        compared = paired[ALL] if group == ALL else categories.get(group)
        if compared is None:
            close = difflib.get_close_matches(group, categories, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            rulings.append(
                {
                    "category": group,
                    "margin": margin,
                    "verdict": "inconclusive",
                    "why": f"no case of category {group!r} graded in both runs{hint}; "
                    f"categories: {', '.join(categories)}",
                }
            )
            continue
        rulings.append(
            {
                "category": group,
                "margin": margin,
                "verdict": accuracy_verdict(compared, margin),
                **{k: compared[k] for k in ("difference", "interval", "p_value", "pairs")},
                **{k: compared[k] for k in ("lost", "gained")},
            }
        )
    return rulings


def evaluate(
    scorecard: Mapping[str, Any], thresholds: Mapping[str, Mapping[str, Any]], source: str
) -> GateVerdict:
    """The gate's verdict on a scorecard: passed only when every family meets its thresholds."""
    ran = scorecard["families"]
    speeds = (scorecard.get("performance") or {}).get("families") or {}
    families = {
        name: family_gate(ran.get(name), limits, speeds.get(name))
        for name, limits in thresholds.items()
        if name in ran or name in scorecard["settings"]["families"] or limits.get("require")
    }
    return {
        "passed": all(f["passed"] for f in families.values()),
        "source": source,
        "thresholds": {name: dict(thresholds[name]) for name in families},
        "families": families,
    }
