"""Where a scorecard came from, as short text: run, time, verifier, corpus, settings."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

PROVENANCE_COLUMNS = (
    "Run",
    "Time (UTC)",
    "Verifier",
    "Corpus",
    "Settings",
    "Profile",
    "Transcript",
)
SHORT_DIGEST = 12


def short_digest(digest: Any) -> str:
    """The first hex digits of a sha256, enough to tell runs apart."""
    return str(digest)[:SHORT_DIGEST] if digest else "none"


def timestamp(value: Any) -> str:
    """An ISO 8601 time as ``YYYY-MM-DD HH:MM:SS`` in UTC (as given when it does not parse)."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def when_text(run: Mapping[str, Any]) -> str:
    """Started and finished, and the sessions after a --resume."""
    sessions = run.get("sessions", 1)
    text = f"{timestamp(run.get('started'))} to {timestamp(run.get('finished'))}"
    return text + (f" ({sessions} sessions)" if sessions and sessions > 1 else "")


def setting_text(value: Any) -> str:
    """One setting's value as it was typed.

    ``default`` for null, ``K=V,...`` for a mapping (``--repeats tool_calling=3``).
    """
    if value is None:
        return "default"
    if isinstance(value, Mapping):
        return ",".join(f"{key}={item}" for key, item in value.items())
    return str(value)


def settings_text(settings: Mapping[str, Any]) -> str:
    """Every recorded setting on one line, the families last (null: the default)."""
    parts = [
        f"{key} {setting_text(value)}"
        for key, value in sorted(settings.items())
        if key not in ("families", "generated")
    ]
    generated = settings.get("generated")
    if isinstance(generated, Mapping):
        parts.append(f"generated {generated.get('cases')} (seed {generated.get('seed')})")
    families = settings.get("families") or []
    parts.append(f"families {', '.join(families) if families else 'none'}")
    return "; ".join(parts)


def profile_text(profile: Mapping[str, Any] | None) -> str:
    """The reference profile's name and digests, or none."""
    if not profile:
        return "none"
    return (
        f"{profile.get('name')} (template {short_digest(profile.get('template_sha256'))}, "
        f"{profile.get('tokenizer')} {short_digest(profile.get('tokenizer_sha256'))})"
    )


def cases_text(corpus: Mapping[str, Any]) -> str:
    """Which cases a run sent: as published (a vendor can recognise them), rotated, packs."""
    rotation = corpus.get("rotation")
    packs = corpus.get("packs") or ()
    if rotation:
        digest = str(rotation.get("commitment", "")).split(":")[-1]
        said = (
            f"published cases and {rotation.get('twins')} rotated twins "
            f"(secret's commitment {short_digest(digest)})"
        )
    elif packs and corpus.get("public") is False:
        said = "private packs only"
    else:
        said = "published cases only: no --rotate"
    if packs and corpus.get("public") is not False:
        said += f", and {len(packs)} private pack(s)"
    return said


def provenance_cells(card: Mapping[str, Any]) -> list[str]:
    """One scorecard's provenance, in the order of PROVENANCE_COLUMNS."""
    transcript = card.get("transcript", {})
    return [
        str(card.get("run", {}).get("id")),
        when_text(card.get("run", {})),
        f"{card.get('verifier', {}).get('name')} {card.get('verifier', {}).get('version')}",
        f"{short_digest(card.get('corpus', {}).get('digest'))} "
        f"({cases_text(card.get('corpus', {}))})",
        settings_text(card.get("settings", {})),
        profile_text(card.get("profile")),
        f"{short_digest(transcript.get('sha256'))} ({transcript.get('records')} records)",
    ]
